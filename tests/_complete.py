"""Completion search over a Grammar (test support): proves viability by exhibiting a completion."""

from __future__ import annotations

from collections import deque

from refdecoder import Grammar, State

# Bytes that tend to close structures come first, so the search finds short completions quickly.
_FIRST = b'}]",:1tfn0'
_PRIORITY = list(_FIRST) + [b for b in range(256) if b not in _FIRST]


def shortest_completion(g: Grammar, state: State, max_states: int = 5_000, max_len: int = 400) -> bytes | None:
    """Some byte string taking ``state`` to an accepting state, or None if none is found within the
    budget. Depth-first over states, trying structure-closing bytes first; visited states are
    skipped, so loops (string bodies, whitespace) cannot trap it."""
    seen = {state}
    order = {b: i for i, b in enumerate(_PRIORITY)}
    stack: list[tuple[State, bytes]] = [(state, b"")]
    while stack and len(seen) < max_states:
        s, path = stack.pop()
        if s.accepting:
            return path
        if len(path) >= max_len:
            continue
        live = sorted(g.live_bytes(s), key=order.__getitem__, reverse=True)
        for b in live:
            t = g.advance_byte(s, b)
            assert t is not None
            if t not in seen:
                seen.add(t)
                stack.append((t, path + bytes([b])))
    return None


def breadth_first_completion(g: Grammar, state: State, max_states: int) -> bytes | None:
    """The shortest bytes taking ``state`` to acceptance (BFS over states), None if not found in budget."""
    if state.accepting:
        return b""
    seen = {state}
    queue: deque[tuple[State, bytes]] = deque([(state, b"")])
    while queue and len(seen) < max_states:
        s, path = queue.popleft()
        for b in g.live_bytes(s):
            t = g.advance_byte(s, b)
            assert t is not None, "live_bytes offered a dead byte"
            if t.accepting:
                return path + bytes([b])
            if t not in seen:
                seen.add(t)
                queue.append((t, path + bytes([b])))
    return None
