"""Coverage-guided walks: which of the reference's grammar states had their masks compared,
and further valid walks steered to the ones that did not, until coverage saturates or the budget ends.

Theory of operation. A reference state is a set of parser stacks (:mod:`refdecoder._parser`); its
*positions* are, per stack, the top two frames — the lexeme being read with its automaton state, and the
node that called it with its local state (for an object: which keys were seen, whether a comma was just
read) — plus ``accepting``. Two prefixes in the same positions are masked by the same rules, so a
position whose mask was compared once is *covered*; an lm-format-enforcer defect (``}``
allowed after ``{"a":1,``) sits at a position that no walk through ``{"a":1,"b":""}`` split at the comma
reaches with a token boundary there.

:func:`explore` finds the positions reachable from the start by a bounded breadth-first search over
bytes (each position with the shortest prefix found to reach it; a few representative bytes per
state, so string bodies and whitespace do not explode it); :class:`Coverage` records the positions at
every token boundary of the walks compared; :func:`guided_walks` takes each position not yet covered,
builds a valid string through it (its prefix, then a completion) tokenized with a token boundary exactly
at the position, walks it with masks compared at every step (:func:`check_walk`), and repeats until
every found position is covered or was tried, or the walk or time budget ends.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from props.checks.invariants import Target, check_walk
from props.checks.targeted import complete_bytes
from props.checks.witness import canonical_ids, shortest_completion
from props.contract.findings import Finding
from refdecoder import Grammar
from refdecoder.grammar import stable_key

__all__ = ["Coverage", "Explored", "explore", "positions", "guided_walks", "coverage_walks", "record"]

ACCEPTING = ("accepting",)
_TIER = frozenset(b'{}[]",:0a1-.e tfn')


def positions(state: Any, g: Grammar | None = None) -> frozenset[Hashable]:
    """The positions of a reference state (module doc): each stack's top two frames, and ``accepting``.
    With the grammar ``g``, a lexeme that is not a byte automaton (numbers with bounds, for instance)
    counts by node and finality only, not by its unbounded local state."""
    out: set[Hashable] = set()
    nodes = g.network.nodes if g is not None else None
    for stack in getattr(state, "stacks", ()):
        node_id, local = stack[-1]
        lexeme = getattr(nodes[node_id], "lexeme", None) if nodes is not None else None
        if lexeme is not None and not isinstance(getattr(lexeme, "num_states", None), int):  # not a ByteDFA
            out.add((*stack[-2:-1], (node_id, "final" if lexeme.is_final(local) else "inside")))
        else:
            out.add(stack[-2:])
    if getattr(state, "accepting", False):
        out.add(ACCEPTING)
    return frozenset(out)


@dataclass
class Explored:
    """Positions found by :func:`explore`, each with the shortest prefix found and its state;
    ``exhaustive`` when the search ended without hitting its state budget."""

    first: dict[Hashable, tuple[bytes, Any]] = field(default_factory=dict)
    exhaustive: bool = False


def _representatives(live: bytes) -> list[int]:
    """A few bytes per state: those in ``_TIER``, the first and last live byte and a few between."""
    picks = [b for b in live if b in _TIER]
    if len(live) > 0:
        step = max(1, len(live) // 4)
        picks += [live[i] for i in range(0, len(live), step)] + [live[-1]]
    return list(dict.fromkeys(picks))


def explore(g: Grammar, max_states: int = 800) -> Explored:
    """Breadth first from the start state over representative bytes (module doc)."""
    start = g.initial()
    ex = Explored()
    seen = {start}
    queue: deque[tuple[Any, bytes]] = deque([(start, b"")])
    while queue:
        if len(seen) >= max_states:
            return ex
        s, path = queue.popleft()
        # In a fixed order, not the frozenset's (string hashes vary per process): guided_walks walks
        # toward positions in this order, ties of the same prefix included.
        here = positions(s, g)
        for p in sorted(here, key=stable_key) if len(here) > 1 else here:
            ex.first.setdefault(p, (path, s))
        for b in _representatives(g.live_bytes(s)):
            t = g.advance_byte(s, b)
            if t is not None and t not in seen:
                seen.add(t)
                queue.append((t, path + bytes([b])))
    ex.exhaustive = True
    return ex


@dataclass
class Coverage:
    """The positions whose masks were compared on one target (module doc)."""

    grammar: Grammar
    covered: set[Hashable] = field(default_factory=set)

    def observe(self, token_bytes: Iterable[bytes]) -> None:
        """Record the positions at every token boundary of a walk (given as its tokens' bytes) and at its end."""
        g = self.grammar
        s = g.initial()
        self.covered |= positions(s, g)
        for b in token_bytes:
            nxt = g.advance(s, b)
            if nxt is None:
                return
            s = nxt
            self.covered |= positions(s, g)


# explore() per spec: positions and their shortest prefixes, without states (those belong to one
# grammar object). A spec's reference grammar is over bytes, the same for every vocabulary, and the
# search (256 advances per state) is most of the coverage step's own time on small vocabularies.
# Kinds whose grammar may name a vocabulary's special tokens are not shared.
_EXPLORED: dict[tuple[str, ...], Explored] = {}
_SHARED_KINDS = frozenset({"json_schema", "regex", "choice"})


def _explored(t: Target, max_states: int) -> Explored:
    """:func:`explore` of ``t``'s grammar; for a spec explored before (on another vocabulary), its
    positions and prefixes with the states left None (:func:`guided_walks` advances the prefix)."""
    if str(t.spec.kind) not in _SHARED_KINDS:
        return explore(t.reference.grammar, max_states)
    key = (
        str(t.spec.kind),
        t.spec.digest,
        json.dumps(t.spec.profile, sort_keys=True, default=str),
        repr(t.profile.json),
        str(max_states),
    )
    shared = _EXPLORED.get(key)
    if shared is not None:
        return shared
    ex = explore(t.reference.grammar, max_states)
    if len(_EXPLORED) >= 256:
        _EXPLORED.clear()
    _EXPLORED[key] = Explored({p: (prefix, None) for p, (prefix, _) in ex.first.items()}, ex.exhaustive)
    return ex


def _cost(prefix: bytes) -> tuple[int, int]:
    return sum(prefix.count(w) for w in (b" ", b"\t", b"\n", b"\r")), len(prefix)


def _ids(t: Target, data: bytes) -> list[int] | None:
    ids = t.vocab.index.fewest_tokens(data) if data else []
    return None if ids is None else [int(i) for i in ids]


def guided_walks(
    t: Target,
    walked: Sequence[Sequence[int]],
    *,
    max_walks: int = 8,
    seconds: float = 2.0,
    max_states: int = 800,
) -> tuple[list[Finding], dict[str, Any]]:
    """Coverage of ``t`` after the walks ``walked`` (token ids), then up to ``max_walks`` walks steered
    to positions not yet covered. Returns the findings and a summary: ``found`` (positions found),
    ``compared`` (of those, covered), ``guided_walks``, ``saturated`` (every found position covered or
    tried) and ``exhaustive`` (the search found every reachable position)."""
    deadline = time.monotonic() + seconds
    g = t.reference.grammar
    cov = Coverage(g)
    for ids in walked:
        cov.observe(t.token_bytes(int(i)) or b"" for i in ids)
    ex = _explored(t, max_states)
    # Structure before whitespace: positions reached without whitespace first, shortest prefix first.
    todo = sorted((p for p in ex.first if p not in cov.covered), key=lambda p: _cost(ex.first[p][0]))
    found: list[Finding] = []
    walks = 0
    tried: set[Hashable] = set()
    for p in todo:
        if p in cov.covered:
            continue
        if walks >= max_walks or time.monotonic() > deadline:
            break
        tried.add(p)
        prefix, state = ex.first[p]
        if state is None:  # explored on an earlier target of the same spec: this grammar's state
            state = g.advance(g.initial(), prefix)
            if state is None:
                continue
        # A completion over structural bytes first (complete_bytes: punctuation and digits inside
        # strings too, which finds engines that block them), found within a few hundred states for
        # nearly every position; where that search gives up, the grammar network's shortest one
        # (checked by the matcher). The main job: 780 of 867 positions within 300 states; the 84
        # that needed more than 1,500 had cost 3 s.
        rest = complete_bytes(g, state, max_states=300)
        if rest is None:
            rest = shortest_completion(g, state, max_states=1000)
        if rest is None:
            continue
        head, tail = _ids(t, prefix), _ids(t, rest)
        if head is None or tail is None:
            continue
        ids = head + tail
        walks += 1
        found += check_walk(t, ids, "coverage")
        cov.observe(t.token_bytes(i) or b"" for i in ids)
    universe = set(ex.first) | cov.covered
    compared = len(cov.covered)
    summary = {
        "found": len(universe),
        "compared": compared,
        "guided_walks": walks,
        "saturated": all(p in cov.covered or p in tried for p in ex.first),
        "exhaustive": ex.exhaustive,
    }
    return found, summary


def record(t: Target, summary: dict[str, Any]) -> None:
    """Put a coverage summary where the report shows it: ``t.instances`` counts (``coverage/...``, per
    spec and totalled) and a note in words."""
    t.instances["valid/coverage-guided"] += int(summary["guided_walks"])
    t.instances["coverage/positions-found"] += int(summary["found"])
    t.instances["coverage/positions-compared"] += int(summary["compared"])
    pct = 100.0 * summary["compared"] / max(1, summary["found"])
    how = "saturated" if summary["saturated"] else "budget ended"
    scope = "all reachable" if summary["exhaustive"] else "found by a bounded search"
    t.instance_notes.add(
        f"coverage: masks compared at {summary['compared']} of {summary['found']} grammar positions "
        f"({pct:.0f}%, {scope}; {how} after {summary['guided_walks']} guided walks)"
    )


def coverage_walks(
    t: Target,
    valid: Sequence[bytes],
    *,
    max_walks: int = 16,
    seconds: float = 2.0,
    deadline: float | None = None,
) -> list[Finding]:
    """Certify's coverage step: coverage after the canonical walks of ``valid``, guided walks toward
    what they missed, the summary recorded on ``t`` (:func:`record`); returns the findings. With a run
    ``deadline`` (``time.monotonic()``), up to a quarter of the time left (at most 30 s, 64 walks)."""
    if deadline is not None:
        left = deadline - time.monotonic()
        seconds = max(seconds, min(30.0, left / 4))
        max_walks = max(max_walks, 64) if seconds > 2 * 2.0 else max_walks
    walked = [
        ids for ids in (canonical_ids(t.vocab, d) or t.vocab.index.fewest_tokens(d) for d in valid) if ids
    ]
    found, summary = guided_walks(t, walked, max_walks=max_walks, seconds=seconds)
    record(t, summary)
    return found
