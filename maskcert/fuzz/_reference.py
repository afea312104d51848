"""The reference against independent oracles (``--target reference``).

* JSON Schema: small schemas from :func:`schemas`; instances from ``hypothesis-jsonschema`` (valid
  ones) and from arbitrary JSON values; verdict of ``refdecoder`` on the serialized text against
  ``jsonschema`` (Draft 2020-12) on the value.
* Regex: small patterns from :func:`regexes`; strings from ``st.from_regex`` and random text over the
  pattern's alphabet; ``refdecoder`` against ``re.fullmatch``.
* GBNF: small grammars from :func:`gbnf_grammars`; strings from ``gbnf_generate`` and random text;
  ``refdecoder`` against the second parser of ``props.corpus.gbnf_check`` — on acceptance and on the
  viability of every byte prefix.
* Masks: on random walks, ``TokenGrammar.mask`` (trie walk, lexeme tables, cache) against
  ``mask_bruteforce`` (``advance`` token by token), for each vocabulary of the campaign.

A disagreement is a :class:`~props.contract.findings.Finding` with backend ``reference``: ``soundness`` when
the reference accepts (allows) what the oracle rejects, ``completeness_byte`` when it rejects a
string the oracle accepts (``completeness_token`` for a mask bit), ``eos`` for an EOS bit.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from typing import Any

import numpy as np
from hypothesis import given, reject
from hypothesis import strategies as st

import refdecoder
from maskcert.fuzz._property import Property, TargetContext, cover
from props.contract.findings import Finding, FindingFailure, Invariant, SpecRef
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Regex, Spec, TokenGrammar
from refdecoder.errors import LimitExceeded, SpecError, Unsupported

__all__ = ["reference_properties", "schemas", "regexes", "gbnf_grammars", "json_values", "spec_ref"]

BACKEND = "reference"
PROFILE = JsonProfile(allow_duplicate_keys=True)
_REFUSED = (Unsupported, LimitExceeded, SpecError)


def _version() -> str:
    from props.backends.reference import ReferenceBackend

    return ReferenceBackend.version


def spec_ref(spec: Spec, name: str = "") -> SpecRef:
    """How to rebuild ``spec`` (the ``spec`` field of a finding)."""
    return SpecRef.of(spec, name, "fuzz")


def _compile(spec: Spec) -> refdecoder.Grammar:
    try:
        return refdecoder.compile(spec)
    except _REFUSED:
        cover("refused", type(spec).__name__)
        reject()
        raise  # unreachable: reject() raises


def _disagreement(spec: Spec, text: str, accepted: bool, oracle: str, why: str, walk: str) -> Finding:
    data = text.encode("utf-8")
    if accepted:  # the reference lets an invalid string finish
        return Finding(
            invariant=Invariant.SOUNDNESS,
            backend=BACKEND,
            backend_version=_version(),
            spec=spec_ref(spec),
            tokenizer="",
            tokenizer_fingerprint="",
            backend_verdict="accepted",
            reference_verdict="rejected",
            message=f"refdecoder accepts {text!r}, which {oracle} rejects",
            certificate={"completion": data, "validator_error": why, "validated_by": oracle},
            prefix_bytes=data,
            walk=walk,
        )
    return Finding(
        invariant=Invariant.COMPLETENESS_BYTE,
        backend=BACKEND,
        backend_version=_version(),
        spec=spec_ref(spec),
        tokenizer="",
        tokenizer_fingerprint="",
        backend_verdict="rejected",
        reference_verdict="accepted",
        message=f"refdecoder rejects {text!r}, which {oracle} accepts",
        certificate={"witness": data, "validated_by": oracle},
        prefix_bytes=data,
        walk=walk,
    )


# -- JSON Schema -------------------------------------------------------------------------------------
def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**6), 10**6),
        st.sampled_from([0, -1, 1.5, 2.0, 1e20, -0.5]),
        st.floats(allow_nan=False, allow_infinity=False, width=32),
        st.text(max_size=6),
        st.sampled_from(["", "a", "ab", "é", "0", "x1"]),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(["a", "b", "c", "x1", "é"]), inner, max_size=3),
        ),
        max_leaves=8,
    )


_NAMES = ["a", "b", "c", "x1"]


@st.composite
def _leaf_schema(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number", "string", "boolean", "null", "enum", "const", "any"]))
    if kind == "integer" or kind == "number":
        s: dict[str, Any] = {"type": kind}
        for kw in draw(
            st.lists(
                st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
                unique=True,
                max_size=2,
            )
        ):
            s[kw] = (
                draw(st.integers(-20, 20))
                if kind == "integer" or draw(st.booleans())
                else draw(st.sampled_from([-2.5, 0.5, 1.25]))
            )
        if kind == "integer" and draw(st.booleans()):
            s["multipleOf"] = draw(st.integers(1, 7))
        return s
    if kind == "string":
        s = {"type": "string"}
        if draw(st.booleans()):
            s["minLength"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            s["maxLength"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            s["pattern"] = draw(st.sampled_from(["^a", "b$", "^[a-c]*$", "x", "^[0-9]{1,2}$", "é"]))
        return s
    if kind == "enum":
        return {"enum": draw(st.lists(json_values(), min_size=1, max_size=4))}
    if kind == "const":
        return {"const": draw(json_values())}
    if kind == "any":
        return draw(st.sampled_from([{}, {"type": ["string", "integer"]}, {"not": {"type": "string"}}]))
    return {"type": kind}


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Small JSON Schemas over the keywords the reference compiles exactly."""

    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        @st.composite
        def obj(draw: st.DrawFn) -> dict[str, Any]:
            members: dict[str, Any] = draw(st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3))
            s: dict[str, Any] = {"type": "object", "properties": members}
            with_required: bool = draw(st.booleans())
            if members and with_required:
                s["required"] = draw(st.lists(st.sampled_from(sorted(members)), unique=True, min_size=1))
            extra = draw(st.sampled_from(["absent", "false", "schema"]))
            if extra == "false":
                s["additionalProperties"] = False
            elif extra == "schema":
                s["additionalProperties"] = draw(inner)
            if draw(st.booleans()):
                s["maxProperties"] = draw(st.integers(0, 3))
            return s

        @st.composite
        def arr(draw: st.DrawFn) -> dict[str, Any]:
            s: dict[str, Any] = {"type": "array"}
            if draw(st.booleans()):
                s["prefixItems"] = draw(st.lists(inner, min_size=1, max_size=2))
            if draw(st.booleans()):
                s["items"] = draw(st.one_of(inner, st.just(False)))
            if draw(st.booleans()):
                s["minItems"] = draw(st.integers(0, 2))
            if draw(st.booleans()):
                s["maxItems"] = draw(st.integers(0, 3))
            return s

        combos = st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
            st.lists(inner, min_size=1, max_size=2).map(lambda xs: {"allOf": xs}),
            st.lists(inner, min_size=1, max_size=2).map(lambda xs: {"oneOf": xs}),
            inner.map(lambda x: {"not": x}),
        )
        return st.one_of(obj(), arr(), combos)

    return st.recursive(_leaf_schema(), extend, max_leaves=5)


def _keywords(schema: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k in ("enum", "const"):
                out.add(k)
                continue
            out.add(k)
            if k == "properties" and isinstance(v, dict):
                for sub in v.values():
                    out |= _keywords(sub)
            elif isinstance(v, list):
                for sub in v:
                    out |= _keywords(sub)
            else:
                out |= _keywords(v)
    return out


def _jsonschema_property() -> Property:
    import jsonschema
    from hypothesis.errors import InvalidArgument
    from hypothesis_jsonschema import from_schema

    @given(schema=schemas(), data=st.data())
    def jsonschema_agreement(schema: dict[str, Any], data: st.DataObject) -> None:
        spec = JsonSchema(schema, PROFILE)
        grammar = _compile(spec)
        validator = jsonschema.Draft202012Validator(schema)
        for kw in _keywords(schema):
            cover("keyword", kw)
        if data.draw(st.booleans(), label="valid instance"):
            try:
                value = data.draw(from_schema(schema), label="instance")
            except InvalidArgument:
                reject()
        else:
            value = data.draw(json_values(), label="instance")
        compact = data.draw(st.booleans(), label="compact")
        try:
            text = json.dumps(
                value,
                separators=(",", ":") if compact else None,
                ensure_ascii=data.draw(st.booleans(), label="ascii"),
                allow_nan=False,
            )
        except ValueError:
            reject()
        errors = list(validator.iter_errors(value))
        accepted = grammar.accepts(text.encode("utf-8"))
        cover("invariant", "soundness" if not errors else "completeness_byte")
        if accepted == bool(errors):
            why = errors[0].message if errors else ""
            raise FindingFailure(
                [_disagreement(spec, text, accepted, "jsonschema (Draft 2020-12)", why, "jsonschema")]
            )

    return Property("reference/jsonschema", jsonschema_agreement)


# -- regex -------------------------------------------------------------------------------------------
_REGEX_ATOMS = ["a", "b", "0", "é", "-", r"\.", "[a-c]", "[^a]", r"\d", ".", "[0-9é]", "x"]


def regexes() -> st.SearchStrategy[str]:
    """Small regular patterns in Python syntax (nothing the reference refuses)."""
    atom = st.sampled_from(_REGEX_ATOMS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        quant = st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}"])
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
            st.tuples(inner, quant).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )

    return st.recursive(atom, extend, max_leaves=6)


def _regex_property() -> Property:
    alphabet = st.sampled_from(list("ab0é-.xc9\n") + ["\u00e9", "\U0001f600"])

    @given(pattern=regexes(), data=st.data())
    def regex_agreement(pattern: str, data: st.DataObject) -> None:
        spec = Regex(pattern)
        grammar = _compile(spec)
        cover("construct", "regex")
        if data.draw(st.booleans(), label="from the pattern"):
            text = data.draw(st.from_regex(pattern, fullmatch=True), label="text")
        else:
            text = data.draw(st.text(alphabet, max_size=6), label="text")
        try:
            data_bytes = text.encode("utf-8")
        except UnicodeEncodeError:
            reject()
        accepted = grammar.accepts(data_bytes)
        expected = re.fullmatch(pattern, text) is not None
        cover("invariant", "soundness" if not expected else "completeness_byte")
        if accepted != expected:
            why = "" if expected else "re.fullmatch returns None"
            raise FindingFailure([_disagreement(spec, text, accepted, "re.fullmatch", why, "regex")])

    return Property("reference/regex", regex_agreement)


# -- GBNF --------------------------------------------------------------------------------------------
@st.composite
def gbnf_grammars(draw: st.DrawFn) -> str:
    """Small GBNF grammars: literals, classes, rule references (recursion included), groups and
    repetition operators."""
    n_rules = draw(st.integers(1, 3))
    names = ["root"] + [f"r{i}" for i in range(1, n_rules)]

    def item(depth: int) -> str:
        kind = draw(
            st.sampled_from(["lit", "lit", "class", "ref", "group"] if depth < 2 else ["lit", "class"])
        )
        if kind == "lit":
            base = json.dumps(draw(st.sampled_from(["a", "b", "ab", "é", "0", "\n"])), ensure_ascii=False)
        elif kind == "class":
            base = draw(st.sampled_from(["[a-c]", "[^a]", "[0-9]", "[éb]"]))
        elif kind == "ref":
            base = draw(st.sampled_from(names))
        else:
            base = "(" + alternation(depth + 1) + ")"
        return base + draw(st.sampled_from(["", "", "?", "*", "+", "{1,2}", "{2}"]))

    def sequence(depth: int) -> str:
        return " ".join(item(depth) for _ in range(draw(st.integers(1, 3))))

    def alternation(depth: int) -> str:
        return " | ".join(sequence(depth) for _ in range(draw(st.integers(1, 3))))

    return "\n".join(f"{name} ::= {alternation(0)}" for name in names) + "\n"


def _gbnf_property() -> Property:
    from props.corpus.gbnf_check import gbnf_accepts, gbnf_generate, gbnf_viable_bytes

    alphabet = st.sampled_from(list("abc09é\nx"))

    @given(grammar=gbnf_grammars(), data=st.data())
    def gbnf_agreement(grammar: str, data: st.DataObject) -> None:
        spec = Gbnf(grammar)
        compiled = _compile(spec)
        cover("construct", "gbnf")
        text = data.draw(st.text(alphabet, max_size=6), label="text")
        if data.draw(st.booleans(), label="generated"):
            rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="generator seed"))
            with contextlib.suppress(ValueError, RecursionError):  # an empty language: keep the random text
                text = gbnf_generate(grammar, rng, max_depth=4, max_len=12)
        accepted = compiled.accepts(text.encode("utf-8"))
        expected = gbnf_accepts(text, grammar)
        cover("invariant", "soundness" if not expected else "completeness_byte")
        if accepted != expected:
            raise FindingFailure(
                [
                    _disagreement(
                        spec,
                        text,
                        accepted,
                        "props.corpus.gbnf_check (Earley)",
                        "" if expected else "not in the language",
                        "gbnf",
                    )
                ]
            )
        state = compiled.initial()
        data_bytes = text.encode("utf-8")
        for k in range(1, len(data_bytes) + 1):
            nxt = compiled.advance_byte(state, data_bytes[k - 1])
            viable = gbnf_viable_bytes(data_bytes[:k], grammar)
            cover("invariant", "liveness")
            if (nxt is not None) != viable:
                prefix = data_bytes[:k]
                f = Finding(
                    invariant=Invariant.SOUNDNESS if nxt is not None else Invariant.COMPLETENESS_BYTE,
                    backend=BACKEND,
                    backend_version=_version(),
                    spec=spec_ref(spec),
                    tokenizer="",
                    tokenizer_fingerprint="",
                    backend_verdict="viable" if nxt is not None else "dead",
                    reference_verdict="viable" if viable else "dead",
                    message=f"refdecoder says the prefix {prefix!r} is {'viable' if nxt is not None else 'dead'}, "
                    f"the second GBNF parser says {'viable' if viable else 'dead'}",
                    certificate={"prefix": prefix, "validated_by": "props.corpus.gbnf_check"},
                    prefix_bytes=prefix,
                    walk="gbnf-prefix",
                )
                raise FindingFailure([f])
            if nxt is None:
                break
            state = nxt

    return Property("reference/gbnf", gbnf_agreement)


# -- masks: fast paths against the per-token definition ---------------------------------------------
_MASK_SPECS: tuple[Spec, ...] = (
    Choice(["yes", "no", "maybe", "日本"]),
    Regex(r"[a-c]{1,4}(-[0-9]{1,2})?"),
    Regex(r"(é|ab|\d)+!?"),
    JsonSchema(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}},
            "required": ["a"],
            "additionalProperties": False,
        },
        JsonProfile(allow_duplicate_keys=True, whitespace=1),
    ),
    JsonSchema(
        {"type": "array", "items": {"enum": ["x", "é", 1, None]}, "maxItems": 3},
        JsonProfile(allow_duplicate_keys=True, whitespace=1),
    ),
    Gbnf('root ::= "(" root ")" | [a-c]+ | "é"'),
)


def _bits(mask: np.ndarray, vocab_size: int) -> np.ndarray:
    from refdecoder.bitmask import unpack_mask

    bits = np.zeros(vocab_size, dtype=bool)
    bits[unpack_mask(np.asarray(mask), vocab_size)] = True
    return bits


def _masks_property(ctx: TargetContext) -> Property:
    vocabs = ctx.vocabularies()
    tables: dict[tuple[int, int, bool], TokenGrammar] = {}

    def token_grammar(si: int, vi: int, spec: Spec, fast: bool) -> TokenGrammar:
        key = (si, vi, fast)
        if key not in tables:
            g = refdecoder.compile(spec)
            tables[key] = (
                TokenGrammar(g, vocabs[vi])
                if fast
                else TokenGrammar(g, vocabs[vi], lexeme_tables=False, cache_bytes=0)
            )
        return tables[key]

    generated = st.one_of(
        regexes().map(Regex),
        schemas().map(lambda s: JsonSchema(s, JsonProfile(allow_duplicate_keys=True, whitespace=1))),
    )

    @given(
        which=st.integers(0, len(_MASK_SPECS)),
        extra=generated,
        vi=st.integers(0, len(vocabs) - 1),
        fast=st.booleans(),
        data=st.data(),
    )
    def masks_equal_definition(which: int, extra: Spec, vi: int, fast: bool, data: st.DataObject) -> None:
        vocab = vocabs[vi]
        if which < len(_MASK_SPECS):
            spec = _MASK_SPECS[which]
            tg = token_grammar(which, vi, spec, fast)
        else:
            spec = extra
            g = _compile(spec)
            tg = (
                TokenGrammar(g, vocab) if fast else TokenGrammar(g, vocab, lexeme_tables=False, cache_bytes=0)
            )
        cover("construct", f"mask:{type(spec).__name__}")
        state = tg.initial()
        ids: list[int] = []
        prefix = b""
        for _ in range(data.draw(st.integers(0, 8), label="steps")):
            got = _bits(tg.mask(state), tg.vocab_size)
            want = _bits(tg.mask_bruteforce(state), tg.vocab_size)
            cover("invariant", "completeness_token")
            cover("invariant", "soundness")
            if not np.array_equal(got, want):
                findings = []
                for t in np.flatnonzero(got != want)[:4].tolist():
                    is_eos = t in tg.eos_ids
                    allowed = bool(got[t])
                    inv = (
                        Invariant.EOS
                        if is_eos
                        else (Invariant.SOUNDNESS if allowed else Invariant.COMPLETENESS_TOKEN)
                    )
                    findings.append(
                        Finding(
                            invariant=inv,
                            backend=BACKEND,
                            backend_version=_version(),
                            spec=spec_ref(spec),
                            tokenizer=str(getattr(vocab, "name", "")),
                            tokenizer_fingerprint=str(getattr(vocab, "fingerprint", "")),
                            prefix_ids=tuple(ids),
                            token_id=int(t),
                            token_bytes=tg.token_bytes(int(t)),
                            backend_verdict="allowed" if allowed else "masked",
                            reference_verdict="masked" if allowed else "allowed",
                            reference_allows=not allowed,
                            message=f"TokenGrammar.mask ({'fast paths' if fast else 'plain walk'}) differs from "
                            "mask_bruteforce",
                            prefix_bytes=prefix,
                            walk="random",
                            certificate={"fast_paths": fast},
                        )
                    )
                raise FindingFailure(findings)
            choices = [t for t in np.flatnonzero(want).tolist() if t not in tg.eos_ids]
            if not choices:
                break
            t = choices[data.draw(st.integers(0, len(choices) - 1), label="token")]
            nxt = tg.advance(state, t)
            assert nxt is not None, "the brute-force mask allowed a token advance() refuses"
            state = nxt
            ids.append(t)
            prefix += tg.token_bytes(t) or b""

    return Property("reference/masks", masks_equal_definition)


def reference_properties(ctx: TargetContext) -> list[Property]:
    """The reference's self-checks (the sampler's are in :mod:`maskcert.fuzz._sampler`)."""
    return [_jsonschema_property(), _regex_property(), _gbnf_property(), _masks_property(ctx)]
