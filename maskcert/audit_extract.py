"""``maskcert audit-extract ENGINE SRC_DIR``: the labelled cases of an engine's own test suite, read
statically from its published sources (an unpacked sdist), as ``maskcert audit`` cases.

Nothing here downloads, imports the engine or runs its tests: Python test files are read with
:mod:`ast`, Rust ones with :mod:`maskcert.audit_rust`. An extractor knows the few helpers through which
an engine's tests state a label, and evaluates their arguments where they are literals, names bound to
literals (``let``, ``lazy_static!``, ``#[case]``/``#[values]`` parameters, ``for`` over literal
tables), ``json!``, ``vec!`` or ``format!`` of those. Whatever it cannot read becomes a
:class:`Skipped` record naming the file, the line and the construct, never a guess.

* ``outlines-core`` — ``src/json_schema/mod.rs``: ``regex_from_str(schema, None, None)`` followed by
  ``should_match`` / ``should_not_match`` (the ``(schema, regex, a_match, not_a_match)`` tables and
  the recursion tests); the Python tests (``tests/*.py``) build their schemas with pydantic at run time
  and are recorded as skipped.
* ``llguidance`` — ``parser/tests/*.rs``: ``json_schema_check``, ``json_test_many``,
  ``lark_str_test`` and ``lark_str_test_many*`` (``FINAL_REJECT:`` marks a ``prefix`` label, any other
  failing input a ``not_prefix`` one: llguidance's helper requires the rejection mid-way); and
  ``python/**/test_*.py``: ``check_grammar`` / ``check_one_grammar`` over Lark texts and
  ``LLMatcher.grammar_from_json_schema`` / ``grammar_from_regex`` / ``grammar_from_lark`` (same labels).
* ``lm-format-enforcer`` — ``tests/*.py``: ``test_json_schema_parsing_with_string(text, schema,
  expect_success)`` and ``_test_regex_parsing(text, regex, expect_success)`` (also through
  ``@pytest.mark.parametrize``). Its sdists ship no tests (checked 0.4.3 to 0.11.3), so this reads a
  source checkout.

Each case carries the engine's declared default JSON language (``ENGINE_PROFILES``: the profile its
adapter declares under the engine's own defaults, ``props/backends/<engine>.py``).
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maskcert.audit import AuditCase, AuditCaseError, Label, case_from_json
from maskcert.audit_rust import (
    Group,
    JsonValue,
    RustSyntaxError,
    Tok,
    Tree,
    Unreadable,
    evaluate,
    is_tok,
    parse,
    split,
)
from refdecoder.errors import InputError

__all__ = ["ENGINE_PROFILES", "EXTRACTORS", "Extraction", "ExtractError", "Skipped", "extract"]

#: The JSON language each engine's test suite runs under: its defaults, as its maskcert adapter
#: declares them (props/backends/*.py ``declared_profile``), with the engine's own default options.
ENGINE_PROFILES: Mapping[str, Mapping[str, Any]] = {
    # outlines-core WHITESPACE = r"[ ]?"; properties in schema order; closed objects; no \u escapes
    "outlines-core": {
        "whitespace": 1,
        "property_order": "schema",
        "additional_properties_default": False,
        "allow_duplicate_keys": True,
        "unicode_escapes": False,
        "formats": "assert",
        "top_level_whitespace": False,
    },
    # llguidance JsonCompileOptions defaults: whitespace_flexible=true, schema order, formats enforced
    "llguidance": {
        "whitespace": "any",
        "property_order": "schema",
        "additional_properties_default": True,
        "allow_duplicate_keys": True,
        "unicode_escapes": True,
        "formats": "assert",
        "top_level_whitespace": False,
    },
    # lm-format-enforcer consts: 12 consecutive whitespaces, any order, format not read
    "lm-format-enforcer": {
        "whitespace": 12,
        "property_order": "any",
        "additional_properties_default": False,
        "allow_duplicate_keys": True,
        "unicode_escapes": True,
        "formats": "annotation",
    },
}


class ExtractError(InputError):
    """An engine name no extractor knows, or a source directory without the engine's test files."""


@dataclass(frozen=True)
class Skipped:
    """A labelled test (or file) the extractor could not read: where, and which construct."""

    source: str
    reason: str


@dataclass(frozen=True)
class Extraction:
    engine: str
    version: str
    cases: tuple[AuditCase, ...]
    skipped: tuple[Skipped, ...]

    def jsonl(self) -> str:
        return "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in self.cases)


@dataclass
class _Sink:
    engine: str
    version: str
    cases: list[AuditCase] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    _seen: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def skip(self, source: str, reason: str) -> None:
        """Record an unreadable test once per (file:line, test function, reason): a parametrized
        test repeats its reason for every parameter combination."""
        where, _, test = source.partition(" ")
        key = (where, test.split("::")[0].split("[")[0], reason)
        if key in self._seen:
            self._seen[key] += 1
            return
        self._seen[key] = 1
        self.skipped.append(Skipped(f"{where} {key[1]}".strip(), reason))

    def skip_counts(self) -> tuple[Skipped, ...]:
        counts = self._seen.values()  # in the order of self.skipped: both grow together
        return tuple(
            Skipped(s.source, s.reason + (f" (x{n})" if n > 1 else "")) for s, n in zip(self.skipped, counts)
        )

    def case(
        self,
        source: str,
        kind: str,
        spec: Any,
        instance: Any,
        expected: Label,
        note: str = "",
        profile: Mapping[str, Any] | None = None,
        line: int = 0,
    ) -> None:
        """Record a case; ``source`` is ``file:line test`` of the assertion, and the case names the
        line of its own text (``line``, or the line a string literal remembers) when that differs."""
        line = line or getattr(instance, "line", 0)
        where, _, test = source.partition(" ")
        file, _, call = where.rpartition(":")
        if line and file and str(line) != call:
            source = f"{file}:{line} {test} (asserted at line {call})"
        for what, v in (("spec", spec), ("instance", instance)):
            if isinstance(v, Unreadable):
                self.skip(source, f"{what}: {v.reason} (line {v.line})")
                return
        if not isinstance(instance, str):
            self.skip(source, f"instance: a {type(instance).__name__}, not text")
            return
        if kind == "json_schema" and profile is None:
            profile = ENGINE_PROFILES[self.engine]
        src = f"{source} [{self.engine} {self.version}]" if self.version else source
        profile = dict(profile) if kind == "json_schema" and profile is not None else None
        record = AuditCase(self.engine, src, kind, spec, instance, expected, profile, note)
        try:  # the record as the cases format reads it back: a spec of the wrong shape is not a case
            case = case_from_json(json.loads(json.dumps(record.to_json())))
        except AuditCaseError as e:
            self.skip(source, f"not a case: {e.expected} ({e.detail})")
            return
        self.cases.append(case)


def _version(root: Path) -> str:
    for name in ("PKG-INFO", "pyproject.toml", "Cargo.toml"):
        p = root / name
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            m = re.search(r'(?m)^(?:Version:\s*|version\s*=\s*")([^"\s]+)', text)
            if m:
                return m.group(1)
    return ""


# ---------------------------------------------------------------------------------------------------
# Rust test files


Handler = Callable[[list[list[Tree]], dict[str, Any], str], None]


class _RustRunner:
    """Walks a Rust file's items and test function bodies, binding names to literal values and
    calling ``handlers`` on the labelled-assertion helpers it meets."""

    def __init__(self, rel: str, sink: _Sink, handlers: Mapping[str, Handler]) -> None:
        self.rel = rel
        self.sink = sink
        self.handlers = handlers

    def items(self, items: Sequence[Tree], env: dict[str, Any]) -> None:
        attrs: list[Group] = []
        i = 0
        while i < len(items):
            t = items[i]
            nxt = items[i + 1] if i + 1 < len(items) else None
            if is_tok(t, "punct", "#") and isinstance(nxt, Group) and nxt.open == "[":
                attrs.append(nxt)
                i += 2
                continue
            if is_tok(t, "punct", "#") and is_tok(nxt, "punct", "!"):
                i += 3  # an inner attribute #![...]
                continue
            if is_tok(t, "ident", "lazy_static") and isinstance(items[i + 2], Group):
                body = items[i + 2]
                assert isinstance(body, Group)
                for stmt in split(body.items, ";"):
                    self._static(stmt, env)
                i += 3
                continue
            if is_tok(t, "ident", "mod") and i + 2 < len(items) and isinstance(items[i + 2], Group):
                g = items[i + 2]
                assert isinstance(g, Group)
                self.items(g.items, dict(env))
                attrs = []
                i += 3
                continue
            if (is_tok(t, "ident", "const") or is_tok(t, "ident", "static")) and is_tok(nxt, "ident"):
                j = self._find(items, i, ";")
                self._static(list(items[i:j]), env)
                attrs = []
                i = j + 1
                continue
            if is_tok(t, "ident", "fn") and is_tok(nxt, "ident"):
                j = i + 2
                while j < len(items) and not (isinstance(items[j], Group) and items[j].open == "("):  # type: ignore[union-attr]
                    j += 1
                k = j + 1
                while k < len(items) and not (isinstance(items[k], Group) and items[k].open == "{"):  # type: ignore[union-attr]
                    k += 1
                if k < len(items):
                    assert isinstance(nxt, Tok)
                    params, body = items[j], items[k]
                    assert isinstance(params, Group) and isinstance(body, Group)
                    self._fn(nxt.text, attrs, params, body, env)
                attrs = []
                i = k + 1
                continue
            if is_tok(t, "ident", "use"):
                i = self._find(items, i, ";") + 1
                continue
            if isinstance(t, Tok) and t.kind == "ident" and t.text in ("impl", "struct", "enum", "trait"):
                attrs = []
            i += 1

    @staticmethod
    def _find(items: Sequence[Tree], i: int, punct: str) -> int:
        j = i
        while j < len(items) and not is_tok(items[j], "punct", punct):
            j += 1
        return j

    def _static(self, stmt: Sequence[Tree], env: dict[str, Any]) -> None:
        """``[pub] static [ref] NAME: T = EXPR`` or ``const NAME: T = EXPR``."""
        xs = [t for t in stmt if not (is_tok(t, "ident", "pub") or is_tok(t, "ident", "ref"))]
        if len(xs) < 4 or not is_tok(xs[1], "ident"):
            return
        eq = next((k for k, t in enumerate(xs) if is_tok(t, "punct", "=")), None)
        if eq is None:
            return
        name = xs[1]
        assert isinstance(name, Tok)
        env[name.text] = evaluate(xs[eq + 1 :], env)

    def _fn(self, name: str, attrs: list[Group], params: Group, body: Group, env: dict[str, Any]) -> None:
        heads = [a.items[0].text for a in attrs if a.items and isinstance(a.items[0], Tok)]
        if not ({"test", "rstest"} & set(heads)):
            return
        cases: list[tuple[str, list[list[Tree]]]] = []
        for a in attrs:
            if not a.items or not is_tok(a.items[0], "ident", "case"):
                continue
            label = ""
            if len(a.items) >= 3 and is_tok(a.items[1], "punct", "::") and isinstance(a.items[2], Tok):
                label = a.items[2].text
            g = a.items[-1]
            if isinstance(g, Group) and g.open == "(":
                cases.append((label or f"case_{len(cases) + 1}", split(g.items)))
        case_params: list[str] = []
        value_params: list[tuple[str, Any]] = []
        for p in split(params.items):
            names = [t.text for t in p if isinstance(t, Tok) and t.kind == "ident"]
            colon = next((k for k, t in enumerate(p) if is_tok(t, "punct", ":")), None)
            if colon is None or not names:
                continue
            pname = p[colon - 1]
            if not isinstance(pname, Tok):
                continue
            if any(isinstance(t, Group) and t.items and is_tok(t.items[0], "ident", "case") for t in p):
                case_params.append(pname.text)
            else:
                vals = next(
                    (
                        t
                        for t in p
                        if isinstance(t, Group) and t.items and is_tok(t.items[0], "ident", "values")
                    ),
                    None,
                )
                if vals is not None and isinstance(vals.items[-1], Group):
                    values = [evaluate(x, env) for x in split(vals.items[-1].items)]
                    value_params.append((pname.text, values))
                else:
                    value_params.append((pname.text, [Unreadable("a fixture parameter", params.line)]))
        runs: list[tuple[str, dict[str, Any]]] = []
        base_cases = cases or [("", [])]
        combos = list(itertools.product(*(vals for _, vals in value_params))) if value_params else [()]
        for label, args in base_cases:
            for combo in combos:
                local = dict(env)
                for pn, arg in zip(case_params, args):
                    local[pn] = evaluate(arg, env)
                for (pn, _), v in zip(value_params, combo):
                    local[pn] = v
                tag = "::".join(x for x in (name, label, ",".join(map(str, combo)) if combo else "") if x)
                runs.append((tag, local))
        for tag, local in runs:
            self.block(body.items, local, tag)

    def block(self, items: Sequence[Tree], env: dict[str, Any], test: str) -> None:
        i = 0
        while i < len(items):
            t = items[i]
            if is_tok(t, "ident", "let"):
                j = self._find(items, i, ";")
                self._let(items[i + 1 : j], env, test)
                i = j + 1
                continue
            if is_tok(t, "ident", "for"):
                i = self._for(items, i, env, test)
                continue
            nxt = items[i + 1] if i + 1 < len(items) else None
            if (
                isinstance(t, Tok)
                and t.kind == "ident"
                and t.text in self.handlers
                and isinstance(nxt, Group)
                and nxt.open == "("
                and not (i > 0 and is_tok(items[i - 1], "ident", "fn"))
            ):
                self.handlers[t.text](split(nxt.items), env, f"{self.rel}:{t.line} {test}")
                i += 2
                continue
            if isinstance(t, Group):
                self.block(t.items, env, test)
            i += 1

    def _let(self, stmt: Sequence[Tree], env: dict[str, Any], test: str) -> None:
        eq = next((k for k, t in enumerate(stmt) if is_tok(t, "punct", "=")), None)
        if eq is None:
            return
        self.block(stmt[eq + 1 :], env, test)  # calls inside the initializer
        pattern = [t for t in stmt[:eq] if not is_tok(t, "ident", "mut")]
        if pattern and is_tok(pattern[0], "ident"):
            name = pattern[0]
            assert isinstance(name, Tok)
            env[name.text] = evaluate(stmt[eq + 1 :], env)

    def _for(self, items: Sequence[Tree], i: int, env: dict[str, Any], test: str) -> int:
        j = i + 1
        while j < len(items) and not is_tok(items[j], "ident", "in"):
            j += 1
        k = j + 1
        while k < len(items) and not (isinstance(items[k], Group) and items[k].open == "{"):  # type: ignore[union-attr]
            k += 1
        if k >= len(items):
            return k
        pattern, body = items[i + 1 : j], items[k]
        assert isinstance(body, Group)
        seq = evaluate(items[j + 1 : k], env)
        names = [t.text for t in _flat(pattern) if t.kind == "ident" and t.text != "mut"]
        if not isinstance(seq, list):
            reason = seq.reason if isinstance(seq, Unreadable) else f"a {type(seq).__name__}"
            local = dict(env)
            for n in names:
                local[n] = Unreadable(f"a loop over {reason}", items[i].line)
            self.block(body.items, local, test)
            return k + 1
        for n_item, item in enumerate(seq):
            local = dict(env)
            if len(names) == 1:
                local[names[0]] = item
            elif isinstance(item, tuple) and len(item) == len(names):
                local.update(zip(names, item))
            else:
                for n in names:
                    local[n] = Unreadable("a loop pattern that does not fit the item", items[i].line)
            self.block(body.items, local, f"{test}[{n_item}]")
        return k + 1


def _flat(items: Sequence[Tree]) -> Iterator[Tok]:
    for t in items:
        if isinstance(t, Group):
            yield from _flat(t.items)
        else:
            yield t


def _rust_files(root: Path, patterns: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for pat in patterns:
        out.extend(sorted(root.glob(pat)))
    return out


def _read_rust(path: Path, rel: str, sink: _Sink) -> list[Tree] | None:
    try:
        return parse(path.read_text(encoding="utf-8"), rel)
    except (RustSyntaxError, UnicodeDecodeError) as e:
        sink.skip(rel, f"cannot read the file: {e}")
        return None


# ---------------------------------------------------------------------------------------------------
# outlines-core


def _schema_of(text: Any) -> Any:
    if isinstance(text, Unreadable):
        return text
    if not isinstance(text, str):
        return Unreadable(f"a schema given as a {type(text).__name__}", 0)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        return Unreadable(f"a schema string that is not JSON ({e.msg})", 0)


def extract_outlines_core(root: Path, sink: _Sink) -> None:
    rels = _rust_files(root, ["src/json_schema/*.rs", "src/*.rs"])
    if not rels:
        raise ExtractError(str(root), "an outlines-core source tree (src/json_schema/mod.rs)")
    for path in rels:
        rel = str(path.relative_to(root))
        src = path.read_text(encoding="utf-8")
        if "should_match" not in src and "should_not_match" not in src:
            if "#[test]" in src:
                sink.skip(rel, "tests without labelled texts (index, vocabulary: token-level)")
            continue
        trees = _read_rust(path, rel, sink)
        if trees is None:
            continue

        def regex_from_str(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
            env["$schema"] = _schema_of(evaluate(args[0], env)) if args else Unreadable("no schema", 0)
            ws = args[1] if len(args) > 1 else []
            depth = args[2] if len(args) > 2 else []
            opts = []
            if not (len(ws) == 1 and is_tok(ws[0], "ident", "None")):
                opts.append("a whitespace pattern other than the default (not a JsonProfile)")
            if not (len(depth) == 1 and is_tok(depth[0], "ident", "None")):
                opts.append("a max_recursion_depth other than the default")
            env["$options"] = opts

        def labelled(expected: Label) -> Handler:
            def handler(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
                if len(args) != 2:
                    sink.skip(where, "should_match with other than (re, text)")
                    return
                if env.get("$options"):
                    sink.skip(where, "; ".join(env["$options"]))
                    return
                schema = env.get("$schema", Unreadable("no regex_from_str(schema, ...) before it", 0))
                sink.case(where, "json_schema", schema, evaluate(args[1], env), expected)

            return handler

        handlers = {
            "regex_from_str": regex_from_str,
            "should_match": labelled(Label.ACCEPT),
            "should_not_match": labelled(Label.REJECT),
        }
        _RustRunner(rel, sink, handlers).items(trees, {})
    for py in sorted((root / "tests").glob("test_*.py")):
        text = py.read_text(encoding="utf-8")
        if "fullmatch" in text or "BaseModel" in text:
            sink.skip(
                str(py.relative_to(root)),
                "schemas built from pydantic models at run time, or texts matched against a vocabulary index",
            )


# ---------------------------------------------------------------------------------------------------
# llguidance


def _x_guidance_profile(schema: Any) -> tuple[Mapping[str, Any] | None, str]:
    """The profile a schema's ``x-guidance`` options give (None, why) when they are no JsonProfile."""
    base = dict(ENGINE_PROFILES["llguidance"])
    if not isinstance(schema, dict) or "x-guidance" not in schema:
        return base, ""
    opts = schema["x-guidance"]
    if not isinstance(opts, dict):
        return None, "x-guidance options that are not an object"
    for key, v in opts.items():
        if key == "whitespace_flexible":
            base["whitespace"] = "any" if v else "none"
        elif key in ("item_separator", "key_separator") and v in (",", ":"):
            continue
        else:
            return None, f"x-guidance option {key}={v!r} is not a JsonProfile field"
    return base, ""


def extract_llguidance(root: Path, sink: _Sink) -> None:
    tests = root / "parser" / "tests"
    files = sorted(tests.glob("*.rs"))
    if not files:
        raise ExtractError(str(root), "an llguidance source tree (parser/tests/*.rs)")
    for path in files:
        rel = str(path.relative_to(root))
        trees = _read_rust(path, rel, sink)
        if trees is None:
            continue

        def json_case(where: str, schema: Any, value: Any, expected: Label, env: dict[str, Any]) -> None:
            if isinstance(schema, JsonValue):
                schema = schema.value
            line = 0
            if isinstance(value, JsonValue):
                text: Any = value.text()
                line = getattr(value.value, "line", 0) or value.line
            elif isinstance(value, Unreadable):
                text = value
            else:
                text = Unreadable(f"a {type(value).__name__} where a serde_json::Value is expected", 0)
            profile, why = _x_guidance_profile(schema)
            if profile is None:
                sink.skip(where, why)
                return
            if isinstance(schema, dict) and "x-guidance" in schema:
                schema = {k: v for k, v in schema.items() if k != "x-guidance"}
            sink.case(where, "json_schema", schema, text, expected, profile=profile, line=line)

        def json_schema_check(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
            if len(args) != 3:
                sink.skip(where, "json_schema_check with other than 3 arguments")
                return
            schema, value, ok = (evaluate(a, env) for a in args)
            if not isinstance(ok, bool):
                sink.skip(where, f"expect_valid: {getattr(ok, 'reason', ok)}")
                return
            json_case(where, schema, value, Label.ACCEPT if ok else Label.REJECT, env)

        def json_test_many(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
            if len(args) != 3:
                sink.skip(where, "json_test_many with other than 3 arguments")
                return
            schema = evaluate(args[0], env)
            for arg, label in ((args[1], Label.ACCEPT), (args[2], Label.REJECT)):
                values = evaluate(arg, env)
                if not isinstance(values, list):
                    sink.skip(where, f"{label.value} list: {getattr(values, 'reason', values)}")
                    continue
                for v in values:
                    json_case(where, schema, v, label, env)

        def lark_one(where: str, grammar: Any, ok: bool, text: Any) -> None:
            if isinstance(text, str) and text.startswith("FINAL_REJECT:"):
                if ok:
                    sink.skip(where, "FINAL_REJECT: in a passing input")
                    return
                line = getattr(text, "line", 0)
                sink.case(where, "lark", grammar, text[len("FINAL_REJECT:") :], Label.PREFIX, line=line)
                return
            sink.case(where, "lark", grammar, text, Label.ACCEPT if ok else Label.NOT_PREFIX)

        def lark_str_test(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
            if len(args) < 3:
                sink.skip(where, "lark_str_test with fewer than 3 arguments")
                return
            grammar, ok, text = (evaluate(a, env) for a in args[:3])
            if not isinstance(ok, bool):
                sink.skip(where, f"should_accept: {getattr(ok, 'reason', ok)}")
                return
            lark_one(where, grammar, ok, text)

        def many(offset: int) -> Handler:
            def handler(args: list[list[Tree]], env: dict[str, Any], where: str) -> None:
                if len(args) != 3 + offset:
                    sink.skip(where, "lark_str_test_many with an unexpected argument count")
                    return
                grammar = evaluate(args[offset], env)
                for arg, ok in ((args[offset + 1], True), (args[offset + 2], False)):
                    texts = evaluate(arg, env)
                    if not isinstance(texts, list):
                        which = "passing" if ok else "failing"
                        sink.skip(where, f"{which} list: {getattr(texts, 'reason', texts)}")
                        continue
                    for t in texts:
                        lark_one(where, grammar, ok, t)

            return handler

        handlers: dict[str, Handler] = {
            "json_schema_check": json_schema_check,
            "json_test_many": json_test_many,
            "lark_str_test": lark_str_test,
            "lark_str_test_many": many(0),
            "lark_str_test_many_quiet": many(0),
            "lark_str_test_many_ext": many(1),
        }
        _RustRunner(rel, sink, handlers).items(trees, {})
    _llguidance_python(root, sink)


# ---------------------------------------------------------------------------------------------------
# lm-format-enforcer (Python tests, read with ast)

_LMFE_JSON = ("test_json_schema_parsing_with_string",)
_LMFE_REGEX = ("_test_regex_parsing", "test_regex_parsing")
# the helpers' first three parameters, by the names their definitions give them
_LMFE_PARAMS = (("string", "text"), ("schema_dict", "schema", "regex"), ("expect_success",))


class _PyUnreadable(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _py_value(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """The value of a literal expression with names bound in ``env`` and ``json.dumps``/``json.loads``
    of such values; :class:`_PyUnreadable` otherwise."""
    if isinstance(node, ast.Name):
        if node.id in env:
            v = env[node.id]
            if isinstance(v, _PyUnreadable):
                raise v
            return v
        raise _PyUnreadable(f"the name {node.id!r} (not bound to a literal)")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        f = node.func
        is_json = isinstance(f.value, ast.Name) and f.value.id == "json"
        if is_json and f.attr in ("dumps", "loads") and node.args:
            arg = _py_value(node.args[0], env)
            return json.dumps(arg) if f.attr == "dumps" else json.loads(arg)
        if f.attr in ("model_json_schema", "schema", "schema_json"):
            raise _PyUnreadable(f"a pydantic model's {f.attr}() (built at run time)")
        if f.attr in _GRAMMAR_FROM:
            return _py_grammar(f.attr, node, env)
    if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _PyUnreadable("a dict with ** unpacking")
            pairs = [(k, v) for k, v in zip(node.keys, node.values) if k is not None]
            return {_py_value(k, env): _py_value(v, env) for k, v in pairs}
        items = [_py_value(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _py_value(node.left, env), _py_value(node.right, env)
        try:
            return left + right if isinstance(node.op, ast.Add) else left * right
        except TypeError as e:
            raise _PyUnreadable(str(e)) from None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise _PyUnreadable(f"the expression `{ast.unparse(node)[:60]}`") from None


def _py_bindings(stmts: Sequence[ast.stmt], env: dict[str, Any]) -> None:
    for s in stmts:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            try:
                env[s.targets[0].id] = _py_value(s.value, env)
            except _PyUnreadable as e:
                env[s.targets[0].id] = e


def _parametrize(fn: ast.FunctionDef, env: Mapping[str, Any]) -> list[dict[str, Any]] | str:
    """The bindings of ``@pytest.mark.parametrize`` decorators (their product), or why unreadable."""
    runs: list[dict[str, Any]] = [{}]
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and ast.unparse(d.func).endswith("mark.parametrize")):
            continue
        try:
            names = _py_value(d.args[0], env)
            values = _py_value(d.args[1], env)
        except (_PyUnreadable, IndexError) as e:
            return f"parametrize: {getattr(e, 'reason', e)}"
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        rows = [dict(zip(names, v if len(names) > 1 else (v,))) for v in values]
        runs = [{**r, **row} for r in runs for row in rows]
    return runs


PyHandler = Callable[[ast.Call, dict[str, Any], str], None]


def _py_tests(path: Path, rel: str, sink: _Sink, handlers: Mapping[str, PyHandler]) -> None:
    """Every ``test*`` function of a Python test file, once per ``parametrize`` row, walked in order:
    assignments bind names, ``for`` over a literal binds its target per item, and each call to a
    function named in ``handlers`` goes to its handler with the bindings in force."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), rel)
    except (SyntaxError, UnicodeDecodeError) as e:
        sink.skip(rel, f"cannot parse: {e}")
        return
    module_env: dict[str, Any] = {}
    _py_bindings(tree.body, module_env)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
            continue
        runs = _parametrize(fn, module_env)
        if isinstance(runs, str):
            sink.skip(f"{rel}:{fn.lineno} {fn.name}", runs)
            continue
        for n_run, params in enumerate(runs):
            tag = fn.name + (f"[{n_run}]" if len(runs) > 1 else "")
            _py_walk(fn.body, {**module_env, **params}, rel, tag, handlers)


def _py_walk(
    body: Sequence[ast.stmt], env: dict[str, Any], rel: str, tag: str, handlers: Mapping[str, PyHandler]
) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            _py_bindings([stmt], env)
        if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
            try:
                seq = _py_value(stmt.iter, env)
            except _PyUnreadable as e:
                _py_walk(stmt.body, {**env, stmt.target.id: e}, rel, tag, handlers)
                continue
            for item in seq:
                _py_walk(stmt.body, {**env, stmt.target.id: item}, rel, tag, handlers)
            continue
        if isinstance(stmt, (ast.For, ast.With, ast.If, ast.While)):
            _py_walk(stmt.body, env, rel, tag, handlers)
            continue
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in handlers:
                handlers[name](node, env, f"{rel}:{node.lineno} {tag}")


def _args(node: ast.Call, params: Sequence[Sequence[str]]) -> list[ast.expr]:
    """A call's arguments in the order of ``params`` (each the names one parameter goes by), keyword
    arguments put in the places positional ones leave."""
    args: list[ast.expr] = list(node.args)
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    for names in params[len(args) :]:
        given = next((kw[n] for n in names if n in kw), None)
        if given is None:
            break
        args.append(given)
    return args


def extract_lmfe(root: Path, sink: _Sink) -> None:
    files = sorted((root / "tests").glob("test_*.py"))
    if not files:
        raise ExtractError(
            str(root),
            "an lm-format-enforcer source checkout with tests/test_*.py",
            "its sdists ship no tests (0.4.3 to 0.11.3 checked): unpack a git checkout of the release tag",
        )

    def labelled(kind: str) -> PyHandler:
        def handler(node: ast.Call, env: dict[str, Any], where: str) -> None:
            args = _args(node, _LMFE_PARAMS)
            if len(args) < 3:
                sink.skip(where, "a labelled call with fewer than 3 readable arguments")
                return
            try:
                text, spec, ok = (_py_value(a, env) for a in args[:3])
            except _PyUnreadable as e:
                sink.skip(where, e.reason)
                return
            if not isinstance(ok, bool):
                sink.skip(where, "expect_success is not a literal bool")
                return
            if kind == "json_schema" and isinstance(spec, str):
                spec = json.loads(spec)
            if spec is None:
                sink.skip(where, "no schema (lm-format-enforcer's any-JSON mode)")
                return
            sink.case(where, kind, spec, text, Label.ACCEPT if ok else Label.REJECT)

        return handler

    handlers = {
        **{name: labelled("json_schema") for name in _LMFE_JSON},
        **{name: labelled("regex") for name in _LMFE_REGEX},
    }
    for path in files:
        _py_tests(path, str(path.relative_to(root)), sink, handlers)


# llguidance's Python tests (python/torch_tests/test_matcher.py): check_grammar(grm, passing, failing)
# and check_one_grammar(grm, text, passing), with grm a Lark text or LLMatcher.grammar_from_*(...).
_GRAMMAR_FROM = ("grammar_from_json_schema", "grammar_from_regex", "grammar_from_lark")


@dataclass(frozen=True)
class _PyGrammar:
    kind: str
    spec: Any
    profile: Mapping[str, Any] | None = None


def _py_grammar(method: str, node: ast.Call, env: Mapping[str, Any]) -> _PyGrammar:
    if not node.args:
        raise _PyUnreadable(f"{method}() without a spec")
    spec = _py_value(node.args[0], env)
    if method == "grammar_from_regex":
        return _PyGrammar("regex", spec)
    if method == "grammar_from_lark":
        return _PyGrammar("lark", spec)
    if isinstance(spec, str):
        spec = json.loads(spec)
    opts_node = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords), None)
    opts = _py_value(opts_node, env) if opts_node is not None else None
    profile, why = _x_guidance_profile({"x-guidance": opts} if opts else {})
    if profile is None:
        raise _PyUnreadable(why.replace("x-guidance option", "JSON option"))
    return _PyGrammar("json_schema", spec, profile)


def _llguidance_python(root: Path, sink: _Sink) -> None:
    def one(where: str, grammar: Any, text: Any, ok: bool) -> None:
        if isinstance(grammar, str):
            grammar = _PyGrammar("lark", grammar)
        if not isinstance(grammar, _PyGrammar):
            sink.skip(where, f"a grammar given as a {type(grammar).__name__}")
            return
        if isinstance(text, str) and "⁂" in text:
            sink.skip(where, "special tokens spelled with '⁂' (token ids, not text)")
            return
        label = Label.ACCEPT if ok else Label.NOT_PREFIX
        if isinstance(text, str) and text.startswith("FINAL_REJECT:"):
            text, label = text[len("FINAL_REJECT:") :], Label.PREFIX
        sink.case(where, grammar.kind, grammar.spec, text, label, profile=grammar.profile)

    def check_grammar(node: ast.Call, env: dict[str, Any], where: str) -> None:
        args = _args(node, (("grm",), ("passing",), ("failing",)))
        try:
            grammar, passing, failing = (_py_value(a, env) for a in args[:3])
        except (_PyUnreadable, ValueError) as e:
            sink.skip(where, getattr(e, "reason", str(e)))
            return
        for texts, ok in ((passing, True), (failing, False)):
            for t in texts:
                one(where, grammar, t, ok)

    def check_one_grammar(node: ast.Call, env: dict[str, Any], where: str) -> None:
        args = _args(node, (("grm",), ("s",), ("passing",)))
        try:
            grammar, text, ok = (_py_value(a, env) for a in args[:3])
        except (_PyUnreadable, ValueError) as e:
            sink.skip(where, getattr(e, "reason", str(e)))
            return
        if not isinstance(ok, bool):
            sink.skip(where, "passing is not a literal bool")
            return
        one(where, grammar, text, ok)

    handlers = {"check_grammar": check_grammar, "check_one_grammar": check_one_grammar}
    for path in sorted((root / "python").glob("**/test_*.py")):
        _py_tests(path, str(path.relative_to(root)), sink, handlers)


EXTRACTORS: Mapping[str, Callable[[Path, _Sink], None]] = {
    "outlines-core": extract_outlines_core,
    "llguidance": extract_llguidance,
    "lm-format-enforcer": extract_lmfe,
}


def extract(engine: str, src_dir: str | Path) -> Extraction:
    """The labelled cases of ``engine``'s test suite in the unpacked sources at ``src_dir``."""
    if engine not in EXTRACTORS:
        raise ExtractError(engine, f"an engine with an extractor ({', '.join(EXTRACTORS)})")
    root = Path(src_dir)
    if not root.is_dir():
        raise ExtractError(str(root), "a directory holding the engine's unpacked sources")
    sink = _Sink(engine, _version(root))
    EXTRACTORS[engine](root, sink)
    return Extraction(engine, sink.version, tuple(sink.cases), sink.skip_counts())
