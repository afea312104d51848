"""Spec minimization by delta debugging: the smallest spec that still shows a defect.

:func:`minimize` shrinks a :class:`~props.contract.findings.SpecRef` for as long as a predicate ``still``
(which runs an engine and says whether the defect is still there) holds. The search is *ddmin*, from
A. Zeller and R. Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", IEEE Transactions on
Software Engineering 28(2):183-200, 2002, applied not to the spec's text but to the lists its
*structure* is made of: the keywords of a schema object, the entries of ``properties`` / ``$defs``, the
branches of ``anyOf``, the alternatives of a regex or of a GBNF rule, the items of a sequence, the
characters of a literal, the options of a choice, the lists of a structural tag's format tree, the lines
of a Lark grammar and the names of a special-token table. Each list is reduced by :func:`ddmin` (the
complements of ever finer chunks: the largest cuts first); rewrites that are not removals (hoist a
subschema, inline a ``$ref`` or a rule, flatten a one-branch ``anyOf``, shrink a number) run between
them, and the passes repeat, greedily, until a whole round changes nothing.

Rules of the search:

- A candidate is tried only if it is strictly smaller than the current spec: by :func:`size` (the length of
  the canonical JSON of the source), then by the sum of the magnitudes of its numbers (so that
  ``maxLength: 50`` → ``25`` counts). That order is well founded, so the search terminates.
- A candidate is tried only if it is well formed, else it is skipped without calling ``still``: a JSON
  Schema passes its metaschema's ``check_schema`` (2020-12 unless ``$schema`` names another) and its local
  ``$ref`` s resolve; a regex (and a schema's ``pattern``) compiles with Python's ``re`` (or, when the
  original does not, with ``regex``, else with the reference); a GBNF grammar compiles with the reference
  (a refusal with :class:`refdecoder.Unsupported` or :class:`refdecoder.LimitExceeded` is still tried:
  ``still`` decides), and so do a structural tag and a Lark grammar (an original the reference cannot
  read is left alone); a choice is a non-empty list of strings. When the original itself fails the check, a
  weaker one is used (a schema is an object or a boolean, a grammar parses and its rules are all defined).
- ``still`` is never called on the original (assumed to show the defect), never twice on one candidate
  (memoized on the canonical JSON of the source), at most ``max_calls`` times and not after ``deadline``
  (on ``time.monotonic()``); when the budget runs out the best spec so far comes back, ``exhausted=True``.
- The search is pure and deterministic: its result depends only on the spec and ``still``'s answers.
"""

from __future__ import annotations

import copy
import json
import math
import re
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import unquote

import jsonschema
import regex as _regex_module
from jsonschema.exceptions import SchemaError

import refdecoder
from props.contract.findings import SpecKind, SpecRef

__all__ = ["Minimized", "ddmin", "minimize", "size"]

T = TypeVar("T")
Path = tuple[Any, ...]  # dict keys and list indices from the root of a tree
_MISSING: Any = object()


@dataclass(frozen=True)
class Minimized:
    """The result of :func:`minimize`: the smallest ``spec`` found that still satisfies the predicate (the
    original if none smaller did), how many predicate calls it took, and whether the budget (calls or
    deadline) ran out before a fixpoint. ``note`` says why a spec was not reduced at all when its kind
    has no reducer."""

    spec: SpecRef
    steps: int
    exhausted: bool
    note: str = ""


def _canon(source: Any) -> str:
    return json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def size(spec: SpecRef) -> int:
    """The length of the canonical JSON of ``spec.source`` (sorted keys, no spaces): what reports show."""
    return len(_canon(spec.source))


def _magnitude(value: Any) -> float:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return abs(value) if math.isfinite(value) else 0
    if isinstance(value, dict):
        return sum(_magnitude(v) for v in value.values())
    if isinstance(value, list):
        return sum(_magnitude(v) for v in value)
    return 0


class _Exhausted(Exception):
    """The call budget or the deadline ran out."""


class _Search:
    """The current best spec, as a ``tree`` that ``render`` turns into a source, and the budget."""

    def __init__(
        self,
        spec: SpecRef,
        still: Callable[[SpecRef], bool],
        max_calls: int,
        deadline: float | None,
        tree: Any,
        render: Callable[[Any], Any],
        valid: Callable[[Any], bool],
    ) -> None:
        self.spec = spec
        self.still = still
        self.max_calls = max_calls
        self.deadline = deadline
        self.tree = tree
        self.render = render
        self.valid = valid
        self.calls = 0
        text = _canon(spec.source)
        self.rank: tuple[int, float] = (len(text), _magnitude(spec.source))
        # Canonical sources already judged: the original, the accepted, the failed, the invalid, the larger.
        self.seen: set[str] = {text}

    def attempt(self, tree: Any) -> bool:
        """Whether the spec ``tree`` renders to is strictly smaller, well formed, new, and still shows the
        defect; if so it becomes the current spec."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Exhausted
        source = self.render(tree)
        text = _canon(source)
        if text in self.seen:
            return False
        self.seen.add(text)
        rank = (len(text), _magnitude(source))
        if rank >= self.rank or not self.valid(source):
            return False
        if self.calls >= self.max_calls:
            raise _Exhausted
        self.calls += 1
        if not self.still(replace(self.spec, source=copy.deepcopy(source))):  # a copy: ``still`` may mutate
            return False
        self.spec, self.tree, self.rank = replace(self.spec, source=source), tree, rank
        return True


def minimize(
    spec: SpecRef,
    still: Callable[[SpecRef], bool],
    *,
    max_calls: int = 200,
    deadline: float | None = None,
) -> Minimized:
    """The smallest spec reachable from ``spec`` by structural reductions for which ``still`` holds
    (module docstring). ``still(candidate)`` says whether ``candidate`` still shows the defect; it is
    assumed true of ``spec`` and is never called on it; an exception it raises propagates. A spec whose
    source has not the form of its kind comes back unchanged, after no call."""
    if deadline is not None and time.monotonic() > deadline:
        return Minimized(spec, 0, True)
    if spec.kind not in _KINDS:
        return Minimized(spec, 0, False, _NOT_REDUCED.get(spec.kind, f"no reducer for {spec.kind} specs"))
    prepare, reduce = _KINDS[spec.kind]
    plan = prepare(spec.source)
    if plan is None:
        return Minimized(spec, 0, False)
    tree, render, valid = plan
    search = _Search(spec, still, max_calls, deadline, tree, render, valid)
    try:
        reduce(search)
    except _Exhausted:
        return Minimized(search.spec, search.calls, True)
    return Minimized(search.spec, search.calls, False)


# -- ddmin and trees ------------------------------------------------------------------------------------


def _split(c: list[T], n: int) -> list[list[T]]:
    """``c`` cut into ``n`` chunks Δ_1..Δ_n of nearly equal length."""
    out, start = [], 0
    for i in range(n):
        end = start + (len(c) - start) // (n - i)
        out.append(c[start:end])
        start = end
    return out


def ddmin(items: Sequence[T], test: Callable[[list[T]], bool], min_len: int = 0) -> list[T]:
    """Zeller & Hildebrandt's ddmin: a 1-minimal sub-list ``c`` of ``items`` (order kept) with ``test(c)``,
    where ``test(items)`` is assumed. ``c`` is cut into ``n`` chunks Δ_1..Δ_n; each complement
    ∇_i = c − Δ_i is tried in turn, and on success ``c`` becomes ∇_i and ``n`` becomes max(n − 1, 2); when
    no complement holds, the granularity doubles, until the chunks are single items. This is the
    complement-only ddmin (Zeller, *Why Programs Fail*, 2nd ed., 2009, ch. 5): the 2002 paper also tries
    each Δ_i alone, which on specs whose parts are mostly needed costs about twice the predicate calls
    for the same result. Sub-lists shorter than ``min_len`` are never tested; ``[]`` is tested first when
    allowed (the largest cut of all)."""
    c = list(items)
    if len(c) <= min_len:
        return c
    if min_len == 0 and test([]):
        return []
    n = 2
    while len(c) > max(min_len, 1):
        n = min(n, len(c))
        deltas = _split(c, n)
        for i in range(n):
            nabla = [x for j, delta in enumerate(deltas) if j != i for x in delta]
            if len(nabla) >= min_len and test(nabla):
                c, n = nabla, max(n - 1, 2)
                break
        else:
            if n >= len(c):
                break
            n = min(2 * n, len(c))
    return c


def _lookup(tree: Any, path: Path) -> Any:
    for step in path:
        in_dict = isinstance(tree, dict) and isinstance(step, str) and step in tree
        in_list = isinstance(tree, list) and isinstance(step, int) and 0 <= step < len(tree)
        if not (in_dict or in_list):
            return _MISSING
        tree = tree[step]
    return tree


def _assign(tree: Any, path: Path, value: Any) -> Any:
    """A copy of ``tree`` with ``value`` at ``path`` (only the containers along the path are copied)."""
    if not path:
        return value
    out: Any = dict(tree) if isinstance(tree, dict) else list(tree)
    out[path[0]] = _assign(tree[path[0]], path[1:], value)
    return out


def _ddmin_at(search: _Search, path: Path, min_len: int, guard: Callable[[Any], bool] | None = None) -> None:
    """ddmin over the entries of the dict, the items of the list or the characters of the string at
    ``path`` of the current tree; ``guard`` vets the reduced value before the whole candidate is tried."""
    base = search.tree
    value = _lookup(base, path)
    if not isinstance(value, (dict, list, str)):
        return
    items = list(value)  # a dict's keys, a list's items, a string's characters

    def rebuild(keep: list[Any]) -> Any:
        if isinstance(value, dict):
            return {k: value[k] for k in keep}
        return "".join(keep) if isinstance(value, str) else keep

    def test(keep: list[Any]) -> bool:
        reduced = rebuild(keep)
        if guard is not None and not guard(reduced):
            return False
        return search.attempt(_assign(base, path, reduced))

    ddmin(items, test, min_len)


def _shrink_int(search: _Search, path: Path) -> None:
    """Shrink the integer at ``path`` toward 0: try 0, then ±1, then bisect the magnitude between the
    largest one known to fail and the smallest known to work."""
    base = search.tree
    value = _lookup(base, path)
    sign = -1 if value < 0 else 1

    def works(magnitude: int) -> bool:
        return search.attempt(_assign(base, path, sign * magnitude))

    bad, good = -1, abs(value)
    for m in (0, 1):
        if m >= good:
            return
        if works(m):
            return
        bad = m
    while good - bad > 1:
        mid = (bad + good) // 2
        if works(mid):
            good = mid
        else:
            bad = mid


def _shrink_number(search: _Search, path: Path) -> None:
    value = _lookup(search.tree, path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, int):
        _shrink_int(search, path)
        return
    if not math.isfinite(value):
        return
    base = search.tree
    for v in (0, 1 if value > 0 else -1, int(value)):
        if search.attempt(_assign(base, path, v)):
            return


# -- well-formedness of regexes -------------------------------------------------------------------------


def _compiles_re(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except (re.error, OverflowError, RecursionError, ValueError):
            return False
    return True


def _compiles_regex_module(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _regex_module.compile(pattern)
        except (_regex_module.error, OverflowError, RecursionError, ValueError):
            return False
    return True


def _compiles_reference(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        refdecoder.compile(refdecoder.Regex(pattern))
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return True  # well formed, refused: still decides
    except (refdecoder.MaskcertError, RecursionError):
        return False
    return True


def _regex_checker(pattern: str) -> Callable[[Any], bool]:
    """The strictest check the original ``pattern`` passes: Python's ``re``, else ``regex``, else the
    reference."""
    if _compiles_re(pattern):
        return _compiles_re
    if _compiles_regex_module(pattern):
        return _compiles_regex_module
    return _compiles_reference


# -- JSON Schema ----------------------------------------------------------------------------------------

_ANNOTATIONS = frozenset(
    {
        "$schema",
        "title",
        "description",
        "examples",
        "default",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_SCHEMA_ONE = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "propertyNames",
        "contentSchema",
    }
)
_SCHEMA_LISTS = {"anyOf": 1, "oneOf": 1, "allOf": 1, "prefixItems": 0, "items": 0}  # keyword: min length
_VALUE_LISTS = {"enum": 1, "required": 0, "type": 1, "examples": 0}
_NUMBERS = frozenset(
    {
        "maxLength",
        "minLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)


def _is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def _subschemas(node: Any) -> Iterator[tuple[Path, Any]]:
    """The direct subschemas of a schema object: (path relative to it, subschema)."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if _is_schema(sub):
                    yield (key, name), sub
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                if _is_schema(sub):
                    yield (key, i), sub
        elif key in _SCHEMA_ONE and _is_schema(value):
            yield (key,), value


def _refs(value: Any) -> list[str]:
    """Every ``$ref`` string in ``value``."""
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    if not isinstance(value, dict):
        return []
    own = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
    return own + [r for v in value.values() for r in _refs(v)]


def _pointer(ref: str) -> list[str] | None:
    """The JSON Pointer tokens of a local ``#/...`` reference; None for other references."""
    if not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if fragment == "":
        return []
    if not fragment.startswith("/"):
        return None  # an anchor
    return [t.replace("~1", "/").replace("~0", "~") for t in fragment[1:].split("/")]


def _resolve(tree: Any, tokens: list[str]) -> Any:
    """The value JSON Pointer ``tokens`` name in ``tree``, or ``_MISSING``."""
    node = tree
    for token in tokens:
        step: Any = int(token) if isinstance(node, list) and token.isdigit() else token
        node = _lookup(node, (step,))
        if node is _MISSING:
            return _MISSING
    return node


def _refs_resolve(tree: Any) -> bool:
    for ref in _refs(tree):
        tokens = _pointer(ref)
        if tokens is not None and _resolve(tree, tokens) is _MISSING:
            return False
    return True


def _schema_ok(source: Any) -> bool:
    if not _is_schema(source):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = jsonschema.validators.validator_for(source, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(source)
        except SchemaError:
            return False
    return _refs_resolve(source)


def _prepare_json(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    if not _is_schema(source):
        return None
    valid = _schema_ok if _schema_ok(source) else _is_schema
    return source, _identity, valid


def _identity(tree: Any) -> Any:
    return tree


def _strip_annotations(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out: Any = {k: v for k, v in node.items() if k not in _ANNOTATIONS}
    for rel, sub in list(_subschemas(out)):
        out = _assign(out, rel, _strip_annotations(sub))
    return out


def _drop_unused_defs(tree: Any) -> Any:
    """``tree`` without the root ``$defs`` / ``definitions`` entries no reference reaches."""
    if not isinstance(tree, dict):
        return tree
    containers = {k: tree[k] for k in ("$defs", "definitions") if isinstance(tree.get(k), dict)}
    outside = {k: v for k, v in tree.items() if k not in containers}
    used: set[tuple[str, str]] = set()
    frontier = _refs(outside)
    while frontier:
        tokens = _pointer(frontier.pop())
        if not tokens or tokens[0] not in containers:
            continue
        if len(tokens) == 1:  # the whole container is referenced
            used.update((tokens[0], name) for name in containers[tokens[0]])
            continue
        key = (tokens[0], tokens[1])
        if key in used or tokens[1] not in containers[tokens[0]]:
            continue
        used.add(key)
        frontier.extend(_refs(containers[tokens[0]][tokens[1]]))
    out = dict(outside)
    for name, defs in containers.items():
        kept = {k: v for k, v in defs.items() if (name, k) in used}
        if kept:
            out[name] = kept
    return out


def _hoisted(tree: Any, path: Path, sub: Any) -> Any:
    """``sub`` to stand in place of the schema at ``path``; at the root it keeps the root's definitions
    if it refers to any."""
    if path or not isinstance(sub, dict) or not isinstance(tree, dict) or not _refs(sub):
        return sub
    extra = {k: tree[k] for k in ("$defs", "definitions") if k in tree and k not in sub}
    return _drop_unused_defs({**sub, **extra})


def _merged(rest: dict[str, Any], sub: Any) -> Any:
    """``rest`` and the schema ``sub`` as one schema object, or None if their keywords clash."""
    if sub is True:
        return rest
    if not rest:
        return sub
    if isinstance(sub, dict) and not (rest.keys() & sub.keys()):
        return {**rest, **sub}
    return None


def _json_structure(search: _Search, path: Path) -> None:
    """Drop keywords of the schema at ``path``, then entries of its maps, branches and values of its
    lists."""
    _ddmin_at(search, path, 0)
    node = _lookup(search.tree, path)
    if not isinstance(node, dict):
        return
    for key in list(node):
        value = _lookup(search.tree, (*path, key))
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            _ddmin_at(search, (*path, key), 0)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            _ddmin_at(search, (*path, key), _SCHEMA_LISTS[key])
        elif key in _VALUE_LISTS and isinstance(value, list):
            _ddmin_at(search, (*path, key), _VALUE_LISTS[key])


def _json_rewrite(search: _Search, path: Path) -> None:
    """Replace the schema at ``path`` by one of its subschemas, inline its ``$ref`` (dropping definitions
    nothing refers to any more), or replace a one-branch ``allOf`` / ``anyOf`` / ``oneOf`` by the branch."""
    tree = search.tree
    node = _lookup(tree, path)
    if not isinstance(node, dict):
        return
    for _, sub in list(_subschemas(node)):
        if search.attempt(_assign(tree, path, _hoisted(tree, path, sub))):
            return
    ref = node.get("$ref")
    tokens = _pointer(ref) if isinstance(ref, str) else None
    if tokens is not None:
        target = _resolve(tree, tokens)
        if _is_schema(target):
            inlined = _merged({k: v for k, v in node.items() if k != "$ref"}, target)
            if inlined is not None and search.attempt(_drop_unused_defs(_assign(tree, path, inlined))):
                return
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and len(branches) == 1:
            flat = _merged({k: v for k, v in node.items() if k != key}, branches[0])
            if flat is not None and search.attempt(_assign(tree, path, flat)):
                return


def _json_values(search: _Search, path: Path) -> None:
    """Shorten the strings of ``const``, ``enum`` and ``pattern``; shrink numeric keywords."""
    node = _lookup(search.tree, path)
    if not isinstance(node, dict):
        return
    for key in list(node):
        where = (*path, key)
        value = _lookup(search.tree, where)
        if key == "const" and isinstance(value, str):
            _ddmin_at(search, where, 0)
        elif key == "pattern" and isinstance(value, str):
            _ddmin_at(search, where, 0, guard=_regex_checker(value))
        elif key == "enum" and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    _ddmin_at(search, (*where, i), 0)
        elif key in _NUMBERS:
            _shrink_number(search, where)


def _each_schema(search: _Search, visit: Callable[[_Search, Path], None]) -> None:
    """``visit`` every schema object of the current tree, top down (breadth first: the largest cuts come
    first); children are read after their parent's visit, so they are those of the reduced parent."""
    queue: deque[Path] = deque([()])
    while queue:
        path = queue.popleft()
        if not isinstance(_lookup(search.tree, path), dict):
            continue
        visit(search, path)
        queue.extend(path + rel for rel, _ in _subschemas(_lookup(search.tree, path)))


def _reduce_json(search: _Search) -> None:
    while True:
        rank = search.rank
        search.attempt(_strip_annotations(search.tree))
        _each_schema(search, _json_structure)
        _each_schema(search, _json_rewrite)
        _each_schema(search, _json_values)
        if search.rank == rank:
            return


# -- regex ----------------------------------------------------------------------------------------------
# Tree: alternatives = [sequence, ...]; sequence = [node, ...]; a node is a token (an atom: a character,
# an escape, a class; or a quantifier) or a group {"open": "(" | "(?:" | "(?P<name>" | ..., "alts": [...]}.
# Rendering is the exact inverse of parsing (checked before reducing).


class _ParseFail(Exception):
    pass


_RX_ESCAPE = re.compile(
    r"\\(?:x\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[NpPkg](?:\{[^}]*\}|<[^>]*>)"
    r"|[0-9]{1,3}|.)",
    re.DOTALL,
)
_RX_QUANTIFIER = re.compile(r"(?:[*+?]|\{(?:\d+(?:,\d*)?|,\d+)\})[?+]?")
_RX_ATOM_GROUP = re.compile(r"\(\?(?:#[^)]*|P=\w+|[aiLmsux]+)\)")
_RX_OPEN = re.compile(r"\((?:\?(?:[:=!>|]|<[=!]|P?<[A-Za-z_]\w*>|[aiLmsux]*(?:-[imsx]+)?:))?")


def _rx_class_end(p: str, pos: int) -> int:
    i = pos + 1
    if i < len(p) and p[i] == "^":
        i += 1
    if i < len(p) and p[i] == "]":
        i += 1
    while i < len(p) and p[i] != "]":
        i += 2 if p[i] == "\\" else 1
    if i >= len(p):
        raise _ParseFail
    return i + 1


def _rx_alternatives(p: str, pos: int) -> tuple[list[list[Any]], int]:
    alts: list[list[Any]] = [[]]
    while pos < len(p):
        c = p[pos]
        if c == ")":
            break
        if c == "|":
            alts.append([])
            pos += 1
            continue
        m = _RX_ATOM_GROUP.match(p, pos)
        if m:
            alts[-1].append(m.group())
            pos = m.end()
        elif c == "(":
            m = _RX_OPEN.match(p, pos)
            assert m is not None
            inner, end = _rx_alternatives(p, m.end())
            if end >= len(p):
                raise _ParseFail
            alts[-1].append({"open": m.group(), "alts": inner})
            pos = end + 1
        elif c == "[":
            end = _rx_class_end(p, pos)
            alts[-1].append(p[pos:end])
            pos = end
        elif c == "\\":
            m = _RX_ESCAPE.match(p, pos)
            if m is None:
                raise _ParseFail
            alts[-1].append(m.group())
            pos = m.end()
        else:
            m = _RX_QUANTIFIER.match(p, pos)
            end = m.end() if m else pos + 1
            alts[-1].append(p[pos:end])
            pos = end
    return alts, pos


def _rx_parse(p: str) -> list[list[Any]]:
    alts, pos = _rx_alternatives(p, 0)
    if pos != len(p):
        raise _ParseFail  # an unbalanced ')'
    return alts


def _rx_render(alts: Any) -> str:
    return "|".join("".join(_rx_node(n) for n in seq) for seq in alts)


def _rx_node(node: Any) -> str:
    return node if isinstance(node, str) else node["open"] + _rx_render(node["alts"]) + ")"


def _rx_units(seq: list[Any]) -> list[list[Any]]:
    """The nodes of ``seq`` grouped as atom + its quantifiers (a quantifier goes with what it repeats)."""
    units: list[list[Any]] = []
    for node in seq:
        if units and isinstance(node, str) and _RX_QUANTIFIER.fullmatch(node):
            units[-1].append(node)
        else:
            units.append([node])
    return units


def _prepare_regex(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    if not isinstance(source, str):
        return None
    try:
        alts = _rx_parse(source)
    except _ParseFail:
        return None
    if _rx_render(alts) != source:
        return None
    return alts, _rx_render, _regex_checker(source)


def _rx_sequence(search: _Search, path: Path) -> None:
    """Drop atoms (with their quantifiers) of the sequence at ``path``, then quantifiers alone, then
    replace a group by one of its alternatives."""
    base = search.tree
    units = _rx_units(_lookup(base, path))

    def test(keep: list[list[Any]]) -> bool:
        return search.attempt(_assign(base, path, [node for unit in keep for node in unit]))

    ddmin(units, test, 0)
    i = 0
    while i < len(units := _rx_units(_lookup(search.tree, path))):
        if len(units[i]) > 1:
            flat = [node for k, unit in enumerate(units) for node in (unit[:1] if k == i else unit)]
            search.attempt(_assign(search.tree, path, flat))
        i += 1
    _hoist_groups(search, path)


def _hoist_groups(search: _Search, path: Path) -> None:
    """Replace a group node of the sequence at ``path`` by the items of one of its alternatives."""
    j = 0
    while j < len(seq := _lookup(search.tree, path)):
        node = seq[j]
        if isinstance(node, dict) and "alts" in node:
            for alt in node["alts"]:
                if search.attempt(_assign(search.tree, path, seq[:j] + alt + seq[j + 1 :])):
                    break
        j += 1


def _each_alternatives(
    search: _Search, roots: list[Path], visit: Callable[[_Search, Path], None], key: str
) -> None:
    """``visit`` every alternatives list of a regex or GBNF tree, top down, from ``roots``; group nodes
    hold theirs under ``key``."""
    queue: deque[Path] = deque(roots)
    while queue:
        path = queue.popleft()
        if not isinstance(_lookup(search.tree, path), list):
            continue
        visit(search, path)
        for i, seq in enumerate(_lookup(search.tree, path)):
            for j, node in enumerate(seq):
                if isinstance(node, dict) and key in node:
                    queue.append((*path, i, j, key))


def _rx_visit(search: _Search, path: Path) -> None:
    _ddmin_at(search, path, 1)
    for i in range(len(_lookup(search.tree, path))):
        _rx_sequence(search, (*path, i))


def _reduce_regex(search: _Search) -> None:
    while True:
        rank = search.rank
        _each_alternatives(search, [()], _rx_visit, "alts")
        if search.rank == rank:
            return


# -- GBNF -----------------------------------------------------------------------------------------------
# Tree: [{"name": str, "alts": alternatives}, ...]; alternatives = [sequence, ...]; sequence = [node, ...];
# a node is {"t": "lit", "units": [character or escape, ...], "q": postfix} | {"t": "ref", "name", "q"} |
# {"t": "atom", "text": class or "." or token, "q"} | {"t": "group", "alts", "q"}. Rendering drops
# comments and puts each rule on one line; an empty sequence renders as "" (no symbol).

_G_TOKEN = re.compile(
    r"""(?P<space>\s+|\#[^\r\n]*)
    |(?P<define>::=)
    |(?P<lit>"(?:\\.|[^"\\])*")
    |(?P<cls>\[(?:\\.|[^\]\\])*\])
    |(?P<token>!?<[^>]*>)
    |(?P<name>[A-Za-z0-9_-]+)
    |(?P<punct>[()|.])
    |(?P<post>[*+?]|\{[^}]*\})""",
    re.VERBOSE | re.DOTALL,
)
_G_UNIT = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)|.", re.DOTALL)


def _g_tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _G_TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            raise _ParseFail
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group()))
        pos = m.end()
    return out


class _GParser:
    def __init__(self, text: str) -> None:
        self.toks = _g_tokens(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        i = self.pos + ahead
        return self.toks[i] if i < len(self.toks) else ("end", "")

    def rules(self) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = []
        while self.pos < len(self.toks):
            (kind, name), (kind2, _) = self.peek(), self.peek(1)
            if kind != "name" or kind2 != "define":
                raise _ParseFail
            self.pos += 2
            rules.append({"name": name, "alts": self.alternatives(False)})
        return rules

    def alternatives(self, nested: bool) -> list[list[dict[str, Any]]]:
        alts = [self.sequence(nested)]
        while self.peek() == ("punct", "|"):
            self.pos += 1
            alts.append(self.sequence(nested))
        return alts

    def sequence(self, nested: bool) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            kind, text = self.peek()
            if kind == "name" and self.peek(1)[0] == "define":
                if nested:
                    raise _ParseFail
                return items
            if kind == "end" or (kind == "punct" and text in "|)"):
                return items
            self.pos += 1
            if kind == "post":
                if not items:
                    raise _ParseFail
                items[-1]["q"] += re.sub(r"\s+", "", text)
            elif kind == "name":
                items.append({"t": "ref", "name": text, "q": ""})
            elif kind == "lit":
                items.append({"t": "lit", "units": _G_UNIT.findall(text[1:-1]), "q": ""})
            elif kind in ("cls", "token") or text == ".":
                items.append({"t": "atom", "text": text, "q": ""})
            elif text == "(":
                alts = self.alternatives(True)
                if self.peek() != ("punct", ")"):
                    raise _ParseFail
                self.pos += 1
                items.append({"t": "group", "alts": alts, "q": ""})
            else:
                raise _ParseFail


def _g_parse(text: str) -> list[dict[str, Any]] | None:
    try:
        return _GParser(text).rules()
    except _ParseFail:
        return None


def _g_render(rules: Any) -> str:
    return "".join(f"{r['name']} ::= {_g_alts(r['alts'])}\n" for r in rules)


def _g_alts(alts: Any) -> str:
    return " | ".join(" ".join(_g_node(n) for n in seq) or '""' for seq in alts)


def _g_node(node: Any) -> str:
    t = node["t"]
    if t == "lit":
        body = '"' + "".join(node["units"]) + '"'
    elif t == "ref":
        body = node["name"]
    elif t == "group":
        body = "(" + _g_alts(node["alts"]) + ")"
    else:
        body = node["text"]
    return str(body + node["q"])


def _g_names(alts: Any) -> set[str]:
    """The rule names ``alts`` refers to."""
    out: set[str] = set()
    for seq in alts:
        for node in seq:
            if node["t"] == "ref":
                out.add(node["name"])
            elif node["t"] == "group":
                out |= _g_names(node["alts"])
    return out


def _g_prune(alts: Any, defined: set[str]) -> list[list[Any]]:
    """``alts`` without the references to rules not in ``defined``."""
    return [
        [
            {**n, "alts": _g_prune(n["alts"], defined)} if n["t"] == "group" else n
            for n in seq
            if n["t"] != "ref" or n["name"] in defined
        ]
        for seq in alts
    ]


def _g_keep(rules: Any, keep: set[str]) -> list[dict[str, Any]]:
    """The rules named in ``keep``, with the references to the others removed."""
    kept = [r for r in rules if r["name"] in keep]
    defined = {r["name"] for r in kept}
    return [{**r, "alts": _g_prune(r["alts"], defined)} for r in kept]


def _g_nodes(rules: Any) -> Iterator[tuple[Path, Any]]:
    """Every node of the grammar, with its path."""

    def walk(alts: Any, path: Path) -> Iterator[tuple[Path, Any]]:
        for i, seq in enumerate(alts):
            for j, node in enumerate(seq):
                yield (*path, i, j), node
                if node["t"] == "group":
                    yield from walk(node["alts"], (*path, i, j, "alts"))

    for k, rule in enumerate(rules):
        yield from walk(rule["alts"], (k, "alts"))


def _gbnf_parts(source: Any) -> tuple[str, str] | None:
    if isinstance(source, str):
        return source, "root"
    if isinstance(source, dict) and isinstance(source.get("text"), str):
        root = source.get("root", "root")
        return (source["text"], root) if isinstance(root, str) else None
    return None


def _gbnf_compiles(text: str, root: str) -> bool:
    try:
        refdecoder.compile(refdecoder.Gbnf(text, root))
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return True  # well formed, refused: still decides
    except (refdecoder.MaskcertError, RecursionError):
        return False
    return True


def _gbnf_defined(text: str, root: str) -> bool:
    rules = _g_parse(text)
    if rules is None:
        return False
    names = [r["name"] for r in rules]
    used = set().union(*(_g_names(r["alts"]) for r in rules)) if rules else set()
    return root in names and used <= set(names) and len(set(names)) == len(names)


def _prepare_gbnf(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    parts = _gbnf_parts(source)
    if parts is None:
        return None
    text, root = parts
    rules = _g_parse(text)
    if rules is None or root not in {r["name"] for r in rules}:
        return None
    check = _gbnf_compiles if _gbnf_compiles(text, root) else _gbnf_defined
    if not check(_g_render(rules), root):
        return None  # the normal form would not stand for the original

    def render(tree: Any) -> Any:
        return _g_render(tree) if isinstance(source, str) else {**source, "text": _g_render(tree)}

    def valid(candidate: Any) -> bool:
        got = _gbnf_parts(candidate)
        return got is not None and check(*got)

    return rules, render, valid


def _g_root(search: _Search) -> str:
    parts = _gbnf_parts(search.spec.source)
    return parts[1] if parts else "root"


def _g_drop_rules(search: _Search) -> None:
    root = _g_root(search)
    base = search.tree
    names = [r["name"] for r in base if r["name"] != root]

    def test(keep: list[str]) -> bool:
        return search.attempt(_g_keep(base, {root, *keep}))

    ddmin(names, test, 0)


def _g_inline_one(rules: Any, path: Path, root: str) -> Any:
    """The grammar with the reference at ``path`` replaced by its rule's body (spliced in when the rule has
    one alternative and the reference no postfix, else as a group), the rule dropped if nothing else refers
    to it; None for a reference to its own rule."""
    node = _lookup(rules, path)
    owner = rules[path[0]]["name"]
    target = next((r for r in rules if r["name"] == node["name"]), None)
    if target is None or target["name"] == owner:
        return None
    seq_path, j = path[:-1], path[-1]
    seq = _lookup(rules, seq_path)
    if len(target["alts"]) == 1 and not node["q"]:
        out = _assign(rules, seq_path, seq[:j] + target["alts"][0] + seq[j + 1 :])
    else:
        out = _assign(rules, path, {"t": "group", "alts": target["alts"], "q": node["q"]})
    name = target["name"]
    if name != root and not any(name in _g_names(r["alts"]) for r in out if r["name"] != name):
        out = [r for r in out if r["name"] != name]
    return out


def _g_inline(search: _Search) -> None:
    root = _g_root(search)
    changed = True
    while changed:
        changed = False
        for path, node in list(_g_nodes(search.tree)):
            if node["t"] == "ref":
                out = _g_inline_one(search.tree, path, root)
                if out is not None and search.attempt(out):
                    changed = True
                    break


def _g_visit(search: _Search, path: Path) -> None:
    """Drop alternatives of the alternatives list at ``path``, items of its sequences, and replace groups
    by one of their alternatives."""
    _ddmin_at(search, path, 1)
    for i in range(len(_lookup(search.tree, path))):
        _ddmin_at(search, (*path, i), 0)
        _hoist_groups(search, (*path, i))


def _g_values(search: _Search) -> None:
    """Shorten literals and drop postfix operators."""
    for path, _ in list(_g_nodes(search.tree)):
        node = _lookup(search.tree, path)
        if not isinstance(node, dict):
            continue
        if node["t"] == "lit":
            _ddmin_at(search, (*path, "units"), 1)
        node = _lookup(search.tree, path)
        if node["q"]:
            search.attempt(_assign(search.tree, (*path, "q"), ""))


def _reduce_gbnf(search: _Search) -> None:
    search.attempt(search.tree)  # the normal form: comments and layout dropped
    while True:
        rank = search.rank
        _g_drop_rules(search)
        _g_inline(search)
        _each_alternatives(search, [(k, "alts") for k in range(len(search.tree))], _g_visit, "alts")
        _g_values(search)
        if search.rank == rank:
            return


# -- choice ---------------------------------------------------------------------------------------------


def _choice_ok(source: Any) -> bool:
    return isinstance(source, list) and bool(source) and all(isinstance(o, str) for o in source)


def _prepare_choice(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    if not _choice_ok(source):
        return None
    return list(source), _identity, _choice_ok


def _reduce_choice(search: _Search) -> None:
    while True:
        rank = search.rank
        _ddmin_at(search, (), 1)
        for i in range(len(search.tree)):
            _ddmin_at(search, (i,), 0)
        if search.rank == rank:
            return


# -- structural tags ------------------------------------------------------------------------------------
# A structural tag is a JSON tree of formats: its lists (a sequence's elements, an or's alternatives, a
# trigger's tags, ...) lose items, and its special-token table loses names, while the reference still
# compiles the tag (a refusal is still tried: ``still`` decides).


def _tag_compiles(source: Any) -> bool:
    if not (isinstance(source, dict) and isinstance(source.get("tag"), dict)):
        return False
    table = source.get("special_tokens") or {}
    if not isinstance(table, dict):
        return False
    try:
        refdecoder.compile(refdecoder.StructuralTag(source["tag"], tuple(table.items())))
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return True
    except (refdecoder.MaskcertError, RecursionError):
        return False
    return True


def _prepare_structural_tag(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    if not _tag_compiles(source):
        return None
    return source, _identity, _tag_compiles


def _lists(tree: Any, path: Path = ()) -> Iterator[Path]:
    """The paths of the lists in ``tree``, deepest last (a parent is reduced before its children)."""
    if isinstance(tree, list):
        yield path
        for i, item in enumerate(tree):
            yield from _lists(item, (*path, i))
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _lists(value, (*path, key))


def _reduce_structural_tag(search: _Search) -> None:
    while True:
        rank = search.rank
        _ddmin_at(search, ("special_tokens",), 0)
        for path in list(_lists(search.tree.get("tag"), ("tag",))):
            _ddmin_at(search, path, 1)
        if search.rank == rank:
            return


# -- Lark -----------------------------------------------------------------------------------------------
# Lines only (rules, terminals, directives, a rule's continuation lines ``| alt``), and the special-token
# table's names, while the reference still compiles the grammar: there is no Lark syntax tree here, and
# cutting inside a line would have to know Lark's literals (``"<|x|>"``, ``/a|b/``, ``%json {...}``).


def _lark_source(tree: Any) -> Any:
    return {**tree, "text": "\n".join(tree["text"])}


def _lark_compiles(source: Any) -> bool:
    if not (isinstance(source, dict) and isinstance(source.get("text"), str)):
        return False
    table = source.get("special_tokens") or {}
    if not isinstance(table, dict):
        return False
    try:
        refdecoder.compile(refdecoder.Lark(source["text"], tuple(table.items())))
    except (refdecoder.Unsupported, refdecoder.LimitExceeded):
        return True
    except (refdecoder.MaskcertError, RecursionError):
        return False
    return True


def _prepare_lark(source: Any) -> tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None:
    if not _lark_compiles(source):
        return None
    tree = {**source, "text": [line for line in source["text"].splitlines() if line.strip()]}
    if not _lark_compiles(_lark_source(tree)):
        return None  # blank lines mattered: the normal form would not stand for the original
    return tree, _lark_source, _lark_compiles


def _reduce_lark(search: _Search) -> None:
    while True:
        rank = search.rank
        _ddmin_at(search, ("special_tokens",), 0)
        _ddmin_at(search, ("text",), 1)
        if search.rank == rank:
            return


_Prepare = Callable[[Any], "tuple[Any, Callable[[Any], Any], Callable[[Any], bool]] | None"]
_KINDS: dict[SpecKind, tuple[_Prepare, Callable[[_Search], None]]] = {
    SpecKind.JSON_SCHEMA: (_prepare_json, _reduce_json),
    SpecKind.REGEX: (_prepare_regex, _reduce_regex),
    SpecKind.GBNF: (_prepare_gbnf, _reduce_gbnf),
    SpecKind.CHOICE: (_prepare_choice, _reduce_choice),
    SpecKind.STRUCTURAL_TAG: (_prepare_structural_tag, _reduce_structural_tag),
    SpecKind.LARK: (_prepare_lark, _reduce_lark),
}
# Why a kind without a reducer is left as it is (``Minimized.note``); every kind has one today.
_NOT_REDUCED: dict[SpecKind, str] = {}
