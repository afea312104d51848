"""Token masks equal the per-token definition (docs/design.md §2 "Token masks", §4 invariants 1–3).

Every fast path of :class:`refdecoder._tokens.TokenGrammar` (trie walk, lexeme tables, mask cache,
interning resets) is compared with :meth:`TokenGrammar.mask_bruteforce` — ``grammar.advance`` token
by token — on states reached by random walks, for every vocabulary kind and several grammar kinds.

The grammar and vocabulary helpers here are shared with ``test_matcher.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refdecoder
from refdecoder._ir import Alt, GrammarBuilder
from refdecoder._lexeme import ByteDFA, utf8_sequences
from refdecoder._tokens import (
    TERMINATED,
    TokenGrammar,
    num_words,
    pack_ids,
    token_trie,
    unpack_mask,
)
from refdecoder.errors import StateError
from refdecoder.grammar import Grammar

try:
    import tokenizers_matrix as tm
except ImportError:  # pragma: no cover - the package ships with maskcert
    tm = None  # type: ignore[assignment]


# -- vocabularies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StubVocab:
    """A duck-typed vocabulary (no tokenizers_matrix): duplicates, an empty token, unusual specials."""

    token_bytes: tuple[bytes | None, ...]
    eos_ids: tuple[int, ...]
    special_ids: tuple[int, ...]
    name: str = "stub"

    def __len__(self) -> int:
        return len(self.token_bytes)


def stub_vocab() -> StubVocab:
    # fmt: off
    words = [
        "{", "}", "[", "]", ",", ":", '"', " ", "\n", "-", "0", "1", "2", "7", "12", "100", "1000",
        "a", "b", "c", "x", "y", "e", "s", "n", "o", "t", "r", "u", "l", "m", "!", "\\",
        '{"', '":', '",', '"}', '":"', '"]', "[[", "]]", "],", ", ", ": ", ' "', "[1", "1,", "0]",
        "yes", "ye", "no", "yes!", "maybe", "may", "true", "null", "tr", "ue", "nu", "ll",
        "ab", "abc", "bd", "cx", "é", "日本", "日", "本", "\u00e9a", "é\"",
    ]
    # fmt: on
    table: list[bytes | None] = [w.encode() for w in words]
    # UTF-8 pieces (split characters) and a byte-fallback style duplicate of "a".
    table += [b"\xc3", b"\xa9", b"\xe6", b"\x97\xa5", b"\xe6\x97", b"\xa5", b"a"]
    table += [b""]  # a text id with empty bytes: never allowed
    specials = [len(table), len(table) + 1, len(table) + 2]
    table += [None, None, None]  # <s>, </s>, <pad>
    return StubVocab(tuple(table), eos_ids=(specials[1],), special_ids=tuple(specials))


@functools.cache
def vocabularies() -> dict[str, Any]:
    """Name -> vocabulary: the tokenizers_matrix CI matrix when it exists, else its builders."""
    out: dict[str, Any] = {"stub": stub_vocab()}
    if tm is None:
        return out
    matrix = getattr(tm, "matrix", None)
    found: list[Any] = []
    if matrix is not None:
        got = matrix("ci")
        found = list(got.values()) if isinstance(got, dict) else list(got)
    else:
        found = [tm.byte_vocabulary()]
        builders: list[Callable[[], Any]] = [
            lambda: tm.train_bpe(),
            lambda: tm.train_sentencepiece("bpe", byte_fallback=True),
            lambda: tm.train_sentencepiece("bpe", byte_fallback=False),
            lambda: tm.train_sentencepiece("unigram", byte_fallback=False),
        ]
        for build in builders:
            try:
                found.append(build())
            except Exception as e:  # noqa: BLE001 - a missing trainer only narrows the matrix
                print(f"skipping a vocabulary builder: {e!r}")
    for v in found:
        if len(v) > 40_000:  # the brute-force oracle is per token: keep CI vocabularies small
            continue
        out[f"{v.kind}:{getattr(v, 'name', '')}"] = v
    return out


VOCAB_NAMES = list(vocabularies())


# -- grammars ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandBuilt:
    """A label for grammars built directly with the IR (``Grammar`` wants a spec for its fingerprint)."""

    name: str

    def canonical(self) -> str:
        return "hand-built:" + self.name


def json_string_dfa() -> ByteDFA:
    """``"(char | \\["\\\\/bfnrt])*"`` with char any scalar >= U+0020 but ``"`` and ``\\``, over UTF-8."""
    trans: dict[int, dict[int, int]] = {0: {0x22: 1}, 1: {0x22: 2, 0x5C: 3}, 2: {}, 3: {}}
    for c in b'"\\/bfnrt':
        trans[3][c] = 1
    mids: dict[Hashable, int] = {}
    for seq in utf8_sequences(0x20, 0x10FFFF):
        cur = 1
        for k, (lo, hi) in enumerate(seq):
            if k == len(seq) - 1:
                tgt = 1
            else:
                key = tuple(seq[k + 1 :])
                if key not in mids:
                    mids[key] = len(trans)
                    trans[len(trans)] = {}
                tgt = mids[key]
            for b in range(lo, hi + 1):
                if not (len(seq) == 1 and b in (0x22, 0x5C)):
                    trans[cur][b] = tgt
            cur = tgt
    return ByteDFA.build(trans, 0, [2])


def number_dfa() -> ByteDFA:
    """``-?(0|[1-9][0-9]*)``."""
    t: dict[int, dict[int, int]] = {0: {0x2D: 1}, 1: {}, 2: {}, 3: {}}
    for s in (0, 1):
        t[s][0x30] = 2
        for d in range(0x31, 0x3A):
            t[s][d] = 3
    for d in range(0x30, 0x3A):
        t[3][d] = 3
    return ByteDFA.build(t, 0, [2, 3])


def jsonish_grammar() -> Grammar:
    """JSON-like values: recursive objects and lists, strings, numbers, literals, optional ws.

    Whitespace is a repetition of a one-byte lexeme, so after a value the state holds several
    stacks (more ws, a comma, a closing bracket) — recursion and multi-stack states.
    """
    b = GrammarBuilder()
    value = b.reserve()
    ws = b.repeat(b.lex(ByteDFA.byte_set(b" \n")), 0, None)

    def lit(s: bytes) -> int:
        return b.lex(ByteDFA.literal(s))

    string = b.lex(json_string_dfa())
    pair = b.seq([string, ws, lit(b":"), ws, value])

    def container(open_: bytes, item: int, close: bytes) -> int:
        more = b.repeat(b.seq([ws, lit(b","), ws, item]), 0, None)
        return b.seq([lit(open_), ws, b.repeat(b.seq([item, more, ws]), 0, 1), lit(close)])

    options = (
        container(b"{", pair, b"}"),
        container(b"[", value, b"]"),
        string,
        b.lex(number_dfa()),
        lit(b"true"),
        lit(b"null"),
    )
    b.define(value, Alt(options))
    return Grammar(b.finish(value), HandBuilt("jsonish"))  # type: ignore[arg-type]


def ambiguous_grammar() -> Grammar:
    """Alternatives that share prefixes across different lexemes: ``ab c | a bd | N x | N.? y``."""
    b = GrammarBuilder()

    def lit(s: bytes) -> int:
        return b.lex(ByteDFA.literal(s))

    num = b.lex(number_dfa())
    dotted = b.lex(ByteDFA.build({0: {0x31: 1, 0x32: 1}, 1: {0x31: 1, 0x32: 1, 0x2E: 2}}, 0, [1, 2]))
    root = b.alt(
        [
            b.seq([lit(b"ab"), lit(b"c")]),
            b.seq([lit(b"a"), lit(b"bd")]),
            b.seq([num, lit(b"x")]),
            b.seq([dotted, lit(b"y")]),
            b.repeat(lit(b"ye"), 1, 3),
        ]
    )
    return Grammar(b.finish(root), HandBuilt("ambiguous"))  # type: ignore[arg-type]


@dataclass(frozen=True)
class BoundedInt:
    """A lexeme that is not a ByteDFA: decimal integers 0..``bound`` without leading zeros.

    States are ints: ``-1`` before the first digit, else the value read. It exercises the trie-walk
    fallback (lexeme tables only cover ByteDFA tops).
    """

    bound: int

    @property
    def key(self) -> Hashable:
        return ("bounded-int", self.bound)

    def start(self) -> int:
        return -1

    def step(self, state: Hashable, byte: int) -> int | None:
        assert isinstance(state, int)
        if not 0x30 <= byte <= 0x39 or state == 0:
            return None
        nxt = byte - 0x30 if state < 0 else state * 10 + byte - 0x30
        return nxt if nxt <= self.bound else None

    def is_final(self, state: Hashable) -> bool:
        return isinstance(state, int) and state >= 0

    def can_continue(self, state: Hashable) -> bool:
        assert isinstance(state, int)
        return state < 0 or (state != 0 and state * 10 <= self.bound)


def custom_lexeme_grammar() -> Grammar:
    """``[`` int (``,`` int)* ``]`` with ints <= 1000 (a custom lexeme) and a ByteDFA number mixed in."""
    b = GrammarBuilder()

    def lit(s: bytes) -> int:
        return b.lex(ByteDFA.literal(s))

    item = b.alt([b.lex(BoundedInt(1000)), b.seq([lit(b"-"), b.lex(number_dfa())])])
    root = b.seq([lit(b"["), item, b.repeat(b.seq([lit(b","), item]), 0, None), lit(b"]")])
    return Grammar(b.finish(root), HandBuilt("custom"))  # type: ignore[arg-type]


CHOICE_OPTIONS = ["yes", "no", "yes!", "maybe", "y", "é日本", "", "[1,2]", 'say "hi"', "null"]


def _front_end(factory: Callable[[], Grammar]) -> Callable[[], Grammar]:
    """Front-ends being written elsewhere: skip (with the reason) when not importable yet."""

    def build() -> Grammar:
        try:
            return factory()
        except (ImportError, NotImplementedError) as e:
            pytest.skip(f"front-end not available: {e!r}")

    return build


GRAMMARS: dict[str, Callable[[], Grammar]] = {
    "choice": lambda: refdecoder.compile_choice(CHOICE_OPTIONS),
    "jsonish": jsonish_grammar,
    "ambiguous": ambiguous_grammar,
    "custom": custom_lexeme_grammar,
    "regex": _front_end(lambda: refdecoder.compile_regex(r"(ab|a[0-9]{1,3}|é+)-?[xy]*")),
    "json-schema": _front_end(
        lambda: refdecoder.compile_json_schema(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
                "required": ["a"],
                "additionalProperties": False,
            }
        )
    ),
    "gbnf": _front_end(
        lambda: refdecoder.compile_gbnf('root ::= "[" item ("," item)* "]"\nitem ::= [a-c]+ | root\n')
    ),
    # numbers under bounds: a lexeme that is no byte table (``NumberLexeme.token_tables``)
    "numbers": _front_end(
        lambda: refdecoder.compile_json_schema(
            {
                "type": "array",
                "items": {
                    "anyOf": [{"type": "integer", "minimum": -5, "maximum": 120}, {"multipleOf": 0.25}]
                },
            },
            whitespace="none",
        )
    ),
}

# Strings in each language (for segmentation walks in test_matcher).
VALID: dict[str, list[str]] = {
    "choice": CHOICE_OPTIONS,
    "jsonish": [
        '{"a": [1, -20, {"b": null}], "é日": "x\\"y", "c": true}',
        '[[], {}, [[0]], ""]',
        '{\n "key" : "valué 日本",\n "n": [1,2 , 3]\n}',
        "-1234",
    ],
    "ambiguous": ["abc", "abd", "12x", "12.y", "1y", "yeye", "0x"],
    "custom": ["[1,2,1000]", "[0,-0,-123456]", "[999]"],
    "regex": ["ab", "a12-x", "ééé-yx", "ab-"],
    "json-schema": ['{"a": "x"}', '{"b": [1, 2], "a": ""}'],
    "gbnf": ["[a]", "[abc,[b,c]]"],
    "numbers": ["[1,-5,120,0.25]", "[7.5e1,-0.75,100]", "[]"],
}


@functools.cache
def grammar(name: str) -> Grammar:
    return GRAMMARS[name]()


@functools.cache
def token_grammar(gname: str, vname: str, variant: str = "fast") -> TokenGrammar:
    """Shared across examples so that caches warm up (the ``cold`` variants never cache)."""
    options: dict[str, dict[str, Any]] = {
        "fast": {},
        "walk": {"lexeme_tables": False, "cache_bytes": 0},
        "tables": {"cache_bytes": 0},
        "tiny": {"cache_bytes": 2_000, "max_interned_states": 8},
    }
    return TokenGrammar(grammar(gname), vocabularies()[vname], **options[variant])


VARIANTS = ("fast", "walk", "tables", "tiny")


@functools.lru_cache(maxsize=20_000)
def ideal_mask(gname: str, vname: str, state: Any) -> np.ndarray:
    """The definition (``mask_bruteforce``), remembered per state: examples revisit early states."""
    return token_grammar(gname, vname, "fast").mask_bruteforce(state)


def ids_of(mask: np.ndarray, vocab_size: int) -> set[int]:
    return {int(i) for i in unpack_mask(mask, vocab_size)}


def describe_diff(tg: TokenGrammar, got: np.ndarray, want: np.ndarray) -> str:
    g, w = ids_of(got, tg.vocab_size), ids_of(want, tg.vocab_size)
    tb = tg.token_bytes
    extra = [(t, tb(t)) for t in sorted(g - w)[:5]]
    missing = [(t, tb(t)) for t in sorted(w - g)[:5]]
    return f"allowed but not ideal: {extra}\nideal but not allowed: {missing}"


# -- the property ----------------------------------------------------------------------------------


GRAMMAR_NAMES = list(GRAMMARS)


@pytest.mark.parametrize("vname", VOCAB_NAMES)
@pytest.mark.parametrize("gname", GRAMMAR_NAMES)
@given(data=st.data())
def test_mask_equals_definition_on_random_walks(gname: str, vname: str, data: st.DataObject) -> None:
    oracle = token_grammar(gname, vname, "fast")
    tgs = [token_grammar(gname, vname, v) for v in VARIANTS]
    state = oracle.initial()
    for _step in range(8):
        want = ideal_mask(gname, vname, state)
        for tg in tgs:
            got = tg.mask(state)
            assert got.dtype == np.int32 and got.shape == (num_words(tg.vocab_size),)
            assert np.array_equal(got, want), f"{tg.stats()}\n" + describe_diff(tg, got, want)
        allowed = ids_of(want, oracle.vocab_size)
        eos = set(oracle.eos_ids)
        assert (eos <= allowed) == state.accepting and (eos & allowed == set() or state.accepting)
        assert not allowed & set(oracle.trie.special_ids - eos)
        assert oracle.allowed_ids(state) == sorted(allowed)
        text = sorted(allowed - eos)
        if not text:
            break
        token = data.draw(st.sampled_from(text), label="token")
        nxt = tgs[data.draw(st.integers(0, len(tgs) - 1), label="variant")].advance(state, token)
        assert nxt is not None and nxt == oracle.grammar.advance(state, oracle.token_bytes(token) or b"")
        state = nxt


def test_mask_after_eos_is_empty() -> None:
    tg = token_grammar("choice", "stub")
    s = tg.grammar.advance(tg.initial(), b"yes")
    assert s is not None and s.accepting
    eos = tg.eos_ids[0]
    assert eos in tg.allowed_ids(s)
    done = tg.advance(s, eos)
    assert done is TERMINATED
    assert not tg.mask(done).any() and tg.allowed_ids(done) == []
    assert tg.advance(done, eos) is None
    not_accepting = tg.grammar.advance(tg.initial(), b"ma")
    assert not_accepting is not None and tg.advance(not_accepting, eos) is None


def test_never_special_or_empty() -> None:
    v = stub_vocab()
    tg = TokenGrammar(refdecoder.compile_choice([""]), v)  # accepting, nothing else
    assert tg.allowed_ids(tg.initial()) == list(v.eos_ids)
    tg = TokenGrammar(jsonish_grammar(), v)
    allowed = set(tg.allowed_ids(tg.initial()))
    empty = [i for i, b in enumerate(v.token_bytes) if b == b""]
    assert empty and not allowed & set(empty)
    assert not allowed & set(v.special_ids)
    reasons = {tg.check(tg.initial(), t)[1] for t in [*empty, v.special_ids[0], len(v), -1]}
    assert len(reasons) == 3


# -- layout ------------------------------------------------------------------------------------------


def test_bit_layout_is_xgrammars() -> None:
    """Bit ``i % 32`` of word ``i // 32`` (little-endian bit order; bit 31 is the sign bit)."""
    table: list[bytes | None] = [bytes([b]) for b in range(70)] + [None]
    v = StubVocab(tuple(table), eos_ids=(70,), special_ids=(70,))
    for allowed, word, value in [(0, 0, 1), (31, 0, -(2**31)), (32, 1, 1), (33, 1, 2), (69, 2, 1 << 5)]:
        tg = TokenGrammar(refdecoder.compile_choice([chr(allowed)]), v)
        m = tg.mask(tg.initial())
        assert m.shape == (3,) and m.dtype == np.int32
        assert int(m[word]) == value and np.count_nonzero(m) == 1
        assert tg.allowed_ids(tg.initial()) == [allowed]
    # EOS at id 70: word 2, bit 6.
    tg = TokenGrammar(refdecoder.compile_choice([""]), v)
    assert tg.mask(tg.initial()).tolist() == [0, 0, 1 << 6]


@given(st.lists(st.integers(0, 99), unique=True))
def test_pack_unpack_roundtrip(ids: list[int]) -> None:
    m = pack_ids(ids, 100)
    assert m.shape == (4,)
    assert unpack_mask(m, 100).tolist() == sorted(ids)
    expected = np.zeros(4, dtype=np.int64)
    for i in ids:
        expected[i // 32] |= 1 << (i % 32)
    assert m.tolist() == [int(x) - (1 << 32) if x >= 1 << 31 else int(x) for x in expected]


def test_masks_are_read_only() -> None:
    tg = token_grammar("choice", "stub")
    m = tg.mask(tg.initial())
    with pytest.raises(ValueError):
        m[0] = 0


# -- batches -----------------------------------------------------------------------------------------


def _some_states(tg: TokenGrammar) -> list[Any]:
    g = tg.grammar
    out = [g.initial()]
    for prefix in (b"{", b'{"a', b'{"a": [1', b"[1, 2]", b"-"):
        s = g.advance(g.initial(), prefix)
        assert s is not None
        out.append(s)
    return [*out, TERMINATED]


def test_fill_batch_equals_stacked_masks() -> None:
    tg = token_grammar("jsonish", "stub")
    states = _some_states(tg)
    out = np.full((len(states) + 1, tg.num_words), 7, dtype=np.int32)
    tg.fill_batch(states, out)
    assert np.array_equal(out[: len(states)], np.stack([tg.mask(s) for s in states]))
    assert (out[len(states)] == 7).all()  # rows beyond the batch are left alone
    with pytest.raises(StateError):
        tg.fill_batch(states, np.zeros((len(states), tg.num_words + 1), dtype=np.int32))
    with pytest.raises(StateError):
        tg.fill_batch(states, np.zeros((len(states), tg.num_words), dtype=np.int64))


def test_fill_batch_torch() -> None:
    torch = pytest.importorskip("torch")
    tg = token_grammar("jsonish", "stub")
    states = _some_states(tg)
    out = torch.zeros((len(states), tg.num_words), dtype=torch.int32)
    tg.fill_batch(states, out)
    assert np.array_equal(out.numpy(), np.stack([tg.mask(s) for s in states]))


# -- caches and sharing ------------------------------------------------------------------------------


def test_trie_is_shared_per_vocabulary_and_never_across() -> None:
    v1 = stub_vocab()
    v2 = StubVocab(v1.token_bytes[:-4] + (b"zz", None, None, None), v1.eos_ids, v1.special_ids)
    assert token_trie(v1) is token_trie(StubVocab(v1.token_bytes, v1.eos_ids, v1.special_ids))
    assert token_trie(v1) is not token_trie(v2)
    g = refdecoder.compile_choice(["zz", "a"])
    m1 = TokenGrammar(g, v1).allowed_ids(g.initial())
    m2 = TokenGrammar(g, v2).allowed_ids(g.initial())
    zz = len(v2.token_bytes) - 4
    assert zz in m2 and zz not in m1


def test_lexeme_tables_are_shared_between_grammars() -> None:
    v = stub_vocab()
    a, b = TokenGrammar(jsonish_grammar(), v), TokenGrammar(jsonish_grammar(), v)
    sa = a.grammar.advance(a.initial(), b'["x')
    sb = b.grammar.advance(b.initial(), b'["x')
    assert sa is not None and sb is not None
    a.mask(sa)
    before = b.stats()["lexeme_table_misses"]
    assert np.array_equal(b.mask(sb), a.mask(sa))
    assert b.stats()["lexeme_table_misses"] == before


def test_stats_report_cache_use() -> None:
    tg = TokenGrammar(jsonish_grammar(), stub_vocab(), cache_bytes=10_000)
    s = tg.initial()
    tg.mask(s)
    tg.mask(s)
    st_ = tg.stats()
    assert st_["hits"] == 1 and st_["misses"] == 1 and 0 < st_["cache_bytes"] <= 10_000
    assert json.dumps(st_)


def test_no_text_tokens() -> None:
    v = StubVocab((None, None), eos_ids=(0,), special_ids=(0, 1))
    tg = TokenGrammar(refdecoder.compile_choice(["", "a"]), v)
    assert tg.allowed_ids(tg.initial()) == [0]
    assert tg.forced_tokens(tg.initial()) == []


# -- lexeme tables of byte DFAs ----------------------------------------------------------------------

# Bytes the test vocabularies use: letters, digits, JSON punctuation, space, and UTF-8 lead and
# continuation bytes, so random DFAs read whole tokens, die inside them and pass final states.
_DFA_BYTES = sorted(set(b'abcdeilnorstuxy0127{}[]",:\\ \n!-.') | {0xC3, 0xA9, 0xE6, 0x97, 0xA5})
_dfa_rows = st.lists(
    st.tuples(st.integers(0, len(_DFA_BYTES) - 1), st.integers(0, len(_DFA_BYTES) - 1), st.integers(0, 5)),
    max_size=4,
)


@st.composite
def byte_dfas(draw: st.DrawFn) -> tuple[ByteDFA, int]:
    """A random trim DFA over :data:`_DFA_BYTES` (each state reads a few byte ranges; some read almost
    every byte, so the trie walk meets wide and narrow levels) and one of its states."""
    n = draw(st.integers(1, 6))
    trans: dict[int, dict[int, int]] = {}
    for s in range(n):
        row: dict[int, int] = {}
        for lo, hi, t in draw(_dfa_rows):
            for b in _DFA_BYTES[min(lo, hi) : max(lo, hi) + 1]:
                row[b] = t % n
        trans[s] = row
    finals = draw(st.sets(st.integers(0, n - 1), min_size=1))
    if ByteDFA.is_empty_language(trans, 0, finals):
        trans[0][_DFA_BYTES[0]] = min(finals)  # a way to a final state from the start
    dfa = ByteDFA.build(trans, 0, finals)
    return dfa, draw(st.integers(0, dfa.num_states - 1))


@settings(max_examples=150)  # cheap examples; a final state passed mid-token is not a common draw
@given(
    dfa_q=byte_dfas(),
    second=byte_dfas(),
    which=st.sampled_from(VOCAB_NAMES),
    few_nodes=st.sampled_from([0, 40, 10**9]),
    share=st.booleans(),
    other=st.integers(0, 5),
)
def test_dfa_tables_are_the_walks(
    dfa_q: tuple[ByteDFA, int],
    second: tuple[ByteDFA, int],
    which: str,
    few_nodes: int,
    share: bool,
    other: int,
) -> None:
    """``_LexemeTables._build`` runs the trie through a DFA level by level, each level dense or sparse,
    and finishes few live subtrees by a walk over codes (never with ``few_nodes=0``, as soon as at
    most 64 nodes are live with ``10**9``); with ``share`` a later table reuses the subtrees below
    the first levels an earlier one ran from a state of the same language: a second state of the same DFA,
    then a state of another DFA (random DFAs share small languages, e.g. a final state with no
    transitions). The plain preorder walk of the whole trie through the same DFA
    (``_build_lexeme_walk``) is the definition: the same accepted tokens, uncertain intervals and
    count, for all three."""
    first, q = dfa_q
    tables = token_trie(vocabularies()[which]).lexeme_tables
    tables.clear()
    for dfa, state in ((first, q), (first, other % first.num_states), second):
        fast, slow = tables._build(dfa, state, few_nodes, share), tables._build_lexeme_walk(dfa, state)
        assert fast.accepted.tobytes() == slow.accepted.tobytes()
        assert fast.uncertain == slow.uncertain
        assert fast.num_uncertain == slow.num_uncertain


_WORD_LETTERS = b"abcdeilmnorstuy"


@st.composite
def word_dfas(draw: st.DrawFn) -> ByteDFA:
    """A random key DFA: words over some letters, then '"'; a few known words are a prefix tree of their
    own states, and any other word reads the "rest of a word" state. Known prefixes may be final (a
    passed bit below them) and may refuse a letter (a death below them), so the levels below a known
    letter hold the shared state with either passed bit, as object keys do."""
    letters = draw(st.lists(st.sampled_from(list(_WORD_LETTERS)), min_size=5, unique=True))
    words = draw(st.lists(st.lists(st.sampled_from(letters), min_size=1, max_size=3), max_size=4))
    prefixes = sorted({bytes(w[:i]) for w in words for i in range(1, len(w) + 1)})
    state = {b"": 0, **{p: i + 1 for i, p in enumerate(prefixes)}}
    rest, end = len(state), len(state) + 1
    trans: dict[int, dict[int, int]] = {rest: {**dict.fromkeys(letters, rest), ord('"'): end}}
    finals = [end]
    for prefix, s in state.items():
        row = {**dict.fromkeys(letters, rest), ord('"'): end}
        for b in letters:
            if prefix + bytes([b]) in state:
                row[b] = state[prefix + bytes([b])]
        if prefix and draw(st.booleans()):
            del row[draw(st.sampled_from(letters))]
        if prefix and draw(st.booleans()):
            finals.append(s)
        trans[s] = row
    return ByteDFA.build(trans, 0, finals)


@settings(max_examples=60)
@given(dfas=st.lists(word_dfas(), min_size=2, max_size=4), which=st.sampled_from(VOCAB_NAMES))
def test_key_dfa_tables_shared_below_the_first_level_are_the_walks(dfas: list[ByteDFA], which: str) -> None:
    """Tables of key DFAs built one after another share the subtrees below the levels' "rest of a
    word" nodes (at depths 1 to ``share_depth``, by language and passed bit): each is the walk."""
    tables = token_trie(vocabularies()[which]).lexeme_tables
    tables.clear()
    for dfa in dfas:
        fast, slow = tables._build(dfa, 0, few_nodes=0), tables._build_lexeme_walk(dfa, 0)
        assert fast.accepted.tobytes() == slow.accepted.tobytes()
        assert fast.uncertain == slow.uncertain
        assert fast.num_uncertain == slow.num_uncertain


def test_dfa_tables_share_subtrees_across_dfas_of_one_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two key DFAs that admit unknown keys read the same "rest of any string" language after most
    first bytes, and after every second byte but their known key's: the second one's first table
    reuses every subtree the first ran from that language (at depths 1 and 2), and both are the
    walks."""
    trie = token_trie(vocabularies()["byte-level-bpe:bpe"])
    tables = trie.lexeme_tables
    tables.clear()
    letters = [b for b in _DFA_BYTES if b not in b'"\\']

    def key_dfa(known: bytes) -> ByteDFA:
        # '"' (known | letters not starting with known + a letter) '"': state 1 is after the quote.
        trans: dict[int, dict[int, int]] = {0: {ord('"'): 1}, 90: dict.fromkeys(letters, 90)}
        trans[90][ord('"')] = 99
        for i, b in enumerate(known):
            here = 1 if i == 0 else 1 + i
            trans[here] = {**dict.fromkeys(letters, 90), b: 2 + i, ord('"'): 99}
        trans[1 + len(known)] = {ord('"'): 99}  # the known key ends here
        return ByteDFA.build(trans, 0, [99])

    first, second = key_dfa(b"no"), key_dfa(b"ab")
    read: list[set[int]] = []  # per build: the nodes its level run read
    levels = tables._levels

    def recording(*args: Any) -> tuple[np.ndarray, np.ndarray]:
        alive_at, roots = levels(*args)
        read.append(set(np.flatnonzero(alive_at[trie.level_pos]).tolist()))
        return alive_at, roots

    monkeypatch.setattr(tables, "_levels", recording)
    for dfa in (first, second):
        q = dfa.step(0, ord('"'))
        assert q is not None
        fast = tables._build(dfa, q, few_nodes=0)
        slow = tables._build_lexeme_walk(dfa, q)
        assert (fast.accepted.tobytes(), fast.uncertain) == (slow.accepted.tobytes(), slow.uncertain)

    def subtree(path: bytes) -> set[int]:
        node = -1
        for b in path:
            node = trie.child(node, b)
            assert node >= 0, path
        return set(range(node, trie.skip_l[node]))

    # Below the first level, the second table runs only 'a' (its known key's letter: the first DFA
    # ran it as an entry of its own, whose children it did not keep apart), the children of 'n' (read,
    # then pruned: the first DFA ran them from the rest of any string, below its known letter) but
    # 'no' (the first DFA's known key), and '"' (one byte leads to the final state).
    children_n = {c for c in subtree(b"n") if trie.depth_l[c] == 2 and trie.label_l[c] in letters}
    allowed = subtree(b"a") | subtree(b"no") | subtree(b'"') | children_n | set(trie.by_depth[1].tolist())
    assert read[1] <= allowed
    assert children_n <= read[1]
    assert len(read[0]) > 5 * len(read[1] - set(trie.by_depth[1].tolist()))


def test_dfa_tables_share_subtrees_by_passed_bit() -> None:
    """Below 'e', both DFAs read the same "rest of a word" language (letters a-m but i), but the first passed a final
    state on 'e' (a token dying later is uncertain: the parser may go on after "e") and the second did
    not (it is rejected): the second table must not reuse the first's subtrees there."""
    trie = token_trie(vocabularies()["byte-level-bpe:bpe"])
    tables = trie.lexeme_tables
    tables.clear()
    letters = [b for b in range(ord("a"), ord("m") + 1) if b != ord("i")]  # "email" dies on 'i'

    def word_dfa(e_final: bool) -> ByteDFA:
        # 'e' leads to state 1 (final or not), any other letter to 2; then letters, then '"'.
        trans = {0: {**dict.fromkeys(letters, 2), ord("e"): 1}, 1: dict.fromkeys(letters, 2)}
        trans[2] = {**dict.fromkeys(letters, 2), ord('"'): 3}
        return ByteDFA.build(trans, 0, [1, 3] if e_final else [3])

    for dfa in (word_dfa(True), word_dfa(False)):
        fast, slow = tables._build(dfa, 0, few_nodes=0), tables._build_lexeme_walk(dfa, 0)
        assert (fast.accepted.tobytes(), fast.uncertain) == (slow.accepted.tobytes(), slow.uncertain)
        assert fast.num_uncertain == slow.num_uncertain
    assert any(key[1] == 1 and key[2] == 2 for key in tables._memos)  # the first kept them apart


@settings(max_examples=80)
@given(dfa_q=byte_dfas(), cap=st.integers(1, 8))
def test_residual_key_is_the_key_of_the_dfa_built_from_the_state(
    dfa_q: tuple[ByteDFA, int], cap: int
) -> None:
    """``ByteDFA.residual_key`` names the language read from a state by the key of the ByteDFA
    :meth:`ByteDFA.build` gives from that state, or None past ``cap`` reachable states."""
    dfa, q = dfa_q
    built = ByteDFA.build(dfa.transitions(), q, dfa.finals)
    got = dfa.residual_key(q, cap)
    assert got == (built.key if built.num_states <= cap else None)


@settings(max_examples=60)
@given(which=st.sampled_from(VOCAB_NAMES), data=st.data())
def test_ids_at_is_the_definition(which: str, data: st.DataObject) -> None:
    """``TokenTrie.ids_at`` gathers the token runs of few nodes and marks many over the whole trie;
    both are the definition: every token whose node is among ``nodes`` (repeats included), in token
    order. Lists of up to 400 nodes take both paths on the test tries (85 to 4,000 nodes)."""
    trie = token_trie(vocabularies()[which])
    nodes = data.draw(st.lists(st.integers(0, trie.num_nodes - 1), max_size=400))
    wanted = set(nodes)
    expected = [int(t) for t, n in zip(trie.tok_ids, trie.tok_node, strict=True) if int(n) in wanted]
    assert trie.ids_at(nodes).tolist() == expected
    assert trie.ids_at(np.asarray(nodes, dtype=np.int64)).dtype == np.int64
