"""Properties of the code point automaton algebra and its byte-level views (``refdecoder._fsa``).

Every operation is checked pointwise against Boolean combinations of ``accepts`` (or of
``re.fullmatch`` for the operands) on generated strings; the byte views are checked against
``str.encode`` / ``bytes.decode`` and ``json.loads(strict=True)``.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refdecoder._fsa import CodepointDFA
from refdecoder._lexeme import ByteDFA
from refdecoder._limits import Limits, budget_scope
from refdecoder._regex import compile_regex_dfa
from refdecoder.errors import LimitExceeded

# A small alphabet with ASCII, a control character, Latin-1, CJK, an astral character and the
# characters JSON escapes specially.
ALPHABET = 'ab0\n"\\/é中😀\x01\u2028'
texts = st.text(alphabet=ALPHABET, max_size=8)

# Operands: Python patterns, so each one's language is also known through re.fullmatch.
PATTERNS = [
    "",
    "a*",
    "(ab|b)*",
    "a?b+",
    "[ab]{2,3}",
    "[^a]*",
    ".*中.*",
    "(?s).{0,2}",
    "a|é|😀",
    '[\\x00-\\x1f"\\\\]+',
    "(a|b)*a(a|b)",
    "[0-9]+(\\.[0-9]+)?",
    "[^\\n]*\\n",
    "(?:😀|中)+é?",
]
DFAS = {p: compile_regex_dfa(p, flavor="python", mode="fullmatch") for p in PATTERNS}
pattern = st.sampled_from(PATTERNS)


def in_lang(p: str, s: str) -> bool:
    return re.fullmatch(p, s) is not None


def mutations(s: str, rng: random.Random, n: int = 6) -> list[str]:
    out = []
    for _ in range(n):
        i = rng.randint(0, len(s))
        op = rng.randrange(3)
        c = rng.choice(ALPHABET)
        if op == 0:
            out.append(s[:i] + c + s[i:])
        elif op == 1 and s:
            out.append(s[: min(i, len(s) - 1)] + s[min(i, len(s) - 1) + 1 :])
        elif s:
            j = min(i, len(s) - 1)
            out.append(s[:j] + c + s[j + 1 :])
    return out


def assert_trim(b: ByteDFA) -> None:
    """Every reachable state reaches a final state (the Lexeme contract)."""
    trans = b.transitions()
    preds: dict[int, set[int]] = {}
    for s, row in trans.items():
        for t in row.values():
            preds.setdefault(t, set()).add(s)
    live = set(b.finals)
    stack = list(live)
    while stack:
        t = stack.pop()
        for s in preds.get(t, ()):
            if s not in live:
                live.add(s)
                stack.append(s)
    assert live == set(range(b.num_states))


# -- the Boolean algebra ---------------------------------------------------------------------------
@given(pattern, pattern, st.lists(texts, min_size=1, max_size=6))
def test_boolean_operations_agree_pointwise(p, q, strings):
    a, b = DFAS[p], DFAS[q]
    ops = {
        "union": (a.union(b), lambda x, y: x or y),
        "intersection": (a.intersection(b), lambda x, y: x and y),
        "difference": (a.difference(b), lambda x, y: x and not y),
        "symmetric_difference": (a.symmetric_difference(b), lambda x, y: x != y),
    }
    examples = a.examples(3) + b.examples(3)
    for s in strings + examples:
        x, y = in_lang(p, s), in_lang(q, s)
        assert a.accepts(s) == x and b.accepts(s) == y
        for name, (dfa, f) in ops.items():
            assert dfa.accepts(s) == f(x, y), (name, p, q, s)
        assert a.complement().accepts(s) == (not x)


@given(pattern, pattern, st.lists(texts, min_size=1, max_size=5))
def test_concat_and_star_agree_with_splits(p, q, strings):
    a, b = DFAS[p], DFAS[q]
    ab = a.concat(b)
    star = a.star()
    for s in strings + [x + y for x in a.examples(2) for y in b.examples(2)]:
        assert ab.accepts(s) == any(a.accepts(s[:i]) and b.accepts(s[i:]) for i in range(len(s) + 1))
        # s in A* iff s is a concatenation of members of A: dynamic programming over prefixes
        ok = [True] + [False] * len(s)
        for j in range(1, len(s) + 1):
            ok[j] = any(ok[i] and a.accepts(s[i:j]) for i in range(j))
        assert star.accepts(s) == ok[len(s)]


@given(pattern, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3)), st.lists(texts, max_size=4))
def test_repeat_counts_factors(p, lo, extra, strings):
    a = DFAS[p]
    hi = None if extra is None else lo + extra
    r = a.repeat(lo, hi)
    for s in strings + [x * k for x in a.examples(2) for k in range(5)]:
        # counts[j] = the set of k such that s[:j] is a concatenation of k members (k capped)
        cap = lo + 1 if hi is None else hi + 1
        counts: list[set[int]] = [{0}] + [set() for _ in s]
        for j in range(1, len(s) + 1):
            for i in range(j):
                if counts[i] and a.accepts(s[i:j]):
                    counts[j] |= {min(k + 1, cap) for k in counts[i]}
        eps = a.accepts("")  # empty factors pad any count upwards
        want = any((k >= lo or eps) and (hi is None or k <= hi) for k in counts[len(s)])
        assert r.accepts(s) == want, (p, lo, hi, s)


@given(pattern, st.integers(0, 4), st.one_of(st.none(), st.integers(0, 4)), st.lists(texts, max_size=6))
def test_length_between(p, lo, extra, strings):
    hi = None if extra is None else lo + extra
    a = DFAS[p]
    r = a.length_between(lo, hi)
    every = CodepointDFA.any_string().length_between(lo, hi)
    for s in strings + a.examples(5):
        n_ok = len(s) >= lo and (hi is None or len(s) <= hi)
        assert every.accepts(s) == n_ok
        assert r.accepts(s) == (n_ok and a.accepts(s))


def test_canonical_form_identifies_languages():
    pairs = [("(a|b)*", "(a*b*)*"), ("a(ba)*", "(ab)*a"), ("[ab]{2,3}", "[ab][ab][ab]?"), ("", "a{0}")]
    for p, q in pairs:
        x = compile_regex_dfa(p, flavor="python", mode="fullmatch")
        y = compile_regex_dfa(q, flavor="python", mode="fullmatch")
        assert x == y and x.key == y.key and hash(x) == hash(y)
        assert x.minimize() is x
    assert DFAS["a*"] != DFAS["(ab|b)*"]
    assert CodepointDFA.any_char().star() == CodepointDFA.any_string()
    assert CodepointDFA.any_string().is_universal()
    assert CodepointDFA.empty().complement().is_universal()
    assert CodepointDFA.any_string().complement().is_empty()
    assert CodepointDFA.empty().is_empty() and CodepointDFA.empty().size == 0
    assert CodepointDFA.epsilon().accepts("") and not CodepointDFA.epsilon().accepts("a")


@given(pattern)
def test_minimal_and_trim(p):
    a = DFAS[p]
    # a product with itself and a double complement give the same canonical table
    assert a.intersection(a) == a
    assert a.complement().complement() == a
    assert a.union(CodepointDFA.empty()) == a


def test_constructors():
    lit = CodepointDFA.literal("a😀")
    assert lit.accepts("a😀") and not lit.accepts("a") and lit.is_finite()
    assert lit.shortest_example() == "a😀"
    lits = CodepointDFA.literals(["", "ab", "b", "ab"])
    assert sorted(lits.examples(10)) == ["", "ab", "b"]
    iv = CodepointDFA.from_intervals([(0x61, 0x63), (0xD800, 0xDFFF), (0x1F600, 0x1F600)])
    assert set(iv.examples(10)) == {"a", "c", "😀"}  # interval ends and preferred characters
    assert all(iv.accepts(c) for c in "abc😀") and not iv.accepts("d")
    assert CodepointDFA.from_intervals([(0xD800, 0xDFFF)]).is_empty()  # not scalar values
    assert CodepointDFA.literal("\ud800").is_empty()
    assert not CodepointDFA.any_string().is_finite()


@given(pattern)
def test_examples_and_shortest_are_members(p):
    a = DFAS[p]
    ex = a.examples(8)
    assert all(in_lang(p, s) for s in ex)
    assert len(set(ex)) == len(ex)
    short = a.shortest_example()
    if a.is_empty():
        assert short is None
    else:
        assert short is not None and in_lang(p, short)
        assert all(len(short) <= len(s) for s in ex)


def test_is_finite():
    assert DFAS["[ab]{2,3}"].is_finite() and DFAS["a|é|😀"].is_finite() and DFAS[""].is_finite()
    assert not DFAS["a*"].is_finite() and not DFAS[".*中.*"].is_finite()


def test_limits_are_enforced():
    big = CodepointDFA.any_char().repeat(0, 50)
    with pytest.raises(LimitExceeded):
        big.intersection(CodepointDFA.any_string(), max_states=10)
    with pytest.raises(LimitExceeded):
        CodepointDFA.literal("ab").repeat(0, 100, max_states=50)


# -- UTF-8 -----------------------------------------------------------------------------------------
@given(pattern, st.lists(texts, max_size=5), st.lists(st.binary(max_size=8), max_size=5))
def test_to_utf8_accepts_exactly_the_encodings(p, strings, blobs):
    a = DFAS[p]
    if a.is_empty():
        return
    b = a.to_utf8()
    rng = random.Random(len(strings))
    cands = [s.encode() for s in strings + a.examples(4)]
    cands += blobs + [bytes(rng.randrange(256) for _ in range(rng.randint(0, 6))) for _ in range(5)]
    cands += [c[:-1] for c in cands if c] + [c + b"\x80" for c in cands]  # cut and broken encodings
    for data in cands:
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        assert b.accepts(data) == (text is not None and a.accepts(text)), (p, data)
    assert_trim(b)


def test_to_utf8_rejects_invalid_prefixes():
    b = CodepointDFA.any_string().to_utf8()
    for bad in (
        b"\xc0",
        b"\xc1",
        b"\xe0\x80",
        b"\xed\xa0",
        b"\xf0\x80",
        b"\xf4\x90",
        b"\xf5",
        b"\xff",
        b"\x80",
    ):
        state = b.start()
        for byte in bad:
            nxt = b.step(state, byte)
            if nxt is None:
                break
            state = nxt
        else:
            pytest.fail(f"prefix {bad!r} of no UTF-8 encoding was kept alive")


# -- JSON strings ------------------------------------------------------------------------------------
def json_string_oracle(data: bytes, a: CodepointDFA, unicode_escapes: bool) -> bool:
    """Is ``data`` exactly one JSON string literal (RFC 8259) whose value is a member?"""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return False
    try:
        value = json.loads(text, strict=True)
    except ValueError:
        return False
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")  # a lone surrogate escape does not encode
    except UnicodeEncodeError:
        return False
    if not unicode_escapes and re.search(r"(?<!\\)(?:\\\\)*\\u", text):
        return False
    return a.accepts(value)


def encode_mixed(s: str, rng: random.Random, unicode_escapes: bool = True) -> str:
    """A JSON literal of ``s`` with each character written in a random legal way."""
    short = {
        '"': '\\"',
        "\\": "\\\\",
        "/": "\\/",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
    }
    out = ['"']
    for ch in s:
        c = ord(ch)
        ways = []
        if c >= 0x20 and ch not in '"\\':
            ways.append(ch)
        if ch in short:
            ways.append(short[ch])
        if unicode_escapes:
            if c <= 0xFFFF:
                ways.append(f"\\u{c:04x}")
                ways.append(f"\\u{c:04X}")
            else:
                v = c - 0x10000
                hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
                ways.append(f"\\u{hi:04x}\\u{lo:04X}")
        out.append(rng.choice(ways) if ways else ch)
    out.append('"')
    return "".join(out)


def byte_mutations(data: bytes, rng: random.Random, n: int = 8) -> list[bytes]:
    pool = b'"\\/bfnrtuU0aAdD8\x1f\xc3\xa9\xed\xa0\x80'
    out = []
    for _ in range(n):
        i = rng.randint(0, len(data))
        op = rng.randrange(3)
        c = bytes([rng.choice(pool)])
        if op == 0:
            out.append(data[:i] + c + data[i:])
        elif op == 1 and data:
            out.append(data[: max(i - 1, 0)] + data[i:])
        elif data:
            j = min(i, len(data) - 1)
            out.append(data[:j] + c + data[j + 1 :])
    return out


@pytest.mark.parametrize("unicode_escapes", [True, False])
@given(pattern, st.lists(texts, max_size=5), st.randoms(use_true_random=False))
def test_to_json_string_agrees_with_json_loads(unicode_escapes, p, strings, rng):
    a = DFAS[p]
    if a.is_empty():
        return
    b = a.to_json_string(unicode_escapes=unicode_escapes)
    cands: list[bytes] = []
    for s in strings + a.examples(4):
        cands.append(json.dumps(s, ensure_ascii=False).encode())
        cands.append(json.dumps(s, ensure_ascii=True).encode())
        cands.append(encode_mixed(s, rng, unicode_escapes).encode())
        cands.append(encode_mixed(s, rng, True).encode())
    cands += [m for c in list(cands) for m in byte_mutations(c, rng, 3)]
    cands += [
        b'"\\ud800"',
        b'"\\udc00\\ud800"',
        b'"\\ud83d\\ude00"',
        b'"\\uD83D\\uDE00"',
        b'"\x7f\xe2\x80\xa8"',
    ]
    for data in cands:
        assert b.accepts(data) == json_string_oracle(data, a, unicode_escapes), (p, data, unicode_escapes)
    assert_trim(b)


def test_json_string_details():
    anything = CodepointDFA.any_string().to_json_string()
    assert anything.accepts(b'"\\ud83d\\ude00"') and anything.accepts(b'"\\uD83D\\uDe00"')
    assert not anything.accepts(b'"\\ud83d"') and not anything.accepts(b'"\\ude00"')  # lone surrogates
    assert not anything.accepts(b'"\\ude00\\ud83d"')
    assert anything.accepts(b'"\x7f"') and anything.accepts('"\u2028"'.encode())  # raw per RFC 8259
    assert not anything.accepts(b'"\x1f"') and anything.accepts(b'"\\u001F"')
    assert not anything.accepts(b'"\\x41"') and not anything.accepts(b'"\\U0041"')
    plain = CodepointDFA.any_string().to_json_string(unicode_escapes=False)
    assert plain.accepts(b'"\\n\\/"') and not plain.accepts(b'"\\u0041"')
    ctrl = CodepointDFA.literal("\x01").to_json_string(unicode_escapes=False)
    assert ctrl.num_states >= 1 and not ctrl.accepts(b'"\x01"')  # no way to write U+0001
    with pytest.raises(ValueError):
        CodepointDFA.empty().to_json_string()


def test_any_string_byte_views_are_small_and_fast():
    a = CodepointDFA.any_string()
    j = a.to_json_string()
    j2 = a.to_json_string(unicode_escapes=False)
    u = a.to_utf8()
    # Fast because the construction stays small: each view is built within a budget of the states it
    # may visit (max_states; LimitExceeded past it), the same bounds as the sizes below.
    tight = [
        a.to_json_string(max_states=40),
        a.to_json_string(unicode_escapes=False, max_states=20),
        a.to_utf8(max_states=10),
    ]
    assert [b.num_states for b in tight] == [j.num_states, j2.num_states, u.num_states]
    assert j.num_states <= 40 and j2.num_states <= 20 and u.num_states <= 10
    for b in (j, j2, u):
        assert_trim(b)


@given(pattern)
def test_byte_tables_are_those_of_bytedfa_build(p):
    """The byte DFAs skip ByteDFA.build's Moore pass; their tables must be what it would give."""
    a = DFAS[p]
    if a.is_empty():
        return
    for b in (a.to_utf8(), a.to_json_string(), a.to_json_string(unicode_escapes=False)):
        rebuilt = ByteDFA.build(b.transitions(), 0, b.finals)
        assert rebuilt.key == b.key and rebuilt.num_states == b.num_states


def test_conversions_are_memoized():
    a = compile_regex_dfa("[a-z]+@[a-z]+", flavor="python", mode="fullmatch")
    b = compile_regex_dfa("[a-z]+@[a-z]+", flavor="python", mode="fullmatch")
    assert a.to_json_string() is b.to_json_string()
    assert a.to_utf8() is b.to_utf8()


def test_byte_dfa_states_is_read_from_the_running_limits() -> None:
    dfa = CodepointDFA.from_intervals([(0x80, 0x10FFFF)])
    assert dfa.to_utf8().num_states > 3  # the default bound takes it
    with budget_scope(Limits(byte_dfa_states=3)), pytest.raises(LimitExceeded) as ei:
        dfa.to_utf8()
    assert ei.value.limit == "byte_dfa_states" and ei.value.bound == 3
    with budget_scope(Limits(byte_dfa_states=3)), pytest.raises(LimitExceeded) as ei:
        dfa.to_json_string()
    assert ei.value.limit == "byte_dfa_states"
