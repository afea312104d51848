"""Finish within ``max_tokens``: the reference's token budgets for requests that opt in (docs/design.md §5).

A request with ``finish_within_max_tokens`` is served under the reference's exact token budget
(:class:`refdecoder.TokenDistances`): each step's mask is the backend's mask AND the reference's
``budget_mask(state, left)`` for ``left = max_tokens - len(ids)`` tokens still to draw, so every
output ends with EOS within ``max_tokens`` whenever the spec's shortest output fits. Admission asks
:func:`refdecoder.budget_distances` first: a spec whose shortest output does not fit, or whose
grammar the budget refuses (key or value memory), is refused with its reason.

The reference state is a value (:class:`refdecoder.grammar.State`): a sequence carries it next to its
backend matcher, forks copy it by assignment, speculation keeps one per walked draft and "rolls back"
by picking the one at the accepted position, and a resume replays the generated ids.

:class:`BudgetCache` holds one :class:`BudgetOracle` per (spec, vocabulary) — the engine's and the
checker's are separate instances, so the checker never reads what the engine computed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import refdecoder
from refdecoder import (
    TERMINATED,
    Spec,
    TokenBudgetError,
    TokenDistances,
    TokenGrammar,
    Unsupported,
    budget_distances,
)
from refdecoder.grammar import State

__all__ = ["BudgetOracle", "BudgetCache"]

_FLAG = "finish_within_max_tokens"


@dataclass(frozen=True, eq=False)
class BudgetOracle:
    """The reference grammar of one (spec, vocabulary) lifted to tokens, and its token distances."""

    token_grammar: TokenGrammar
    distances: TokenDistances

    def start(self) -> State:
        return self.token_grammar.initial()

    def advance(self, state: State, token_id: int) -> State | None:
        """The state after ``token_id`` (:data:`refdecoder.TERMINATED` after EOS); None if rejected."""
        return self.token_grammar.advance(state, int(token_id))

    def check(self, state: State, token_id: int) -> tuple[State | None, str]:
        """``(next state or None, the reference's reason when it rejects)``."""
        nxt, reason, _ = self.token_grammar.check(state, int(token_id))
        return nxt, reason

    def replay(self, ids: Sequence[int]) -> tuple[State | None, int | None]:
        """``(the state after ids, None)``, or ``(None, index of the first id the reference rejects)``."""
        state: State | None = self.start()
        for k, tok in enumerate(ids):
            assert state is not None
            state = self.advance(state, tok)
            if state is None:
                return None, k
        return state, None

    def mask(self, state: State, left: int) -> np.ndarray:
        """The reference's tokens after which the output still ends within ``left`` tokens (this one
        and EOS included); :class:`refdecoder.TokenBudgetError` if that cannot be decided in bound."""
        if state is TERMINATED:
            return self.token_grammar.mask(TERMINATED)
        return self.distances.budget_mask(state, left)


class BudgetCache:
    """One :class:`BudgetOracle` per (spec, vocabulary fingerprint), LRU-bounded, and the admission
    verdicts per (spec, vocabulary, max_tokens)."""

    def __init__(self, entries: int = 64) -> None:
        self.entries = entries
        self._grammars: OrderedDict[tuple[str, str], TokenGrammar | str] = OrderedDict()
        self._oracles: dict[tuple[str, str], BudgetOracle] = {}
        self._verdicts: dict[tuple[str, str, int], str | None] = {}

    def _key(self, spec: Spec, vocabulary: Any) -> tuple[str, str]:
        return spec.canonical(), str(vocabulary.fingerprint)

    def _token_grammar(self, key: tuple[str, str], spec: Spec, vocabulary: Any) -> TokenGrammar | str:
        hit = self._grammars.get(key)
        if hit is not None:
            self._grammars.move_to_end(key)
            return hit
        try:
            out: TokenGrammar | str = TokenGrammar(refdecoder.compile(spec), vocabulary)
        except Exception as e:  # noqa: BLE001 - a spec the reference cannot compile: the reason
            out = f"{_FLAG}: the reference cannot compile this spec ({type(e).__name__}: {e})"
        self._grammars[key] = out
        if len(self._grammars) > self.entries:
            old, _ = self._grammars.popitem(last=False)
            self._oracles.pop(old, None)
            for v in [v for v in self._verdicts if v[:2] == old]:
                del self._verdicts[v]
        return out

    def problem(self, spec: Spec, vocabulary: Any, max_tokens: int) -> str | None:
        """Why a request for ``spec`` cannot be served to finish within ``max_tokens``, or None."""
        key = self._key(spec, vocabulary)
        vkey = (*key, max_tokens)
        if vkey in self._verdicts:
            return self._verdicts[vkey]
        tg = self._token_grammar(key, spec, vocabulary)
        verdict: str | None = None
        if isinstance(tg, str):
            verdict = tg
        else:
            try:
                distances = budget_distances(tg, max_tokens)
            except TokenBudgetError as e:
                verdict = f"{_FLAG}: the spec cannot be finished within max_tokens={max_tokens}: {e}"
            except Unsupported as e:
                verdict = f"{_FLAG}: exact token budgets are refused for this grammar: {e}"
            else:
                self._oracles.setdefault(key, BudgetOracle(tg, distances))
        self._verdicts[vkey] = verdict
        return verdict

    def oracle(self, spec: Spec, vocabulary: Any) -> BudgetOracle:
        """The oracle of a (spec, vocabulary) that :meth:`problem` admitted."""
        return self._oracles[self._key(spec, vocabulary)]
