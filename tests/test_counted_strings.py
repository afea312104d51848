"""String languages ``D ∩ {length in [lo, hi]}`` read with the length counted in the lexeme state
(``JsonStringLexeme(..., lengths=(lo, hi))``, ``refdecoder._shapes.CountedStrings``), checked against
the product automaton where both can be built, and ``date-time``/``time`` beside ``maxLength``."""

from __future__ import annotations

import json
from collections.abc import Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from props.corpus.format_check import CHECKS
from refdecoder import JsonProfile, JsonSchema, LimitExceeded, Limits
from refdecoder._formats import format_dfa
from refdecoder._fsa import CodepointDFA
from refdecoder._jsonstring import JsonStringLexeme, remaining_lengths
from refdecoder._shapes import CountedStrings, and_strings, or_strings

# -- the lexeme against the product ----------------------------------------------------------------
# Code points of every spelling class: ASCII, a short escape ("\n", '"'), 2-, 3- and 4-byte UTF-8 (the
# last a surrogate pair when written \u).
CPS = ["a", "b", "\n", '"', "é", "€", "😀"]


def _lang(draw: st.DrawFn) -> CodepointDFA:
    words = draw(st.lists(st.text(st.sampled_from(CPS), min_size=1, max_size=3), min_size=1, max_size=4))
    d = CodepointDFA.literals(words)
    shape = draw(st.sampled_from(["star", "plus", "words", "concat"]))
    if shape == "star":
        return d.star()
    if shape == "plus":
        return d.plus()
    if shape == "concat":
        return d.concat(CodepointDFA.literals(["a", "😀"]).star(), d)
    return d


def _spell(cp: str, how: int) -> str:
    """One code point inside a JSON string: raw, short escape, or \\u (a pair above U+FFFF)."""
    if cp in ('"', "\\", "\n") and how == 0:
        how = 1
    if how == 0:
        return cp
    if how == 1 and cp in ('"', "\\", "\n"):
        return json.dumps(cp)[1:-1]
    return json.dumps(cp, ensure_ascii=True)[1:-1] if ord(cp) > 0x7F else f"\\u{ord(cp):04x}"


@st.composite
def cases(draw: st.DrawFn) -> tuple[CodepointDFA, int, int, list[bytes]]:
    d = _lang(draw)
    lo = draw(st.integers(0, 6))
    hi = draw(st.integers(lo, 9))
    texts = []
    for _ in range(6):
        cps = draw(st.lists(st.sampled_from(CPS), max_size=10))
        body = "".join(_spell(c, draw(st.integers(0, 2))) for c in cps)
        raw = ('"' + body + '"').encode("utf-8")
        texts.append(raw + draw(st.binary(max_size=2)))
    return d, lo, hi, texts


def _run(lex: JsonStringLexeme, data: bytes) -> list[Hashable | None]:
    out: list[Hashable | None] = []
    s: Hashable | None = lex.start()
    for b in data:
        s = None if s is None else lex.step(s, b)
        out.append(s)
    return out


@settings(max_examples=150, deadline=None)
@given(cases(), st.booleans())
def test_counted_lexeme_equals_the_product(
    case: tuple[CodepointDFA, int, int, list[bytes]], escapes: bool
) -> None:
    d, lo, hi, texts = case
    product = d.length_between(lo, hi)
    counted = JsonStringLexeme(d, escapes, (lo, hi))
    assert CountedStrings(d, lo, hi).is_empty() == product.is_empty()
    if product.is_empty():
        assert not counted.can_continue(counted.start()) and counted.step(counted.start(), 0x22) is None
        return
    plain = JsonStringLexeme(product, escapes)
    assert len(counted.witness(counted.start()) or b"") == len(plain.witness(plain.start()) or b"")
    for text in texts:
        for i, (a, b) in enumerate(zip(_run(counted, text), _run(plain, text), strict=True)):
            assert (a is None) == (b is None), (text, i)
            if a is None or b is None:
                break
            assert counted.is_final(a) == plain.is_final(b)
            w = counted.witness(a)
            assert w is not None and len(w) == len(plain.witness(b) or b"")
            # the witness completes the prefix into a member of the language
            done = _run(counted, text[: i + 1] + w)
            assert done[-1] is not None and counted.is_final(done[-1])
            value = json.loads(text[: i + 1] + w)
            assert product.accepts(value)


def _remaining_lengths_slow(d: CodepointDFA, hi: int) -> list[int]:
    """Every layer computed (no period taken): the slow path of ``remaining_lengths``."""
    masks = [0] * d.num_states
    layer = set(d.finals)
    for r in range(hi + 1):
        for q in layer:
            masks[q] |= 1 << r
        layer = {s for s in range(d.num_states) for _, _, t in d.row(s) if t in layer}
    return masks


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(0, 40))
def test_remaining_lengths_periodic_equals_slow(data: st.DataObject, hi: int) -> None:
    d = data.draw(st.composite(lambda draw: _lang(draw))())
    fast, slow = remaining_lengths(d, hi), _remaining_lengths_slow(d, hi)
    assert [fast.bits(q) for q in range(d.num_states)] == slow
    a = data.draw(st.integers(-3, hi + 3))
    b = data.draw(st.integers(a - 1, hi + 5))
    window = sum(1 << r for r in range(max(a, 0), min(b, hi) + 1))
    assert all(fast.meets(q, a, b) == bool(slow[q] & window) for q in range(d.num_states))


def test_remaining_lengths_are_exact() -> None:
    d = CodepointDFA.literals(["ab", "abcde"]).star()  # lengths: sums of 2 and 5
    lengths = remaining_lengths(d, 12)
    assert [r for r in range(13) if lengths.bits(0) >> r & 1] == [0, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert lengths.period >= 1 and not lengths.meets(0, 1, 1) and not lengths.meets(0, 3, 3)
    assert lengths.meets(0, 3, 4) and lengths.meets(0, 12, 40) and not lengths.meets(0, 13, 40)


def test_counted_lengths_count_code_points() -> None:
    lex = JsonStringLexeme(CodepointDFA.any_string(), True, (2, 3))
    ok = ['"ab"', '"a\\n"', '"\\u00e9\\u00e9"', '"😀😀😀"', '"\\ud83d\\ude00a"', '"é€😀"']
    bad = ['"a"', '"abcd"', '"\\n"', '"😀😀😀😀"', '""']
    for text in ok + bad:
        states = _run(lex, text.encode("utf-8"))
        last = states[-1]
        assert (last is not None and lex.is_final(last)) == (text in ok), text
    # a fourth code point is refused when it starts, not when it ends
    states = _run(lex, '"abc😀'.encode())
    assert states[3] is not None and states[4] is None


def test_string_algebra_keeps_the_counted_form_only_where_exact() -> None:
    d = CodepointDFA.literals(["ab", "abc"]).star()
    c = CountedStrings(d, 3, 7)
    assert and_strings(c, CodepointDFA.any_string()) == c
    assert and_strings(c, CodepointDFA.any_string().length_between(4, 20)) == CountedStrings(d, 4, 7)
    assert and_strings(c, CountedStrings(d, 0, 5)) == CountedStrings(d, 3, 5)
    assert and_strings(c, CodepointDFA.any_string().length_between(8, 9)).is_empty()
    e = and_strings(c, CodepointDFA.literals(["ab", "c"]).star())  # (D ∩ E) ∩ L
    assert e == CountedStrings(d.intersection(CodepointDFA.literals(["ab", "c"]).star()), 3, 7)
    assert or_strings(c, CodepointDFA.empty()) == c and or_strings(c, c) == c
    u = or_strings(c, CodepointDFA.literal("x"))  # any other operation builds the product
    assert isinstance(u, CodepointDFA) and u.accepts("x") and u.accepts("ababc") and not u.accepts("ab")


# -- date-time and time beside maxLength -----------------------------------------------------------
def _compile(schema: dict[str, object]) -> refdecoder.Grammar:
    return refdecoder.compile(JsonSchema(schema, JsonProfile(formats="assert")))


DT = "2024-01-02T03:04:05"


@pytest.mark.parametrize("fmt", ["date-time", "time"])
@pytest.mark.parametrize("bounds", [(0, 49), (0, 50), (0, 64), (0, 100), (25, 64), (30, 50)])
def test_formats_beside_max_length_compile_and_decide(fmt: str, bounds: tuple[int, int]) -> None:
    lo, hi = bounds
    g = _compile({"type": "string", "format": fmt, "minLength": lo, "maxLength": hi})
    head = DT if fmt == "date-time" else DT[11:]
    for frac in range(0, 90):
        for tail in ("Z", "+01:30"):
            value = head + ("." + "1" * frac if frac else "") + tail
            expected = CHECKS[fmt](value) and lo <= len(value) <= hi
            text = json.dumps(value)
            assert g.accepts(text.encode()) == expected, (value, len(value))
            if CHECKS[fmt](value) and len(value) > hi:  # dead at hi + 1 code points, alive before
                assert g.advance(g.initial(), json.dumps(value[: hi + 1])[:-1].encode()) is None
                if tail == "Z":  # a fraction digit, then "Z" makes hi
                    assert g.advance(g.initial(), json.dumps(value[: hi - 1])[:-1].encode()) is not None


@pytest.mark.parametrize(
    "fmt, lo, hi", [("date-time", 0, 30), ("date-time", 22, 35), ("time", 0, 20), ("time", 9, 24)]
)
def test_counted_format_equals_the_product(fmt: str, lo: int, hi: int) -> None:
    """Under ``dfa_states=12000`` the product passes the limit and the length is counted; under the
    default limit the product is built: both grammars agree on every prefix (viability, acceptance,
    completion length) of valid, invalid and too long values."""
    schema = {"type": "string", "format": fmt, "minLength": lo, "maxLength": hi}
    spec = JsonSchema(schema, JsonProfile(formats="assert"))
    counted = refdecoder.compile(spec, Limits(dfa_states=12000))
    product = refdecoder.compile(JsonSchema(schema, JsonProfile(formats="assert")))
    fsa = format_dfa(fmt)
    assert fsa is not None
    with pytest.raises(LimitExceeded):  # so ``counted`` does count
        fsa.length_between(lo, hi, max_states=12000)
    head = DT if fmt == "date-time" else DT[11:]
    values = [head + "Z", head + ".5+01:30", head + "." + "9" * 20 + "z", head[:-2] + "60Z", head + "+24:00"]
    values += [head.replace("T", "t") + ".123-00:00", "\\u0032" + head[1:] + "Z"]
    for value in values:
        text = json.dumps(value)[:-1].encode() + b'"'
        if value.startswith("\\u"):
            text = ('"' + value + '"').encode()
        a, b = counted.initial(), product.initial()
        for byte in text:
            a2, b2 = counted.advance_byte(a, byte), product.advance_byte(b, byte)
            assert (a2 is None) == (b2 is None), (value, text)
            if a2 is None or b2 is None:
                break
            a, b = a2, b2
            assert counted.is_accepting(a) == product.is_accepting(b)
            ca, cb = counted.completion(a), product.completion(b)
            assert ca is not None and cb is not None and len(ca) == len(cb)
            assert counted.live_bytes(a) == product.live_bytes(b)


def test_date_time_max_length_escapes_count_once() -> None:
    g = _compile({"type": "string", "format": "date-time", "maxLength": 50})
    value = DT + "." + "1" * 29 + "Z"  # 50 code points
    assert len(value) == 50
    assert g.accepts(json.dumps(value).encode())
    escaped = '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'
    assert g.accepts(escaped.encode())
    assert not g.accepts(json.dumps(DT + "." + "1" * 30 + "Z").encode())


def test_max_length_past_dfa_states_alone_is_counted() -> None:
    """``maxLength`` whose counter alone passes ``dfa_states`` (JSONSchemaBench has 65,535 and 131,072)."""
    g = refdecoder.compile_json_schema({"type": "string", "minLength": 10, "maxLength": 60_000})
    assert g.accepts(json.dumps("a" * 60_000).encode()) and g.accepts(json.dumps("é" * 59_999).encode())
    assert not g.accepts(json.dumps("a" * 60_001).encode()) and not g.accepts(json.dumps("a" * 9).encode())
    full = g.advance(g.initial(), b'"' + b"a" * 59_999)
    assert full is not None and g.completion(full) == b'"'
    last = g.advance(full, b"\\u0041")  # an escape is one code point: the 60,000th
    assert last is not None and g.live_bytes(last) == b'"'
    short = g.advance(g.initial(), b'"ab')
    assert short is not None and g.completion(short) == b'aaaaaaaa"'
    with pytest.raises(LimitExceeded):  # minLength has no finite bound to count up to: as before
        refdecoder.compile_json_schema({"type": "string", "minLength": 60_000})


def test_counted_form_refuses_other_combinations_as_before() -> None:
    # a union with another string language needs the product: refused past dfa_states, as before
    with pytest.raises(LimitExceeded) as e:
        _compile({"anyOf": [{"format": "date-time", "maxLength": 64}, {"type": "string", "pattern": "^x$"}]})
    assert e.value.limit == "dfa_states"
