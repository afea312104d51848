"""Hostile specs against the reference (``--target hostile``): adversarial schemas, regexes and GBNF
grammars (deep nesting, huge bounds, blowup regexes, recursive references, mangled files) built by
Hypothesis, each compiled the way ``maskcert check-schema`` would, in a server subprocess under an
address-space limit (:mod:`maskcert.hostile_runner`). The property: a typed outcome (``supported`` or a
``MaskcertError``), within :data:`SECONDS` and under :data:`MB` of peak resident memory, with the
compile limits lowered to :data:`LIMITS` (so the budget, not luck, bounds the time). A violation is a
``limits`` finding (or ``crash`` for an untyped exception) against the reference, whose certificate
holds the input's bytes, the outcome, the seconds and the memory.
"""

from __future__ import annotations

import atexit
import base64
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from maskcert.fuzz._property import Property, TargetContext, cover
from maskcert.hostile_runner import TYPED, HostileInput, HostileRunner, Outcome, problems
from props.contract.findings import Finding, FindingFailure, Invariant, SpecKind, SpecRef

__all__ = ["hostile_properties", "hostile_inputs", "SECONDS", "MB", "LIMITS"]

SECONDS = 3.0
MB = 300.0
LIMITS: dict[str, Any] = {"compile_seconds": 1.0}
ADDRESS_SPACE_MB = 2048

_BIG = st.sampled_from([10**5, 10**5 + 1, 10**6, 10**9, 2**31, 2**63, 10**30])
_COUNT = st.one_of(st.integers(0, 40), _BIG)


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "array", "object", "number", "pattern", "enum", "const"]))
    if kind == "string":
        return {"type": "string", draw(st.sampled_from(["minLength", "maxLength"])): draw(_COUNT)}
    if kind == "array":
        kw = draw(st.sampled_from(["minItems", "maxItems", "minContains", "maxContains"]))
        out: dict[str, Any] = {"type": "array", "items": {"type": "integer"}, kw: draw(_COUNT)}
        if "Contains" in kw:
            out["contains"] = {"const": draw(st.integers(0, 3))}
        return out
    if kind == "object":
        return {"type": "object", draw(st.sampled_from(["minProperties", "maxProperties"])): draw(_COUNT)}
    if kind == "number":
        kw = draw(st.sampled_from(["minimum", "maximum", "multipleOf", "exclusiveMinimum"]))
        value = draw(st.sampled_from([1e-300, 1e300, 10**400, 3, 0.1, 7e-17, 10**200 + 7]))
        return {"type": draw(st.sampled_from(["number", "integer"])), kw: value}
    if kind == "pattern":
        return {"type": "string", "pattern": draw(_regex())}
    if kind == "enum":
        return {"enum": list(range(draw(st.sampled_from([3, 10_001, 30_000]))))}
    return {"const": "x" * draw(st.sampled_from([3, 20_001, 300_000]))}


def _wrap(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda c: {"anyOf": [c, {"type": "string"}]}, child),
        st.builds(lambda c: {"oneOf": [c, {"type": "integer"}]}, child),
        st.builds(lambda c, d: {"allOf": [c, d]}, child, child),
        st.builds(lambda c: {"not": c}, child),
        st.builds(lambda c: {"type": "array", "items": c}, child),
        st.builds(lambda c: {"type": "object", "properties": {"p": c}, "required": ["p"]}, child),
    )


@st.composite
def _schema(draw: st.DrawFn) -> dict[str, Any]:
    base = draw(st.recursive(_leaf(), _wrap, max_leaves=6))
    shape = draw(st.sampled_from(["plain", "deep", "refs", "self-ref", "wide"]))
    if shape == "deep":  # nesting around the nesting limit
        depth = draw(st.sampled_from([100, 250, 257, 1000]))
        key = draw(st.sampled_from(["items", "not", "anyOf"]))
        for _ in range(depth // 2):
            base = {key: [base]} if key == "anyOf" else {key: base}
    elif shape == "refs":  # a $ref chain
        n = draw(st.sampled_from([10, 200, 300, 3000]))
        defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
        defs[f"d{n}"] = base
        base = {"$ref": "#/$defs/d0", "$defs": defs}
    elif shape == "self-ref":
        base = {"$defs": {"a": {"anyOf": [base, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}
    elif shape == "wide":
        n = draw(st.sampled_from([64, 200, 600]))
        base = {"oneOf": [dict(base, title=f"t{i}") for i in range(n)]}
    return base


def _regex() -> st.SearchStrategy[str]:
    atom = st.sampled_from(["a", "[ab]", ".", "[^\\x00-\\x7f]", "(a|aa)", "\\d"])
    counted = st.builds(lambda a, n: f"{a}{{{n}}}", atom, _COUNT)
    blowup = st.builds(lambda k: f"[ab]*a[ab]{{{k}}}", st.integers(5, 40))
    nested = st.builds(
        lambda a, n, m: f"(({a}){{{n}}}){{{m}}}", atom, st.integers(1, 400), st.integers(1, 400)
    )
    parens = st.builds(lambda n: "(" * n + "a" + ")" * n, st.sampled_from([10, 300, 3000]))
    part = st.one_of(atom, counted, blowup, nested, parens, st.just("(a)\\1"), st.just("(?=a)"))
    return st.lists(part, min_size=1, max_size=4).map(lambda ps: "|".join(ps) if len(ps) > 2 else "".join(ps))


@st.composite
def _gbnf(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["count", "nest", "chain", "left", "postfix", "blowup"]))
    if kind == "count":
        lo, hi = draw(_COUNT), draw(st.one_of(st.none(), _COUNT))
        return f'root ::= "a"{{{lo},{"" if hi is None else max(lo, hi)}}}'
    if kind == "nest":
        n = draw(st.sampled_from([10, 255, 300, 20_000]))
        return "root ::= " + "(" * n + '"a"' + ")" * n
    if kind == "chain":
        n = draw(st.sampled_from([10, 1000, 5000]))
        return "\n".join(["root ::= r0", *[f"r{i} ::= r{i + 1}" for i in range(n)], f'r{n} ::= "a"'])
    if kind == "left":
        n = draw(st.integers(1, 50))
        rules = [f'r{i} ::= r{(i + 1) % n} "x" | "y"' for i in range(n)]
        return "\n".join(["root ::= r0", *rules])
    if kind == "postfix":
        return 'root ::= "a"' + draw(st.sampled_from(["?", "*", "+"])) * draw(st.sampled_from([3, 255, 400]))
    k = draw(st.integers(5, 30))
    return 'root ::= [ab]* "a"' + " [ab]" * k


@st.composite
def _mangle(draw: st.DrawFn, data: bytes) -> bytes:
    how = draw(st.sampled_from(["none", "none", "none", "truncate", "bad-byte", "bom", "pad"]))
    if how == "truncate" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "bad-byte":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"])) + data[at:]
    if how == "bom":
        return b"\xfe\xff" + data
    if how == "pad":
        return data + b" " * 2_100_000
    return data


@st.composite
def hostile_inputs(draw: st.DrawFn) -> HostileInput:
    """One adversarial input (its ``expect`` is any typed outcome)."""
    kind = draw(st.sampled_from(["schema-file", "schema-file", "regex", "gbnf-file"]))
    profile: dict[str, Any] = {}
    if kind == "schema-file":
        data = draw(_mangle(json.dumps(draw(_schema())).encode()))
        profile = {"allow_duplicate_keys": draw(st.booleans())}
    elif kind == "regex":
        data = draw(_regex()).encode()
    else:
        data = draw(_mangle(draw(_gbnf()).encode()))
    return HostileInput(f"fuzz-{kind}", kind, data, TYPED, profile, seconds=SECONDS, mb=MB, limits=LIMITS)  # type: ignore[arg-type]


def _finding(inp: HostileInput, out: Outcome, why: list[str]) -> Finding:
    from props.backends.reference import ReferenceBackend

    text = inp.data.decode("utf-8", errors="backslashreplace")
    source: Any = text
    kind = {"schema-file": SpecKind.JSON_SCHEMA, "regex": SpecKind.REGEX}.get(inp.kind, SpecKind.GBNF)
    if kind == SpecKind.JSON_SCHEMA:
        try:
            source = json.loads(text)
        except ValueError:
            kind, source = SpecKind.GBNF, text  # not JSON: kept as text, the bytes are in the certificate
    return Finding(
        invariant=Invariant.LIMITS if out.typed else Invariant.CRASH,
        backend="reference",
        backend_version=ReferenceBackend.version,
        spec=SpecRef(kind, source, inp.name, "fuzz"),
        tokenizer="",
        tokenizer_fingerprint="",
        message=f"hostile {inp.kind}: " + "; ".join(why),
        certificate={
            "input_base64": base64.b64encode(inp.data).decode(),
            "kind": inp.kind,
            "outcome": out.outcome,
            "detail": out.detail,
            "seconds": round(out.seconds, 3),
            "peak_mb": round(out.peak_mb, 1),
            "limits": dict(inp.limits),
        },
        walk="hostile",
    )


def hostile_properties(ctx: TargetContext) -> list[Any]:
    # One server process per campaign worker, restarted when an input kills it; closed at exit.
    pool = HostileRunner(address_space_mb=ADDRESS_SPACE_MB, timeout_factor=2.0)
    atexit.register(pool.close)

    @given(hostile_inputs())
    def typed_bounded_refusal(inp: HostileInput) -> None:
        out = pool.run(inp)
        cover("hostile", f"{inp.kind}:{out.outcome}")
        why = problems(inp, out)
        if why:
            raise FindingFailure([_finding(inp, out, why)])

    return [Property("hostile/typed-bounded", typed_bounded_refusal)]
