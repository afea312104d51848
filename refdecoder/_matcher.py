"""``Matcher``: one sequence's handle on a :class:`TokenGrammar` (docs/design.md §2, §4 invariants 6–9).

The matcher owns nothing mutable but a pointer to a persistent history: a singly linked list of
``(state, token, previous)`` cells, newest first. ``accept`` prepends a cell, ``rollback(k)`` follows
``k`` links, ``fork()`` copies the pointer — O(1), and forks can never observe each other because
cells are never modified. States are immutable values (docs/style.md §1), so a fork is a plain assignment.

Outcomes are typed (docs/style.md §7): ``accept`` returns :class:`Accepted` or :class:`Rejected` (with the
reason, the token's id and bytes, the state id and the byte offset where the grammar died); a
rejected token leaves the matcher as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._parser import State
from ._tokens import TERMINATED, TokenGrammar
from .errors import StateError

__all__ = ["Matcher", "Accepted", "Rejected", "Outcome"]


@dataclass(frozen=True)
class Accepted:
    token_id: int
    token_bytes: bytes | None  # None for EOS / special ids
    state_id: str  # the new state
    terminated: bool = False  # True when the token was EOS


@dataclass(frozen=True)
class Rejected:
    token_id: int
    token_bytes: bytes | None
    state_id: str  # the unchanged state
    reason: str
    byte_offset: int | None = None  # offset in the token's bytes of the first byte the grammar refused

    def __str__(self) -> str:
        at = "" if self.byte_offset is None else f" at byte {self.byte_offset}"
        return (
            f"token {self.token_id} {self.token_bytes!r} rejected in state {self.state_id}{at}: {self.reason}"
        )


Outcome = Accepted | Rejected


@dataclass(frozen=True)
class _Cell:
    state: State
    token: int  # the token that led here (-1 for the start cell)
    prev: _Cell | None
    depth: int  # tokens accepted so far


class Matcher:
    """One sequence: accept tokens, read masks, fork, roll back, speculate, jump forward."""

    __slots__ = ("token_grammar", "_head")

    def __init__(self, token_grammar: TokenGrammar, state: State | None = None) -> None:
        self.token_grammar = token_grammar
        start = token_grammar.initial() if state is None else state
        self._head = _Cell(start, -1, None, 0)

    # -- reading ----------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self._head.state

    @property
    def num_accepted(self) -> int:
        return self._head.depth

    def accepted_ids(self) -> list[int]:
        out: list[int] = []
        cell: _Cell | None = self._head
        while cell is not None and cell.prev is not None:
            out.append(cell.token)
            cell = cell.prev
        return out[::-1]

    def mask(self) -> np.ndarray:
        return self.token_grammar.mask(self._head.state)

    def allowed_ids(self) -> list[int]:
        return self.token_grammar.allowed_ids(self._head.state)

    def is_accepting(self) -> bool:
        """True when the bytes so far are in the language (EOS allowed); False after EOS."""
        return self._head.state.accepting

    def is_terminated(self) -> bool:
        return self._head.state is TERMINATED

    def forced_bytes(self) -> bytes:
        s = self._head.state
        return b"" if s is TERMINATED else self.token_grammar.grammar.forced_bytes(s)

    def forced_tokens(self) -> list[int]:
        """See :meth:`TokenGrammar.forced_tokens`: greedy longest match over :meth:`forced_bytes`."""
        return self.token_grammar.forced_tokens(self._head.state)

    # -- changing -----------------------------------------------------------------------------------
    def accept(self, token_id: int) -> Outcome:
        tg = self.token_grammar
        head = self._head
        nxt, reason, offset = tg.check(head.state, token_id)
        if nxt is None:
            return Rejected(token_id, tg.token_bytes(token_id), head.state.id, reason, offset)
        self._head = _Cell(nxt, token_id, head, head.depth + 1)
        return Accepted(token_id, tg.token_bytes(token_id), nxt.id, nxt is TERMINATED)

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (EOS included); ``StateError`` beyond the history."""
        if not isinstance(k, int) or k < 0 or k > self._head.depth:
            raise StateError(
                f"rollback({k!r}): can undo between 0 and {self._head.depth} tokens "
                "(the number accepted since the matcher started)"
            )
        cell = self._head
        for _ in range(k):
            assert cell.prev is not None
            cell = cell.prev
        self._head = cell

    def reset(self) -> None:
        self.rollback(self._head.depth)

    def fork(self) -> Matcher:
        """An independent matcher with the same history (O(1): the history is shared and immutable)."""
        other = Matcher.__new__(Matcher)
        other.token_grammar = self.token_grammar
        other._head = self._head
        return other

    # -- speculation -------------------------------------------------------------------------------
    def validate(self, ids: list[int]) -> int:
        """How many leading tokens of ``ids`` would be accepted one by one (the matcher is unchanged)."""
        tg = self.token_grammar
        s: State | None = self._head.state
        n = 0
        for t in ids:
            assert s is not None
            s = tg.advance(s, t)
            if s is None:
                break
            n += 1
        return n

    def __repr__(self) -> str:
        return f"Matcher(num_accepted={self.num_accepted}, state={self.state!r})"
