"""Architecture rules the import-linter contracts do not express, checked on the source with ``ast``.

* A module never imports a private (``_underscore``) module of another package: a helper another
  package needs is public. Within its own package (sub-packages included) a module
  may import the package's private modules (docs/style.md §14: a facade over private modules).
* Every ``LimitExceeded(...)`` names its limit by a ``Limits`` field, as a string literal or a variable
  typed ``LimitName``: limit names are typed, not strings made up at the raise site, so that
  ``--limit NAME=VALUE`` can raise whatever was hit.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest

from refdecoder import Limits
from refdecoder.errors import LimitExceeded, LimitName

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("refdecoder", "tokenizers_matrix", "props", "serving_sim", "maskcert")


def _modules() -> Iterator[tuple[str, Path]]:
    """``(dotted module name, path)`` of every module of the packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _exists(module: str) -> bool:
    base = ROOT.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imported(module: str, path: Path, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of every module the source imports (``from p import m``: ``p.m`` when
    that is a module), relative imports resolved, inside functions and ``TYPE_CHECKING`` too."""
    package = module if _is_package(path) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield node.lineno, base
            for alias in node.names:
                if _exists(f"{base}.{alias.name}"):
                    yield node.lineno, f"{base}.{alias.name}"


def _private_owner(name: str) -> str | None:
    """The package a private module belongs to (``a.b._c.d`` -> ``a.b``), None for a public one."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_module_imports_another_packages_private_module() -> None:
    bad = []
    for module, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in _imported(module, path, tree):
            if name.split(".")[0] not in PACKAGES:
                continue
            owner = _private_owner(name)
            if owner is not None and not (module == owner or module.startswith(owner + ".")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not bad, "private modules imported from another package:\n" + "\n".join(bad)


def test_the_private_import_check_sees_relative_and_from_imports() -> None:
    tree = ast.parse("from ..backends import _common\nfrom refdecoder._drafts import UNKNOWN\n")
    names = [n for _, n in _imported("props.checks.x", ROOT / "props" / "checks" / "x.py", tree)]
    assert "props.backends._common" in names
    assert "refdecoder._drafts" in names
    assert _private_owner("props.backends._common") == "props.backends"
    assert _private_owner("refdecoder.keywords") is None


def test_limit_name_is_one_name_per_limits_field() -> None:
    assert list(get_args(LimitName)) == [f.name for f in fields(Limits)]


def _limit_exceeded_classes() -> set[str]:
    """``LimitExceeded`` and its subclasses (whose ``limit`` is a ``LimitName`` too), by name."""
    import refdecoder._fsa  # noqa: F401 - defines ByteViewTooLarge

    out, todo = set(), [LimitExceeded]
    while todo:
        c = todo.pop()
        out.add(c.__name__)
        todo += c.__subclasses__()
    return out


def _limit_field_ok(arg: ast.expr, tree: ast.AST, func: ast.AST | None) -> bool:
    """A string literal naming a ``Limits`` field, a name annotated ``LimitName`` in the enclosing
    function, or ``e.limit`` of an ``except LimitExceeded as e`` (or of a subclass of it)."""
    names = {f.name for f in fields(Limits)}
    if isinstance(arg, ast.Constant):
        return arg.value in names
    if isinstance(arg, ast.Name) and func is not None:
        for node in ast.walk(func):
            if isinstance(node, ast.arg) and node.arg == arg.id and node.annotation is not None:
                return ast.unparse(node.annotation) == "LimitName"
            if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == arg.id:
                return ast.unparse(node.annotation) == "LimitName"
        return False
    if isinstance(arg, ast.Attribute) and arg.attr == "limit" and isinstance(arg.value, ast.Name):
        return any(
            isinstance(h, ast.ExceptHandler)
            and h.name == arg.value.id
            and h.type is not None
            and ast.unparse(h.type).rpartition(".")[2] in _limit_exceeded_classes()
            for h in ast.walk(tree)
        )
    return False


def _limit_exceeded_calls(tree: ast.AST) -> Iterator[tuple[ast.Call, ast.AST | None]]:
    """Every ``LimitExceeded(...)`` call with its enclosing function (None at module level)."""

    def visit(node: ast.AST, func: ast.AST | None) -> Iterator[tuple[ast.Call, ast.AST | None]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call) and ast.unparse(child.func).endswith("LimitExceeded"):
                yield child, func
            yield from visit(child, inner)

    yield from visit(tree, None)


def test_every_limit_exceeded_names_a_limits_field() -> None:
    bad = []
    count = 0
    for _, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call, func in _limit_exceeded_calls(tree):
            count += 1
            arg = (
                call.args[0]
                if call.args
                else next((k.value for k in call.keywords if k.arg == "limit"), None)
            )
            if arg is None or not _limit_field_ok(arg, tree, func):
                bad.append(f"{path.relative_to(ROOT)}:{call.lineno}: {ast.unparse(call)[:100]}")
    assert count > 30  # the scan sees the raise sites
    assert not bad, "LimitExceeded naming no Limits field:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        ('raise LimitExceeded("dfa_states", 1, 2)', True),
        ('raise LimitExceeded("objects_alternatives", 1, 2)', False),
        ('raise LimitExceeded(f"{kw}_alternatives", 1, 2)', False),
        ("def f(limit: LimitName):\n    raise LimitExceeded(limit, 1)", True),
        ("def f(limit: str):\n    raise LimitExceeded(limit, 1)", False),
        ("try:\n    pass\nexcept LimitExceeded as e:\n    raise LimitExceeded(e.limit, 1)", True),
    ],
)
def test_the_limit_name_check_tells_fields_from_other_names(source: str, ok: bool) -> None:
    tree = ast.parse(source)
    [(call, func)] = list(_limit_exceeded_calls(tree))
    assert _limit_field_ok(call.args[0], tree, func) is ok
