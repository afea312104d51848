"""Special tokens as grammar terminals: the byte channel they travel on (docs/design.md §2 "Special tokens").

Theory of operation
-------------------
The IR reads bytes; a special (added, control) token is not text. A grammar that names special tokens
(a Lark ``<|name|>`` or ``<[id]>``, a structural tag's ``token``) reads each of them as its *encoding*

    ``MARK`` (0xFF) · the token id in ASCII decimal · ``END`` (0xFE)

— bytes that no UTF-8 text contains (0xFE and 0xFF never occur in UTF-8; llguidance marks special tokens
with the same 0xFF byte). Every text lexeme of every front-end reads UTF-8 only (an invariant tested in
``tests/test_special_tokens.py``), so in such a grammar:

* the token's text spelled in ordinary bytes (``<|tool_call|>`` as ``<|``, ``tool``, ...) is text, which
  the grammar accepts only where it accepts that text — never where it names the token;
* the token is not those bytes: its encoding is accepted only where the grammar names the token;
* the encoding is self-delimiting (``END`` closes it), so ids that are prefixes of one another in
  decimal (``1``, ``12``) never confuse the parser.

A token vocabulary lifts this exactly (``_tokens.special_view``): each special id the grammar names reads
its encoding, and an ordinary token containing a raw 0xFF byte is never allowed (it could only start an
encoding, and no single text token can be a special token). Special ids are vocabulary ids: a grammar
that names special tokens by name is compiled against a name table (the spec carries it), as llguidance
compiles Lark against a tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._lexeme import ByteDFA
from .errors import SpecError

__all__ = ["MARK", "END", "encode", "split", "render", "special_dfa", "named_ids"]

#: The byte that starts a special token's encoding (never in UTF-8 text).
MARK = 0xFF
#: The byte that ends it.
END = 0xFE
_DIGITS = b"0123456789"


def encode(token_id: int) -> bytes:
    """The bytes the IR reads for special token ``token_id``."""
    if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
        raise SpecError("bad special token id", repr(token_id), "a non-negative int")
    return bytes([MARK]) + str(token_id).encode("ascii") + bytes([END])


def split(data: bytes) -> list[bytes | int]:
    """``data`` as text chunks and special token ids, in order; a malformed encoding stays bytes."""
    out: list[bytes | int] = []
    text = bytearray()
    i = 0
    while i < len(data):
        if data[i] == MARK:
            j = i + 1
            while j < len(data) and data[j] in _DIGITS:
                j += 1
            if j > i + 1 and j < len(data) and data[j] == END and (data[i + 1] != 0x30 or j == i + 2):
                if text:
                    out.append(bytes(text))
                    text.clear()
                out.append(int(data[i + 1 : j]))
                i = j + 1
                continue
        text.append(data[i])
        i += 1
    if text:
        out.append(bytes(text))
    return out


def render(data: bytes, names: Mapping[int, str] | None = None) -> str:
    """Human text: special tokens as their name (``<|tool_call|>``) or ``<[id]>``, text as UTF-8
    (invalid bytes escaped)."""
    parts: list[str] = []
    for piece in split(data):
        if isinstance(piece, int):
            parts.append((names or {}).get(piece) or f"<[{piece}]>")
        else:
            parts.append(piece.decode("utf-8", "backslashreplace"))
    return "".join(parts)


def special_dfa(ids: Iterable[int]) -> ByteDFA:
    """The lexeme reading exactly one of the special tokens ``ids`` (a trie of their encodings);
    empty ``ids`` is refused (the empty language is no lexeme)."""
    words = sorted({encode(i) for i in ids})
    if not words:
        raise SpecError("no special token to read", "special tokens", "at least one token id")
    trans: dict[int, dict[int, int]] = {0: {}}
    finals: set[int] = set()
    for w in words:
        q = 0
        for b in w:
            row = trans[q]
            if b not in row:
                row[b] = len(trans)
                trans[len(trans)] = {}
            q = row[b]
        finals.add(q)
    return ByteDFA.build(trans, 0, finals)


def named_ids(dfa: ByteDFA) -> frozenset[int] | None:
    """The token ids whose encodings ``dfa`` reads somewhere (after a ``MARK`` edge, the decimal digits
    up to an ``END`` edge), or None when they are unbounded (a digit loop: a lexeme reading any special
    token, as ``any_tokens`` does). A depth-first walk over the digit edges after each ``MARK`` edge."""
    digits = range(0x30, 0x3A)
    out: set[int] = set()
    for q in range(dfa.num_states):
        after = dfa.step(q, MARK)
        if after is None:
            continue
        stack: list[tuple[int, str, frozenset[int]]] = [(after, "", frozenset())]
        while stack:
            state, text, path = stack.pop()
            if state in path:
                return None
            if text and dfa.step(state, END) is not None:
                out.add(int(text))
            for d in digits:
                nxt = dfa.step(state, d)
                if nxt is not None:
                    stack.append((nxt, text + chr(d), path | {state}))
    return frozenset(out)
