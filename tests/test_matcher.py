"""The per-sequence ``Matcher`` (docs/design.md §4 invariants 2, 3, 6–9): segmentations, EOS, rollback, forks,
rejections, speculation and jump-forward, checked against the grammar's own byte-level verdicts."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import refdecoder
from refdecoder._matcher import Accepted, Matcher, Rejected
from refdecoder._tokens import TERMINATED, TokenGrammar
from refdecoder.errors import StateError

try:
    from test_masks import (
        GRAMMAR_NAMES,
        VALID,
        VOCAB_NAMES,
        grammar,
        ideal_mask,
        ids_of,
        token_grammar,
        vocabularies,
    )
except ImportError:  # collected as a package (tests/__init__.py)
    from tests.test_masks import (
        GRAMMAR_NAMES,
        VALID,
        VOCAB_NAMES,
        grammar,
        ideal_mask,
        ids_of,
        token_grammar,
        vocabularies,
    )

try:
    from tokenizers_matrix import strategies as tms
except ImportError:  # pragma: no cover
    tms = None  # type: ignore[assignment]


# -- segmentations ----------------------------------------------------------------------------------


def _matches(tg: TokenGrammar, data: bytes, i: int) -> list[tuple[int, int]]:
    out = []
    node = -1
    k = i
    trie = tg.trie
    while k < len(data):
        node = trie.child(node, data[k])
        if node < 0:
            break
        k += 1
        out += [(int(t), k) for t in trie.tok_ids[trie.tok_lo[node] : trie.tok_hi[node]]]
    return out


def _reach(tg: TokenGrammar, data: bytes) -> list[bool]:
    reach = [False] * len(data) + [True]
    for i in range(len(data) - 1, -1, -1):
        reach[i] = any(reach[e] for _, e in _matches(tg, data, i))
    return reach


@st.composite
def own_segmentations(
    draw: st.DrawFn, tg: TokenGrammar, data: bytes, split_chars: bool = False
) -> tuple[int, ...]:
    """A random segmentation of ``data`` (for duck-typed vocabularies without strategies); with
    ``split_chars``, the shortest tokens are preferred so multi-byte characters get split."""
    reach = _reach(tg, data)
    ids, i = [], 0
    while i < len(data):
        options = [(t, e) for t, e in _matches(tg, data, i) if reach[e]]
        if split_chars:
            shortest = min(e for _, e in options)
            options = [(t, e) for t, e in options if e == shortest]
        t, i = draw(st.sampled_from(options))
        ids.append(t)
    return tuple(ids)


def segmentation_strategy(vname: str, tg: TokenGrammar, text: str, how: str) -> st.SearchStrategy[Any]:
    vocab = vocabularies()[vname]
    data = text.encode()
    if tms is None or not hasattr(vocab, "index"):
        return own_segmentations(tg, data, split_chars=how == "char-splitting")
    just = st.just(text)
    strategy = {
        "canonical": tms.canonical_encodings,
        "random": tms.segmentations,
        "noncanonical": tms.noncanonical_segmentations,
        "char-splitting": tms.char_splitting_segmentations,
    }[how]
    return strategy(vocab, just).map(lambda seg: seg.ids if seg.data == data else None)


def has_bit(mask: np.ndarray, token_id: int) -> bool:
    return bool((int(mask[token_id >> 5]) >> (token_id & 31)) & 1)


@functools.cache
def spellable(gname: str, vname: str) -> list[str]:
    """The sample strings of ``gname`` that the vocabulary can spell at all."""
    tg = token_grammar(gname, vname)
    return [t for t in VALID[gname] if _reach(tg, t.encode())[0]]


def walk_ids(m: Matcher, ids: Any) -> None:
    for t in ids:
        before = m.state
        assert has_bit(m.mask(), t), (t, m.token_grammar.token_bytes(t))
        out = m.accept(t)
        assert isinstance(out, Accepted), out
        assert m.token_grammar.advance(before, t) == m.state


@pytest.mark.parametrize("vname", VOCAB_NAMES)
@pytest.mark.parametrize("gname", GRAMMAR_NAMES)
@given(data=st.data())
def test_any_segmentation_of_a_valid_string_is_accepted(gname: str, vname: str, data: st.DataObject) -> None:
    tg = token_grammar(gname, vname)
    texts = spellable(gname, vname)
    if not texts:
        pytest.skip("the vocabulary cannot spell any of the sample strings")
    text = data.draw(st.sampled_from(texts), label="text")
    how = data.draw(st.sampled_from(["canonical", "random", "noncanonical", "char-splitting"]), label="how")
    ids = data.draw(segmentation_strategy(vname, tg, text, how), label="ids")
    if ids is None:  # the canonical encoding normalized the text: not a spelling of these bytes
        ids = data.draw(own_segmentations(tg, text.encode()), label="ids")
    m = Matcher(tg)
    walk_ids(m, ids)
    assert m.is_accepting() and m.num_accepted == len(ids)
    eos = tg.eos_ids[0]
    assert has_bit(m.mask(), eos)
    out = m.accept(eos)
    assert isinstance(out, Accepted) and out.terminated and out.token_bytes is None
    assert m.is_terminated() and not m.is_accepting() and m.state is TERMINATED
    assert not m.mask().any() and m.forced_tokens() == [] and m.forced_bytes() == b""
    again = m.accept(ids[0] if ids else eos)
    assert isinstance(again, Rejected) and m.is_terminated()
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()


# -- random walks through the masks ----------------------------------------------------------------


@st.composite
def walks(draw: st.DrawFn, tg: TokenGrammar, max_len: int = 12) -> list[int]:
    """Token ids drawn from the mask at each step (EOS excluded)."""
    s = tg.initial()
    out: list[int] = []
    for _ in range(draw(st.integers(0, max_len))):
        allowed = [t for t in tg.allowed_ids(s) if t not in tg.eos_ids]
        if not allowed:
            break
        t = draw(st.sampled_from(allowed))
        nxt = tg.advance(s, t)
        assert nxt is not None
        out.append(t)
        s = nxt
    return out


CASES = [(g, v) for g in ("jsonish", "ambiguous", "custom", "choice") for v in ("stub", VOCAB_NAMES[-1])]


@pytest.mark.parametrize(("gname", "vname"), CASES)
@given(data=st.data())
def test_rollback_then_reaccept_gives_identical_masks(gname: str, vname: str, data: st.DataObject) -> None:
    tg = token_grammar(gname, vname)
    ids = data.draw(walks(tg))
    m = Matcher(tg)
    states, masks = [m.state], [m.mask().copy()]
    for t in ids:
        assert isinstance(m.accept(t), Accepted)
        states.append(m.state)
        masks.append(m.mask().copy())
    k = data.draw(st.integers(0, len(ids)), label="k")
    m.rollback(k)
    n = len(ids) - k
    assert m.num_accepted == n and m.state == states[n] and m.accepted_ids() == ids[:n]
    assert np.array_equal(m.mask(), masks[n])
    fresh = Matcher(tg)
    walk_ids(fresh, ids[:n])
    assert fresh.state == m.state
    for j, t in enumerate(ids[n:], start=n + 1):
        assert isinstance(m.accept(t), Accepted)
        assert m.state == states[j] and np.array_equal(m.mask(), masks[j])
    with pytest.raises(StateError):
        m.rollback(len(ids) + 1)
    with pytest.raises(StateError):
        m.rollback(-1)
    m.reset()
    assert m.num_accepted == 0 and m.state == tg.initial()


@pytest.mark.parametrize(("gname", "vname"), CASES)
@given(data=st.data())
def test_forks_do_not_interact(gname: str, vname: str, data: st.DataObject) -> None:
    tg = token_grammar(gname, vname)
    ids = data.draw(walks(tg))
    m = Matcher(tg)
    walk_ids(m, ids[: len(ids) // 2])
    parent_state, parent_mask, parent_n = m.state, m.mask().copy(), m.num_accepted
    child = m.fork()
    assert child.state is m.state and child.num_accepted == m.num_accepted
    rest = ids[len(ids) // 2 :]
    walk_ids(child, rest)
    assert m.state is parent_state and m.num_accepted == parent_n
    assert np.array_equal(m.mask(), parent_mask)
    if child.num_accepted:
        child.rollback(child.num_accepted)  # back past the fork point
        assert m.state is parent_state and m.num_accepted == parent_n
    other = [t for t in m.allowed_ids() if t not in tg.eos_ids]
    if other:
        m.accept(data.draw(st.sampled_from(other)))
        child2 = Matcher(tg)
        walk_ids(child2, ids)
        assert child2.state == tg.grammar.advance(
            tg.initial(), b"".join(tg.token_bytes(t) or b"" for t in ids)
        )


@pytest.mark.parametrize(("gname", "vname"), CASES)
@given(data=st.data())
def test_accept_agrees_with_mask_and_rejections_change_nothing(
    gname: str, vname: str, data: st.DataObject
) -> None:
    tg = token_grammar(gname, vname)
    m = Matcher(tg)
    walk_ids(m, data.draw(walks(tg)))
    state, n, mask = m.state, m.num_accepted, m.mask().copy()
    allowed = ids_of(mask, tg.vocab_size)
    for t in range(-2, tg.vocab_size + 2):
        assert (tg.check(state, t)[0] is not None) == (t in allowed), t
    for t in data.draw(st.lists(st.integers(-1, tg.vocab_size), max_size=5), label="fork-tries"):
        out = m.fork().accept(t)
        assert isinstance(out, Accepted) == (t in allowed), (t, out)
    for t in data.draw(st.lists(st.integers(-1, tg.vocab_size), max_size=20), label="tries"):
        out = m.accept(t)
        if isinstance(out, Rejected):
            assert m.state is state and m.num_accepted == n and np.array_equal(m.mask(), mask)
            assert out.token_id == t and out.state_id == state.id and out.reason
            assert out.token_bytes == tg.token_bytes(t)
            assert str(t) in str(out)
            if out.byte_offset is not None:
                data_ = out.token_bytes or b""
                assert tg.grammar.advance(state, data_[: out.byte_offset]) is not None
                assert tg.grammar.advance(state, data_[: out.byte_offset + 1]) is None
        else:
            assert t in allowed
            m.rollback(1)


@pytest.mark.parametrize(("gname", "vname"), CASES)
@given(data=st.data())
def test_validate_equals_sequential_walk(gname: str, vname: str, data: st.DataObject) -> None:
    tg = token_grammar(gname, vname)
    ids = data.draw(walks(tg))
    cut = data.draw(st.integers(0, len(ids)), label="cut")
    noise = data.draw(st.lists(st.integers(0, tg.vocab_size - 1), max_size=4), label="noise")
    if data.draw(st.booleans(), label="eos"):
        noise = [tg.eos_ids[0], *noise]
    draft = ids[:cut] + noise + ids[cut:]
    start = data.draw(st.integers(0, cut), label="start")
    m = Matcher(tg)
    walk_ids(m, draft[:start])
    before_state, before_n = m.state, m.num_accepted
    got = m.validate(draft[start:])
    assert m.state is before_state and m.num_accepted == before_n
    seq = m.fork()
    expected = 0
    for t in draft[start:]:
        if not isinstance(seq.accept(t), Accepted):
            break
        expected += 1
    assert got == expected


FORCED_CASES = [(g, v) for g in ("choice", "ambiguous", "jsonish") for v in VOCAB_NAMES]


@pytest.mark.parametrize(("gname", "vname"), FORCED_CASES)
@given(data=st.data())
def test_forced_tokens_spell_a_prefix_of_forced_bytes(gname: str, vname: str, data: st.DataObject) -> None:
    tg = token_grammar(gname, vname)
    m = Matcher(tg)
    walk_ids(m, data.draw(walks(tg, max_len=3)))
    fb = m.forced_bytes()
    ft = m.forced_tokens()
    spelled = b"".join(tg.token_bytes(t) or b"" for t in ft)
    assert fb.startswith(spelled)
    if fb and all(tg.trie.child(-1, b) >= 0 for b in fb):
        assert spelled == fb  # every byte is a token: the greedy match spells all of it
    # Jump-forward soundness: every allowed token agrees with the forced bytes, EOS only if none.
    for t in m.allowed_ids():
        tb = tg.token_bytes(t)
        if tb is None:
            assert not fb
        else:
            assert tb.startswith(fb) or fb.startswith(tb)
    walk_ids(m.fork(), ft)


def test_forced_tokens_greedy_longest_match() -> None:
    tg = token_grammar("choice", "stub")
    m = Matcher(tg)
    walk_ids(m, [tg.trie.tok_ids[tg.trie.tok_lo[tg.trie.child(-1, ord("m"))]]])
    assert m.forced_bytes() == b"aybe"
    # "a" (twice in the stub: the smallest id is taken), then "y", "b", "e": no longer token fits.
    spelled = [tg.token_bytes(t) for t in m.forced_tokens()]
    assert spelled == [b"a", b"y", b"b", b"e"]
    assert m.forced_tokens()[0] == min(
        i for i, b in enumerate(vocabularies()["stub"].token_bytes) if b == b"a"
    )


def test_rejection_reasons() -> None:
    tg = token_grammar("choice", "stub")
    v = vocabularies()["stub"]
    m = Matcher(tg, tg.grammar.advance(tg.initial(), b"ma"))  # not accepting
    eos = tg.eos_ids[0]
    special = next(i for i in v.special_ids if i != eos)
    empty = v.token_bytes.index(b"")
    reasons = {}
    for t in (eos, special, empty, -5, len(v)):
        out = m.accept(t)
        assert isinstance(out, Rejected)
        reasons[t] = out.reason
    assert len(set(reasons.values())) == 4  # -5 and len(v) are both out of range
    m2 = Matcher(tg, tg.grammar.advance(tg.initial(), b"yes"))
    out = m2.accept(v.token_bytes.index(b"no"))
    assert isinstance(out, Rejected) and out.byte_offset == 0


# -- one stateful machine -------------------------------------------------------------------------


class MatcherMachine(RuleBasedStateMachine):
    """Accept / rollback / fork / validate on several matchers, each checked against a replay of its
    token list through the grammar's byte-level ``advance`` (docs/design.md §4.6–4.8)."""

    matchers = Bundle("matchers")

    def __init__(self) -> None:
        super().__init__()
        self.vname = VOCAB_NAMES[min(1, len(VOCAB_NAMES) - 1)]
        self.tg = token_grammar("jsonish", self.vname)
        self.model: dict[int, list[int]] = {}
        self.live: list[Matcher] = []

    def replay(self, ids: list[int]) -> Any:
        g = self.tg.grammar
        s = g.initial()
        for t in ids:
            if t in self.tg.eos_ids:
                return TERMINATED
            s = g.advance(s, self.tg.token_bytes(t) or b"")
            assert s is not None
        return s

    @initialize(target=matchers)
    def start(self) -> Matcher:
        m = Matcher(self.tg)
        self.model[id(m)] = []
        self.live.append(m)
        return m

    @rule(m=matchers, data=st.data())
    def accept_allowed(self, m: Matcher, data: st.DataObject) -> None:
        allowed = m.allowed_ids()
        if not allowed:
            return
        t = data.draw(st.sampled_from(allowed))
        assert isinstance(m.accept(t), Accepted)
        self.model[id(m)].append(t)

    @rule(m=matchers, t=st.integers(0, 200))
    def accept_any(self, m: Matcher, t: int) -> None:
        t = t % self.tg.vocab_size
        if isinstance(m.accept(t), Accepted):
            self.model[id(m)].append(t)

    @rule(m=matchers, k=st.integers(0, 4))
    def rollback(self, m: Matcher, k: int) -> None:
        ids = self.model[id(m)]
        if k > len(ids):
            with pytest.raises(StateError):
                m.rollback(k)
            return
        m.rollback(k)
        del ids[len(ids) - k :]

    @rule(target=matchers, m=matchers)
    def fork(self, m: Matcher) -> Matcher:
        child = m.fork()
        self.model[id(child)] = list(self.model[id(m)])
        self.live.append(child)
        return child

    @rule(m=matchers, data=st.data())
    def validate(self, m: Matcher, data: st.DataObject) -> None:
        draft = data.draw(st.lists(st.sampled_from(m.allowed_ids() or [0]) | st.integers(0, 100), max_size=4))
        n = m.validate(draft)
        ids = self.model[id(m)]
        s = self.replay(ids)
        expected = 0
        for t in draft:
            s = self.tg.advance(s, t)
            if s is None:
                break
            expected += 1
        assert n == expected

    @invariant()
    def every_matcher_equals_its_replay(self) -> None:
        for m in self.live:
            ids = self.model[id(m)]
            assert m.accepted_ids() == ids and m.num_accepted == len(ids)
            assert m.state == self.replay(ids)
        if self.live:
            m = self.live[-1]
            assert np.array_equal(m.mask(), ideal_mask("jsonish", self.vname, m.state))


TestMatcherMachine = MatcherMachine.TestCase
TestMatcherMachine.settings = settings(stateful_step_count=25)  # the loaded profile, shorter runs


def test_grammar_is_shared_not_copied() -> None:
    g = grammar("choice")
    tg = TokenGrammar(g, vocabularies()["stub"])
    a, b = Matcher(tg), Matcher(tg)
    assert a.token_grammar is b.token_grammar and tg.grammar is g


def test_states_are_immutable_values() -> None:
    """Forking is assignment: a state's fields cannot be set after it is made, and equal states hash
    alike (State.__init__ sets its fields past the guard, once)."""
    from refdecoder._parser import State

    g = refdecoder.compile(refdecoder.Regex("ab|ac"))
    s = g.advance(g.initial(), b"a")
    assert (
        s is not None and s == g.advance(g.initial(), b"a") and hash(s) == hash(g.advance(g.initial(), b"a"))
    )
    for name, value in (("stacks", frozenset()), ("accepting", True), ("_hash", 0), ("other", 1)):
        with pytest.raises(AttributeError):
            setattr(s, name, value)
    assert isinstance(s, State) and not s.accepting and len(s.stacks) >= 1
