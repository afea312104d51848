"""Token budgets: finish within ``max_new_tokens``, exactly (docs/design.md §2 "Token budgets").

Theory of operation
-------------------
``dist(s)``, the *token distance* of a matcher state ``s``, is the fewest tokens of this vocabulary (EOS
included) that take ``s`` to the end of the sequence:

    dist(TERMINATED) = 0,    dist(s) = 1 if s is accepting (EOS),
    dist(s) = 1 + min { dist(advance(s, t)) : t a text token allowed in s }   otherwise.

With ``left`` tokens still to draw (this one included), token ``t`` may be drawn iff
``1 + dist(advance(s, t)) <= left`` and EOS iff ``s`` is accepting (:meth:`TokenDistances.budget_mask`).
If the start state's distance fits the budget, every state a generation reaches keeps at least one
token, so every run ends with EOS within the budget; the mask is the exact set of such tokens, not a
subset: no token that can still finish in time is taken away.

Deciding ``dist(s) <= k`` (:meth:`TokenDistances.within`) is a depth-bounded search over states, with
proofs memoized per state (states are immutable values, so a proof is about the state, not the path
that reached it):

* **upper bounds**: a state's shortest byte completion (:meth:`Grammar.completion`, verified by
  advancing it) split into the fewest text tokens (a dynamic program over its bytes) plus EOS is a
  path; any split of a completion is a legal token path, because the grammar is byte-level. A
  successful search also proves ``dist(s) <= k``.
* **lower bounds**: ``dist(s) >= 2`` for a state that is not accepting (a text token, then EOS); a
  search that finds no successor within ``k - 1`` proves ``dist(s) >= k + 1``.

A search expands a state into its *successor groups* — the distinct states its allowed text tokens
lead to, each with those tokens' ids — by one walk of the token trie with interned parser states
(``TokenGrammar``), and tries the successors with the smallest upper bound first. Every call is
bounded by ``max_work`` expansions; past it :class:`~refdecoder.errors.TokenBudgetError` says which
state and budget could not be decided (never a guess in either direction).

Grammars whose states record the text read — key memory (``_keymemory``: unique undeclared keys) and
value memory (``_valuememory``: ``uniqueItems``) — make every token that continues a key or a value its
own successor state (126k of them at an object key at a 129k vocabulary), and their lower bounds come
only from exhausted searches; :func:`budget_distances` refuses them with the reason.

``tests/test_token_budget.py`` compares :meth:`TokenDistances.distance` and :meth:`budget_mask` with
breadth-first search over every token path on small vocabularies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from ._ir import Lex, receives
from ._parser import State
from ._tokens import TERMINATED, TokenGrammar, pack_ids
from .errors import TokenBudgetError, Unsupported
from .grammar import Grammar

__all__ = ["TokenDistances", "SuccessorGroup", "budget_distances"]

_INF = 1 << 60


@dataclass(frozen=True)
class SuccessorGroup:
    """A state one allowed text token leads to, and every token id that leads there."""

    state: State
    ids: np.ndarray


class TokenDistances:
    """Token distances over one :class:`TokenGrammar` (see the module doc). Memo tables only: the
    answers are functions of the state; the tables are caches, bounded by ``cache_states``."""

    def __init__(
        self, token_grammar: TokenGrammar, *, max_work: int = 2_000, cache_states: int = 4_096
    ) -> None:
        self.tg = token_grammar
        self.max_work = max_work
        self.cache_states = cache_states
        words = [token_grammar.token_bytes(i) for i in sorted(token_grammar.trie.text_ids)]
        self._words = frozenset(w for w in words if w)
        self._longest = max((len(w) for w in self._words), default=1)
        self._ub: dict[Hashable, int] = {}  # dist(s) <= _ub[s], proved
        self._lb: dict[Hashable, int] = {}  # dist(s) >= _lb[s], proved
        self._succ: OrderedDict[Hashable, tuple[SuccessorGroup, ...]] = OrderedDict()
        self._masks: OrderedDict[tuple[Hashable, int], np.ndarray] = OrderedDict()
        self._work = 0
        self._budget_asked = 0
        self.stats = {"expansions": 0, "trimmed_masks": 0, "masks": 0}

    # -- states with the same future ---------------------------------------------------------------
    def key(self, state: State) -> Hashable:
        """``state``, or a key shared with states of the same future: a stack whose top lexeme offers
        ``future_key`` (a number's integer digits when no constraint can tell them apart:
        :meth:`NumberLexeme.future_key`) and whose caller is not handed the lexeme's final state
        (``receives``) is read with that key. Equal keys, equal futures, equal distances."""
        if state is TERMINATED:
            return state
        nodes = self.tg.grammar.network.nodes
        stacks = []
        changed = False
        for stack in state.stacks:
            node_id, local = stack[-1]
            node = nodes[node_id]
            future = getattr(node.lexeme, "future_key", None) if isinstance(node, Lex) else None
            if future is not None and not (len(stack) > 1 and receives(nodes[stack[-2][0]])):
                k = future(local)
                if k is not local:
                    stacks.append((*stack[:-1], (node_id, k)))
                    changed = True
                    continue
            stacks.append(stack)
        return ("future", frozenset(stacks), state.accepting) if changed else state

    # -- bounds ------------------------------------------------------------------------------------
    def fewest_tokens(self, word: bytes) -> int | None:
        """The fewest text tokens whose bytes concatenate to ``word`` (None if none do)."""
        n = len(word)
        best = [0] + [_INF] * n
        for i in range(n):
            if best[i] >= _INF:
                continue
            for j in range(i + 1, min(n, i + self._longest) + 1):
                if best[i] + 1 < best[j] and word[i:j] in self._words:
                    best[j] = best[i] + 1
        return None if best[n] >= _INF else best[n]

    def _upper(self, state: State) -> int:
        """The best proved upper bound on ``dist(state)`` (computing the completion bound once)."""
        if state is TERMINATED:
            return 0
        if state.accepting:
            return 1
        key = self.key(state)
        ub = self._ub.get(key)
        if ub is None:
            self._trim()
            ub = _INF
            word = self.tg.grammar.completion(state)
            if word is not None:
                end = self.tg.grammar.advance(state, word)
                split = self.fewest_tokens(word)
                if end is not None and end.accepting and split is not None:
                    ub = split + 1
            self._ub[key] = ub
        return ub

    def _lower(self, state: State) -> int:
        if state is TERMINATED:
            return 0
        if state.accepting:
            return 1
        return max(2, self._lb.get(self.key(state), 2))

    def _trim(self) -> None:
        if len(self._ub) > 64 * self.cache_states:  # plain memo dicts: dropping them loses no answer
            self._ub.clear()
            self._lb.clear()

    # -- successors --------------------------------------------------------------------------------
    def successors(self, state: State) -> tuple[SuccessorGroup, ...]:
        """The distinct states the allowed text tokens of ``state`` lead to, with their ids (EOS excluded)."""
        key = self.key(state)
        hit = self._succ.get(key)
        if hit is not None:
            self._succ.move_to_end(key)
            return hit
        out = tuple(SuccessorGroup(s, ids) for s, ids in self._walk(state))
        self._succ[key] = out
        if len(self._succ) > self.cache_states:
            self._succ.popitem(last=False)
        return out

    def _walk(self, state: State) -> list[tuple[State, np.ndarray]]:
        """One preorder walk of the token trie from ``state`` (``TokenGrammar._walk``), grouping the
        token-ending nodes by the interned state they reach."""
        if state is TERMINATED:
            return []
        tg = self.tg
        tg._maybe_reset()
        reached: list[int] = []
        ends = tg._walk(tg._intern(state), None, reached)
        groups: dict[int, list[int]] = {}
        for node, sid in zip(ends, reached, strict=True):
            groups.setdefault(sid, []).append(node)
        trie = tg.trie
        states = tg._states
        return [
            (states[sid], trie.ids_at(np.asarray(nodes, dtype=np.int64))) for sid, nodes in groups.items()
        ]

    # -- distances ---------------------------------------------------------------------------------
    def within(self, state: State, k: int) -> bool:
        """Whether ``dist(state) <= k``: the sequence can end (EOS) within ``k`` more tokens."""
        self._work = 0
        self._budget_asked = k
        return self._within(state, k)

    def _within(self, state: State, k: int) -> bool:
        if self._lower(state) > k:
            return False
        if self._upper(state) <= k:
            return True
        self._work += 1
        self.stats["expansions"] += 1
        if self._work > self.max_work:
            raise TokenBudgetError(
                self._budget_asked,
                None,
                f"state {state.id}",
                f"deciding whether it can end within {k} tokens takes more than {self.max_work} "
                "expansions (raise max_work)",
            )
        groups = sorted(self.successors(state), key=lambda g: self._upper(g.state))
        for g in groups:
            if self._within(g.state, k - 1):
                key = self.key(state)
                self._ub[key] = min(self._ub.get(key, _INF), k)
                return True
        key = self.key(state)
        self._lb[key] = max(self._lb.get(key, 2), k + 1)
        return False

    def distance(self, state: State, cap: int) -> int | None:
        """``dist(state)`` exactly, or None when it exceeds ``cap``."""
        if not self.within(state, cap):
            return None
        lo, hi = self._lower(state), min(cap, self._upper(state))
        while lo < hi:  # the least d with dist(state) <= d: monotone in d
            mid = (lo + hi) // 2
            if self.within(state, mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- masks -------------------------------------------------------------------------------------
    def budget_mask(self, state: State, left: int) -> np.ndarray:
        """The tokens allowed in ``state`` after which the sequence can still end within ``left``
        tokens in all (this one and EOS included): ``mask(state)`` minus the text tokens ``t`` with
        ``1 + dist(advance(state, t)) > left``. Read-only int32 ``[W]``."""
        if state is TERMINATED or left < 1:
            return self.tg.mask(TERMINATED)
        key = (self.key(state), left)
        hit = self._masks.get(key)
        if hit is not None:
            self._masks.move_to_end(key)
            return hit
        self.stats["masks"] += 1
        base = self.tg.mask(state)
        self._work = 0
        self._budget_asked = left
        drop = [g.ids for g in self.successors(state) if not self._within(g.state, left - 1)]
        if not drop:
            out = base
        else:
            self.stats["trimmed_masks"] += 1
            out = base & ~pack_ids(np.concatenate(drop), self.tg.vocab_size)
            out.flags.writeable = False
        self._masks[key] = out
        if len(self._masks) > self.cache_states:
            self._masks.popitem(last=False)
        return out


def _memory_lexemes(grammar: Grammar) -> list[str]:
    """The lexemes of ``grammar`` whose states record the text read (key and value memory)."""
    from ._keymemory import KeyLexeme
    from ._valuememory import AnyValueLexeme, ScalarValueLexeme

    kinds = (KeyLexeme, ScalarValueLexeme, AnyValueLexeme)
    return sorted(
        {
            type(n.lexeme).__name__
            for n in grammar.network.nodes
            if isinstance(n, Lex) and isinstance(n.lexeme, kinds)
        }
    )


def budget_distances(token_grammar: TokenGrammar, max_new_tokens: int) -> TokenDistances:
    """Token distances for a budget of ``max_new_tokens``, checked before generation: the spec's
    shortest output must fit (:class:`~refdecoder.errors.TokenBudgetError` otherwise), and its grammar
    must not record text in its states (key or value memory), where one state per token read makes
    exact budgets cost seconds per step at real vocabularies (:class:`~refdecoder.errors.Unsupported`
    then, naming the lexemes and what to change)."""
    memory = _memory_lexemes(token_grammar.grammar)
    if memory:
        raise Unsupported(
            "max_new_tokens",
            ", ".join(memory),
            "exact token budgets over key or value memory (unique undeclared keys, uniqueItems) are not "
            "supported: their states record the text read; use additionalProperties: false, or "
            "JsonProfile(allow_duplicate_keys=True), or no uniqueItems",
        )
    distances = TokenDistances(token_grammar)
    start = token_grammar.initial()
    if not distances.within(start, max_new_tokens):
        needed = distances.distance(start, 4 * max_new_tokens + 64)
        raise TokenBudgetError(
            max_new_tokens,
            needed,
            "the start of the spec",
            f"its shortest output takes more than {4 * max_new_tokens + 64} tokens",
        )
    return distances
