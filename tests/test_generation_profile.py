"""The generation profile (``JsonProfile.generation()``, docs/design.md "The generation profile").

Its languages against independent, obviously-correct predicates written with ``re`` (not with the
compiler): a text is accepted under the profile iff it is accepted under JSON Schema's own reading
and its spelling is canonical / its ``\\u`` escapes are controls. Then trimness (every viable prefix
completes, the number lexeme's witnesses are canonical), token masks against the brute-force
definition, fingerprints of default-profile specs, and the named profile of ``--profile``.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refdecoder
from maskcert.json_profiles import ProfileError, parse_profile
from refdecoder import JsonProfile, JsonSchema
from refdecoder._fsa import CodepointDFA
from refdecoder._jsonstring import JsonStringLexeme
from refdecoder._numbers import CANONICAL_NUMBER_REGEX, NumberLexeme, NumberPredicate
from refdecoder._tokens import TokenGrammar
from refdecoder.errors import SpecError

GENERATION = JsonProfile.generation()

# -- the independent predicates ------------------------------------------------------------------------

_CANONICAL_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?([eE]-?[1-9][0-9]*)?")
_U_ESCAPE_OR_OTHER = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def canonical_number(text: str, must_be_integer: bool) -> bool:
    """No minus on a zero, no trailing fraction zero, exponent without + or leading zero (so not
    0); an integer schema's numbers without fraction or exponent."""
    if not _CANONICAL_TEXT.fullmatch(text):
        return False
    if text.startswith("-") and Decimal(text) == 0:
        return False
    return not (must_be_integer and re.search(r"[.eE]", text))


def escapes_are_controls(text: str) -> bool:
    """Every ``\\uXXXX`` escape in ``text`` (scanned left to right, so ``\\\\u`` is no escape)
    spells U+0000..U+001F."""
    return all(
        int(m.group(1)[1:], 16) <= 0x1F for m in _U_ESCAPE_OR_OTHER.finditer(text) if m.group(1)[0] == "u"
    )


# -- the grammars ---------------------------------------------------------------------------------------

#: schema, and which values the integer rule applies to (their text has no fraction, no exponent)
NUMBER_SCHEMAS: list[tuple[dict[str, Any], Any]] = [
    ({"type": "number"}, lambda v: False),
    ({"type": "integer"}, lambda v: True),
    ({"type": "number", "minimum": -1.5, "maximum": 2}, lambda v: False),
    ({"type": "number", "multipleOf": 0.5}, lambda v: False),
    ({"type": "number", "multipleOf": 3, "minimum": -7}, lambda v: True),
    ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.125}, lambda v: False),
    ({"const": 1.5}, lambda v: False),
    ({"const": 0}, lambda v: True),
    ({"enum": [0, 20, 1.25, -0.5]}, lambda v: v in (0, 20)),
    ({"type": "number", "not": {"type": "integer"}}, lambda v: False),
]


@cache
def grammar(schema_json: str, generation: bool) -> refdecoder.Grammar:
    profile = GENERATION if generation else JsonProfile()
    return refdecoder.compile(JsonSchema(json.loads(schema_json), profile))


def pair(schema: dict[str, Any]) -> tuple[refdecoder.Grammar, refdecoder.Grammar]:
    """The schema's grammars under JSON Schema's own reading and under the generation profile."""
    text = json.dumps(schema, sort_keys=True)
    return grammar(text, False), grammar(text, True)


number_texts = st.builds(
    lambda sign, whole, frac, exp: sign + whole + frac + exp,
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,3}", fullmatch=True), st.just("00")),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,4}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{0,3}", fullmatch=True)),
)


@pytest.mark.parametrize("k", range(len(NUMBER_SCHEMAS)))
@given(text=number_texts)
def test_numbers_accepted_iff_default_accepts_and_spelling_is_canonical(k: int, text: str) -> None:
    schema, integral = NUMBER_SCHEMAS[k]
    default, gen = pair(schema)
    in_default = default.accepts(text.encode())
    expected = in_default and canonical_number(text, integral(Decimal(text)))
    assert gen.accepts(text.encode()) == expected, (schema, text)


def test_number_examples() -> None:
    _, g = pair({"type": "number"})
    for text in ("0", "-1", "1.5", "0.01", "1e5", "1E-3", "0e5", "15e-1", "-0.5e2"):
        assert g.accepts(text.encode()), text
    for text in ("-0", "-0.0", "-0e5", "1.0", "1.50", "0.0", "1e05", "1e+5", "1e0", "1e-0", "1.50e3"):
        assert not g.accepts(text.encode()), text
    _, g = pair({"type": "integer"})
    assert [g.accepts(t) for t in (b"12", b"1e1", b"12.0", b"-0", b"0")] == [True, False, False, False, True]
    _, g = pair({"const": 1.50})
    assert [g.accepts(t) for t in (b"1.5", b"1.50", b"15e-1", b"0.15e1")] == [True, False, True, True]


def test_canonical_regex_of_any_number_agrees_with_the_predicate() -> None:
    pattern = re.compile(CANONICAL_NUMBER_REGEX)
    for text in ("0", "-0", "0e5", "-0e5", "-0.5", "1.50", "1e0", "1e+1", "1E-12", "-0.001e-3", "10"):
        assert bool(pattern.fullmatch(text)) == canonical_number(text, False), text


# -- strings and keys -------------------------------------------------------------------------------------

_CHARS = ["a", "/", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀"]
_SHORT = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _spellings(c: str) -> list[str]:
    out = []
    if ord(c) >= 0x20 and c not in '"\\':
        out.append(c)
    if c in _SHORT:
        out.append(_SHORT[c])
    cp = ord(c)
    if cp <= 0xFFFF:
        out += [f"\\u{cp:04x}", f"\\u{cp:04X}"]
    else:
        v = cp - 0x10000
        out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04x}")
    return out


string_bodies = st.lists(
    st.sampled_from(_CHARS).flatmap(lambda c: st.sampled_from(_spellings(c))), max_size=5
).map("".join)
STRING_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "string", "maxLength": 3},
    {"type": "string", "pattern": '^[a/\\\\"]*$'},
    {"type": "object", "additionalProperties": {"type": "integer"}},  # keys: key memory
]


@pytest.mark.parametrize("k", range(len(STRING_SCHEMAS)))
@given(body=string_bodies)
def test_strings_accepted_iff_default_accepts_and_escapes_are_controls(k: int, body: str) -> None:
    schema = STRING_SCHEMAS[k]
    text = f'{{"{body}":1}}' if schema["type"] == "object" else f'"{body}"'
    default, gen = pair(schema)
    expected = default.accepts(text.encode()) and escapes_are_controls(text)
    assert gen.accepts(text.encode()) == expected, (schema, text)


@given(body=string_bodies, lengths=st.sampled_from([None, (0, 2), (1, 4)]))
def test_lazy_string_lexeme_equals_the_byte_table(body: str, lengths: tuple[int, int] | None) -> None:
    """``JsonStringLexeme`` (read lazily, the path of large automata) and ``to_json_string`` (the
    byte table) under ``"controls"`` are one language."""
    dfa = CodepointDFA.any_string()
    text = f'"{body}"'.encode()
    table = dfa.to_json_string(unicode_escapes="controls")
    lazy = JsonStringLexeme(dfa, "controls", lengths)
    q: Any = table.start()
    s: Any = lazy.start()
    for b in text:
        q = None if q is None else table.step(q, b)
        s = None if s is None else lazy.step(s, b)
    in_table = q is not None and table.is_final(q)
    if in_table and lengths is not None:
        in_table = lengths[0] <= len(json.loads(text)) <= lengths[1]  # code points
    assert (s is not None and lazy.is_final(s)) == in_table, (text, lengths)
    if lengths is None:  # every body is valid JSON: the escapes decide
        assert in_table == escapes_are_controls(text.decode()), text


# -- trimness ---------------------------------------------------------------------------------------------

NUMBER_PREDICATES = [
    NumberPredicate.any(),
    NumberPredicate.from_keywords(minimum="1.5", maximum="1.5"),
    NumberPredicate.from_keywords(minimum=0, maximum=0),
    NumberPredicate.from_keywords(minimum=-3, maximum="-0.25", multiple_of="0.25"),
    NumberPredicate.from_keywords(integer=True, minimum=-20, maximum=100),
    NumberPredicate.from_keywords(multiple_of=7, maximum=50),
    NumberPredicate.from_keywords(exclusive_minimum="0.1", exclusive_maximum="0.100001"),
    NumberPredicate.from_keywords(minimum=100, maximum=100),
    NumberPredicate.from_keywords(integer=True).not_(),
    NumberPredicate.spelled("decimal").and_(NumberPredicate.from_keywords(minimum=0, maximum=0)),
]
_ALPHABET = b"0159-.eE+"


@pytest.mark.parametrize("k", range(len(NUMBER_PREDICATES)))
def test_every_canonical_number_prefix_completes_to_a_canonical_member(k: int) -> None:
    """Breadth first over every prefix of up to 5 bytes of a small alphabet: a state ``step``
    returns is completed by its witness to a final state, and the text is canonical."""
    pred = NUMBER_PREDICATES[k]
    lex = NumberLexeme(pred, canonical=True)
    canon = re.compile(CANONICAL_NUMBER_REGEX)
    frontier: list[tuple[bytes, Any]] = [(b"", lex.start())]
    for _ in range(5):
        nxt = []
        for text, state in frontier:
            for b in _ALPHABET:
                t = lex.step(state, b)
                if t is None:
                    continue
                word = text + bytes([b])
                w = lex.witness(t)
                end: Any = t
                for c in w:
                    end = lex.step(end, c)
                    assert end is not None, (word, w)
                assert lex.is_final(end), (word, w)
                full = (word + w).decode()
                assert canon.fullmatch(full), full
                assert pred.contains(Decimal(full)), full
                nxt.append((word, t))
        frontier = nxt


@given(which=st.integers(0, 1000), picks=st.lists(st.integers(0, 255), max_size=24))
def test_every_viable_prefix_of_the_grammar_completes(which: int, picks: list[int]) -> None:
    # (no uniqueItems of numbers here: "[0,0e" is viable under every profile though only 0 follows,
    # a trimness gap of _valuememory._NumbersMinus that predates this profile)
    schemas = (
        [s for s, _ in NUMBER_SCHEMAS]
        + STRING_SCHEMAS
        + [
            {"type": "array", "items": {"enum": [0, 1.5, 20, "a"]}, "uniqueItems": True},
            {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
        ]
    )
    _, g = pair(schemas[which % len(schemas)])
    s = g.initial()
    for k in picks:
        live = g.live_bytes(s)
        if not live:
            break
        nxt = g.advance_byte(s, live[k % len(live)])
        assert nxt is not None
        s = nxt
    word = g.completion(s)  # Grammar.completion checks the matcher accepts it
    assert word is not None
    assert g.accepts(_bytes_of(g, picks) + word)


def _bytes_of(g: refdecoder.Grammar, picks: list[int]) -> bytes:
    s: Any = g.initial()
    out = bytearray()
    for k in picks:
        live = g.live_bytes(s)
        if not live:
            break
        b = live[k % len(live)]
        out.append(b)
        s = g.advance_byte(s, b)
    return bytes(out)


# -- token masks ------------------------------------------------------------------------------------------


def test_token_masks_equal_the_brute_force_mask() -> None:
    import numpy as np

    tm = pytest.importorskip("tokenizers_matrix")
    vocab = tm.get("bpe")
    schema = {
        "type": "object",
        "properties": {"n": {"type": "number"}, "i": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n", "i", "s"],
    }
    g = refdecoder.compile(JsonSchema(schema, GENERATION))
    tg = TokenGrammar(g, vocab)
    for prefix in (
        b"",
        b'{"n":',
        b'{"n":-',
        b'{"n":-0',
        b'{"n":1.',
        b'{"n":1.50',
        b'{"n":2e',
        b'{"i":1',
        b'{"s":"\\u00',
    ):
        s = g.advance(g.initial(), prefix)
        assert s is not None, prefix
        assert np.array_equal(tg.mask(s), tg.mask_bruteforce(s)), prefix


# -- the independent validator (props.corpus) -------------------------------------------------------------


def test_the_corpus_validator_reads_controls_and_refuses_canonical_numbers() -> None:
    from props.contract.findings import SpecKind, SpecRef
    from props.corpus import validate_output
    from props.corpus._errors import CorpusError

    controls = SpecRef(SpecKind.JSON_SCHEMA, {"type": "string"}, profile={"unicode_escapes": "controls"})
    assert validate_output(controls, b'"\\u001f\\n\\/"') is None
    assert "not a control" in (validate_output(controls, b'"\\u0061"') or "")
    assert "not a control" in (validate_output(controls, b'"\\ud83d\\ude00"') or "")
    canonical = SpecRef(SpecKind.JSON_SCHEMA, {"type": "number"}, profile=GENERATION.as_dict())
    with pytest.raises(CorpusError, match="number_spelling"):
        validate_output(canonical, b"1.5")


# -- fingerprints and the named profile ------------------------------------------------------------------


def test_default_profile_fingerprints_are_unchanged() -> None:
    """Computed before number_spelling and "controls" existed: as_dict() omits defaults."""
    assert JsonSchema({"type": "number"}).canonical() == (
        'json-schema:[{"type":"number"},{"additional_items_default":true,"additional_properties_default":true,'
        '"allow_duplicate_keys":false,"formats":"annotation","property_order":"any","top_level_whitespace":true,'
        '"unicode_escapes":true,"whitespace":"any"},{}]'
    )
    profile = JsonProfile(whitespace="none", unicode_escapes=False, draft="draft7")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert JsonSchema(schema, profile).canonical() == (
        'json-schema:[{"properties":{"a":{"type":"string"}},"type":"object"},{"additional_items_default":true,'
        '"additional_properties_default":true,"allow_duplicate_keys":false,"draft":"draft-07",'
        '"formats":"annotation","property_order":"any","top_level_whitespace":true,"unicode_escapes":false,'
        '"whitespace":"none"},{}]'
    )
    assert (
        JsonSchema({}, GENERATION).canonical() != JsonSchema({}, JsonProfile(whitespace="none")).canonical()
    )


def test_the_named_profile_and_its_fields() -> None:
    assert parse_profile(["generation"]) == GENERATION
    spelled_out = JsonProfile(
        whitespace="none", unicode_escapes="controls", number_spelling="canonical", allow_duplicate_keys=False
    )
    assert spelled_out == GENERATION
    assert JsonProfile.generation(whitespace="any").whitespace == "any"
    assert parse_profile(["generation", "whitespace=any"]) == JsonProfile.generation(whitespace="any")
    p = parse_profile(["unicode_escapes=controls", "number_spelling=canonical"])
    assert (p.unicode_escapes, p.number_spelling) == ("controls", "canonical")
    with pytest.raises(ProfileError, match="unicode_escapes=controls"):
        parse_profile(["unicode_escapes=some"])
    with pytest.raises(ProfileError, match="a valid number_spelling"):
        parse_profile(["number_spelling=pretty"])
    with pytest.raises(SpecError):
        JsonProfile(unicode_escapes="all")  # type: ignore[arg-type]
