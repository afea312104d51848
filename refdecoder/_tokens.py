"""Token masks: a byte :class:`Grammar` lifted to a vocabulary (docs/design.md §2 "Token masks").

Theory of operation
-------------------
The definition is per token: token ``t`` is allowed in state ``s`` iff ``grammar.advance(s, bytes(t))``
is a state (a viable prefix), EOS ids iff ``s`` is accepting; special ids and tokens whose bytes are
empty never — except in a grammar that names special tokens (``_special``), where every special id that
is not EOS reads its encoding and ordinary tokens with a raw 0xFF byte are never allowed
(:class:`SpecialView`). :meth:`TokenGrammar.mask_bruteforce` computes exactly that, one token at a time; every
faster path below is checked against it by property tests (``tests/test_masks.py``).

1. **Trie walk** (the real path). The text tokens of a vocabulary form a byte trie, stored once per
   vocabulary (cached by fingerprint) as flat arrays in *preorder*: node ``i`` has a byte label, a
   depth and ``skip[i]``, the index just past its subtree. Walking the arrays from ``s`` with one
   state per depth, and jumping to ``skip[i]`` when the parser dies, visits each live prefix once
   (outlines' and llguidance's token-trie walk). Parser states are interned to small ints with a
   lazily filled 256-wide transition row each, so the inner loop is list indexing. A row's first
   fill marks dead every byte no top lexeme can read (``Grammar.readable_bound``), and bytes with
   the same ``Grammar.step_key`` share one parser step.
2. **Lexeme tables** (xgrammar's adaptive token-mask cache: Dong et al. 2024, arXiv:2411.15100). When the top
   frame of every stack of ``s`` is a :class:`ByteDFA` lexeme in DFA state ``q``, a token's fate on
   that stack depends on ``(dfa, q)`` alone unless the DFA passes through a final state *inside* the
   token (after at least one byte), where the parser might return to the caller. For each
   ``(dfa, q)`` the trie is run through the DFA alone with numpy, level by level, and tokens fall in
   three classes:

   * *accepted*: the DFA reads every byte. The stack survives (its top stays a live DFA state,
     trimness), so the token is allowed in ``s`` whatever lies below.
   * *rejected*: the DFA dies before reaching a final state after byte 1. That stack contributes
     nothing; the pops at ``q`` itself were already expanded into other stacks of ``s`` by closure.
   * *uncertain*: the DFA dies after having passed a final state. Only these are walked with the
     parser (the trie walk of 1, restricted to their subtrees and ancestors).

   A lexeme that reads exactly what a ByteDFA reads from some state (the key lexemes of
   ``_keymemory``, whose state also records the text) says so with ``dfa_view(state) -> (dfa, q)``
   and shares that DFA's tables.

   A table is built by a walk from the root through the DFA's own table when few first bytes are
   live (a key), else level by level with numpy, finishing in such a walk once few subtrees are
   live; a subtree below a node of the first levels already run, by any table, from a DFA state
   reading the same language (``ByteDFA.residual_key``) at the same depth with the same passed bit
   is reused rather than run again.

   ``mask(s)`` is the OR of the accepted sets of all distinct tops, plus the uncertain tokens the
   restricted walk finds alive. Tables are keyed by ``(lexeme.key, q)``, so grammars compiled for the
   same vocabulary share them (a JSON string body is one table for every schema).
3. **Mask cache**: an LRU of finished masks per state, bounded in bytes.
4. **numpy bit packing**: bitmasks are int32 words in xgrammar's layout — bit ``i % 32`` of word
   ``i // 32`` is token ``i`` (bit 31 is the sign bit) — built with ``np.packbits(bitorder="little")``
   on a little-endian view.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ._ir import Lex
from ._lexeme import ByteDFA
from ._parser import State
from ._special import MARK
from ._special import encode as encode_special
from .errors import StateError, Unsupported
from .grammar import Grammar

__all__ = [
    "VocabularyLike",
    "SpecialView",
    "special_view",
    "TokenTrie",
    "token_trie",
    "TokenGrammar",
    "TERMINATED",
    "Terminated",
    "pack_ids",
    "unpack_mask",
    "num_words",
]

_UNKNOWN = -2  # transition not computed yet
_DEAD = -1

_LE_I4 = np.dtype("<i4")


class VocabularyLike(Protocol):
    """What a vocabulary must offer (``tokenizers_matrix.Vocabulary`` does; so can a test stub)."""

    @property
    def token_bytes(self) -> Sequence[bytes | None]: ...

    @property
    def eos_ids(self) -> Iterable[int]: ...

    @property
    def special_ids(self) -> Iterable[int]: ...

    def __len__(self) -> int: ...


class SpecialView:
    """A vocabulary as a grammar that names special tokens reads it (``_special``): each special id
    that is not EOS is its encoding (``MARK id END``), so it is allowed exactly where the grammar
    names it; an ordinary token holding a raw 0xFF byte is never text (0xFF only starts an encoding,
    and one text token is never a special token). EOS ids keep their meaning: EOS, allowed iff the
    state is accepting."""

    def __init__(self, vocabulary: VocabularyLike) -> None:
        eos = frozenset(vocabulary.eos_ids)
        specials = frozenset(vocabulary.special_ids) - eos
        raw = vocabulary.token_bytes
        self.eos_ids = eos
        self.token_bytes: tuple[bytes | None, ...] = tuple(
            encode_special(i) if i in specials else None if b is not None and MARK in b else b
            for i, b in enumerate(raw)
        )
        # ordinary tokens holding a raw 0xFF: never text in such a grammar
        self.special_ids = frozenset(i for i, b in enumerate(raw) if i not in specials and b and MARK in b)
        base = getattr(vocabulary, "fingerprint", None) or vocabulary_key(vocabulary)
        self.fingerprint = hashlib.sha256(f"special-view:{base}".encode()).hexdigest()
        self.special_names: tuple[tuple[int, str], ...] = tuple(getattr(vocabulary, "special_names", ()))

    special_tokens_lifted = True

    def __len__(self) -> int:
        return len(self.token_bytes)


def refuse_text_terminals(grammar: Grammar, vocabulary: VocabularyLike) -> None:
    """Refuse a grammar that names, as a terminal, a token this vocabulary holds as ordinary text (an
    added token that is not special, such as DeepSeek-V3's ``<｜tool▁calls▁begin｜>``, named by
    ``<[128806]>``). An engine reads such a token both ways — the terminal where the grammar names it,
    its text where text is allowed — and one token with two byte readings is not what the matcher
    decides: :class:`SpecialView` would give it one, and the masks would be wrong at the other."""
    ids = grammar.named_token_ids
    if not ids:
        return
    raw = vocabulary.token_bytes
    specials = frozenset(vocabulary.special_ids)
    # (a vocabulary already lifted spells each special token by its encoding: not text)
    text = sorted(
        i for i in ids if i < len(raw) and raw[i] not in (None, encode_special(i)) and i not in specials
    )
    if text:
        i = text[0]
        more = f" (and {len(text) - 1} more)" if len(text) > 1 else ""
        raise Unsupported(
            "special token",
            f"<[{i}]>",
            f"the grammar names token {i} as a terminal, but this vocabulary holds it as ordinary text "
            f"{raw[i]!r}{more} (an added token that is not special): a token that is both a terminal and "
            "text is not decided exactly",
        )


def special_view(vocabulary: VocabularyLike) -> VocabularyLike:
    """The vocabulary a grammar that reads special tokens sees (:class:`SpecialView`); a vocabulary
    already lifted (``special_tokens_lifted``, e.g. ``tokenizers_matrix.Vocabulary.special_token_view``,
    built from a :class:`SpecialView`) is returned as it is."""
    return vocabulary if getattr(vocabulary, "special_tokens_lifted", False) else SpecialView(vocabulary)


class Terminated(State):
    """The state after EOS was accepted: no token (not even EOS) is allowed from it.

    Its stack set ``{()}`` is one the parser never builds (every stack it keeps has a top frame), so
    it equals no grammar state. Use the singleton :data:`TERMINATED`.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(frozenset({()}), False)

    def __repr__(self) -> str:
        return "TERMINATED"


TERMINATED: State = Terminated()


def num_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_ids(ids: Any, vocab_size: int) -> np.ndarray:
    """int32 bitmask ``[ceil(V/32)]`` with the bits of ``ids`` set (xgrammar's layout)."""
    bits = np.zeros(num_words(vocab_size) * 32, dtype=np.bool_)
    bits[np.asarray(ids, dtype=np.int64)] = True
    return _pack_bits(bits)


def _pack_bits(bits: np.ndarray) -> np.ndarray:
    """int32 words from one flag per token, 32 per word (a multiple of 32 flags)."""
    return np.packbits(bits, bitorder="little").view(_LE_I4).astype(np.int32, copy=False)


def unpack_mask(mask: np.ndarray, vocab_size: int) -> np.ndarray:
    """The sorted token ids whose bits are set in an int32 bitmask row."""
    words = np.ascontiguousarray(mask, dtype=np.int32).astype(_LE_I4, copy=False)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


# -- the vocabulary trie ----------------------------------------------------------------------------


class TokenTrie:
    """The byte trie of a vocabulary's text tokens, as flat preorder arrays (built by :func:`token_trie`).

    Node ``i`` (preorder; the root is implicit) reads byte ``label[i]`` at depth ``depth[i] >= 1``;
    ``skip[i]`` is one past its subtree, ``parent[i]`` is ``-1`` at depth 1. Tokens are sorted by
    bytes (ties by id): ``tok_ids[k]`` ends at node ``tok_node[k]``; the tokens ending at node ``i`` are
    ``tok_ids[tok_lo[i]:tok_hi[i]]``. Identical byte strings under several ids (byte-fallback tokens,
    duplicates) share a node.
    """

    def __init__(self, vocabulary: VocabularyLike) -> None:
        token_bytes = vocabulary.token_bytes
        self.vocab_size = len(token_bytes)
        self.num_words = num_words(self.vocab_size)
        self.eos_ids: tuple[int, ...] = tuple(sorted(set(vocabulary.eos_ids)))
        self.special_ids: frozenset[int] = frozenset(vocabulary.special_ids)
        excluded = self.special_ids | set(self.eos_ids)
        pairs = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in excluded)
        self.text_ids = frozenset(i for _, i in pairs)
        labels: list[int] = []
        depths: list[int] = []
        parents: list[int] = []
        skip: list[int] = []
        tok_node: list[int] = []
        path: list[int] = [-1]  # path[d] = node at depth d on the current branch
        prev = b""
        for data, _tid in pairs:
            if data == prev:
                tok_node.append(path[len(data)])
                continue
            lcp = 0
            m = min(len(data), len(prev))
            while lcp < m and data[lcp] == prev[lcp]:
                lcp += 1
            # Close the nodes of the previous branch below the common prefix.
            for d in range(len(prev), lcp, -1):
                skip[path[d]] = len(labels)
            del path[lcp + 1 :]
            for d in range(lcp + 1, len(data) + 1):
                path.append(len(labels))
                labels.append(data[d - 1])
                depths.append(d)
                parents.append(path[d - 1])
                skip.append(-1)
            tok_node.append(path[len(data)])
            prev = data
        for d in range(len(prev), 0, -1):
            skip[path[d]] = len(labels)
        n = len(labels)
        self.num_nodes = n
        self.max_depth = max(depths, default=0)
        self.label = np.asarray(labels, dtype=np.int64)
        self.depth = np.asarray(depths, dtype=np.int64)
        self.parent = np.asarray(parents, dtype=np.int64)
        self.skip = np.asarray(skip, dtype=np.int64)
        self.tok_ids = np.asarray([i for _, i in pairs], dtype=np.int64)
        self.tok_node = np.asarray(tok_node, dtype=np.int64)
        self.tok_lo = np.searchsorted(self.tok_node, np.arange(n), side="left")
        self.tok_hi = np.searchsorted(self.tok_node, np.arange(n), side="right")
        ends = np.zeros(n, dtype=np.bool_)
        ends[self.tok_node] = True
        # Python lists for the interpreter loops (list indexing beats numpy scalar access).
        self.label_l: list[int] = labels
        self.depth_l: list[int] = depths
        self.skip_l: list[int] = skip
        self.ends_l: list[bool] = ends.tolist()
        # Nodes of each depth, ascending (preorder) — the level structure for vectorized DFA runs.
        order = np.argsort(self.depth, kind="stable")
        bounds = np.searchsorted(self.depth[order], np.arange(self.max_depth + 2))
        self.by_depth: list[np.ndarray] = [
            order[bounds[d] : bounds[d + 1]] for d in range(self.max_depth + 1)
        ]
        self.level_parent = [self.parent[level] for level in self.by_depth]
        self.level_label = [self.label[level].astype(np.int32) for level in self.by_depth]
        # Each token's node as a position in the levels laid end to end (depth 0, the root, is empty).
        self.level_pos = np.empty(n, dtype=np.int64)  # each node's position in the levels end to end
        self.level_pos[order] = np.arange(n)
        self.tok_level_pos = self.level_pos[self.tok_node]
        # Each node's parent as a position in the level above (depth 1: the root, position 0).
        self.level_parent_pos = [
            np.searchsorted(self.by_depth[d - 1], self.level_parent[d]) if d > 1 else np.zeros_like(level)
            for d, level in enumerate(self.by_depth)
        ]
        self.root_child = [-1] * 256  # the depth-1 node of each byte
        for i in self.by_depth[1].tolist() if self.max_depth else []:
            self.root_child[labels[i]] = i
        self.eos_mask = pack_ids(list(self.eos_ids), self.vocab_size)
        self.lexeme_tables = _LexemeTables(self)

    def ids_at(self, nodes: Any) -> np.ndarray:
        """The token ids ending at any of ``nodes``, in token order (by bytes, then id).

        Few nodes (the usual case: the token-ending nodes a restricted walk found alive) gather the
        runs ``tok_ids[tok_lo[i]:tok_hi[i]]`` of the distinct nodes in preorder; many nodes mark them
        over the whole trie, which costs the same whatever their number. A test compares both with
        the definition."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if nodes.size * 16 < self.num_nodes:
            nodes = np.unique(nodes)
            lo = self.tok_lo[nodes]
            counts = self.tok_hi[nodes] - lo
            starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
            return self.tok_ids[starts + np.arange(int(counts.sum()))]
        mark = np.zeros(self.num_nodes, dtype=np.bool_)
        mark[nodes] = True
        return self.tok_ids[mark[self.tok_node]]

    def mask_at(self, nodes: Any) -> np.ndarray:
        """The bitmask of the tokens ending at any of ``nodes`` (:meth:`ids_at`)."""
        return pack_ids(self.ids_at(nodes), self.vocab_size)

    def pack_flags(self, flags: np.ndarray) -> np.ndarray:
        """The bitmask of the tokens whose flag is set, ``flags`` in token order: ``pack_ids`` of
        ``tok_ids[flags]``, scattered without gathering the ids first."""
        bits = np.zeros(self.num_words * 32, dtype=np.bool_)
        bits[self.tok_ids] = flags
        return _pack_bits(bits)

    def child(self, node: int, byte: int) -> int:
        """The child of ``node`` (``-1``: the root) labelled ``byte``, or ``-1``."""
        j = node + 1
        end = self.num_nodes if node < 0 else self.skip_l[node]
        labels, skip = self.label_l, self.skip_l
        while j < end:
            if labels[j] == byte:
                return j
            j = skip[j]
        return -1

    def nbytes(self) -> int:
        arrays = (self.label, self.depth, self.parent, self.skip, self.tok_ids, self.tok_node)
        return int(sum(a.nbytes for a in arrays)) + 3 * 8 * self.num_nodes


_TRIES: OrderedDict[Hashable, TokenTrie] = OrderedDict()
_TRIES_KEPT = 8


def vocabulary_key(vocabulary: VocabularyLike) -> Hashable:
    """Identity of what a trie depends on: the fingerprint (or a digest of the bytes) and the specials."""
    fp = getattr(vocabulary, "fingerprint", None)
    if not fp:
        h = hashlib.sha256()
        for b in vocabulary.token_bytes:
            h.update(b"\x00" if b is None else b"\x01" + len(b).to_bytes(4, "little") + b)
        fp = h.hexdigest()
    return (
        fp,
        len(vocabulary.token_bytes),
        tuple(sorted(set(vocabulary.eos_ids))),
        tuple(sorted(set(vocabulary.special_ids))),
    )


def token_trie(vocabulary: VocabularyLike) -> TokenTrie:
    """The trie of ``vocabulary``, built once per vocabulary key (a small LRU of the last few)."""
    key = vocabulary_key(vocabulary)
    trie = _TRIES.get(key)
    if trie is None:
        trie = TokenTrie(vocabulary)
        _TRIES[key] = trie
        if len(_TRIES) > _TRIES_KEPT:
            _TRIES.popitem(last=False)
    else:
        _TRIES.move_to_end(key)
    return trie


# -- lexeme tables (fast path 2) ---------------------------------------------------------------------


@dataclass(frozen=True)
class _LexTable:
    accepted: np.ndarray  # int32 words: tokens every byte of which the DFA reads from q
    uncertain: tuple[tuple[int, int], ...]  # preorder node intervals the parser must walk
    num_uncertain: int  # tokens in the uncertain class (a statistic)

    def nbytes(self) -> int:
        return int(self.accepted.nbytes) + 64 * len(self.uncertain) + 64


#: ``_LexemeTables._build_shared`` shares the subtrees below the nodes of a level (at depth at most
#: :attr:`_LexemeTables.share_depth`) that at least this many nodes of that level reach in one DFA state,
#: and names that state's language by its own ByteDFA's key (:meth:`ByteDFA.residual_key`) when at most
#: :data:`_RESIDUAL_CAP` states are reachable from it (a search costs about 10 us per state): the "rest of
#: any string" state of a key DFA, not the few states of known keys' letters.
_SHARED_FIRSTS = 4
_RESIDUAL_CAP = 32


class _Memo:
    """The classes of the tokens below the nodes of one depth ``d`` that a DFA entered in a state of one
    language, with one passed bit (see ``_LexemeTables._build_shared``): they depend on nothing else.
    ``done[k]``: the classes below the node at position ``k`` of level ``d`` are known; then ``alive``
    (per token, in token order) holds them for the tokens in its subtree (True for the tokens ending at
    the node itself: the DFA read it to enter that state), and ``roots`` (sorted) holds the uncertain
    roots below it."""

    __slots__ = ("done", "alive", "roots")

    def __init__(self, level_size: int, num_tokens: int) -> None:
        self.done = np.zeros(level_size, dtype=np.bool_)
        self.alive = np.zeros(num_tokens, dtype=np.bool_)
        self.roots = np.zeros(0, dtype=np.int64)

    def nbytes(self) -> int:
        return int(self.done.nbytes + self.alive.nbytes + self.roots.nbytes) + 100


class _Entries:
    """The shared subtrees of one build (``_LexemeTables._build_shared``): per memo, the level and
    the level positions of the entry nodes whose subtrees it already knows (pruned from the level run,
    then copied in), and of those it learns from this run."""

    def __init__(self, tables: _LexemeTables, dfa: ByteDFA) -> None:
        self.tables = tables
        self.dfa = dfa
        self.kept: list[tuple[_Memo, int, np.ndarray]] = []
        self.fresh: list[tuple[_Memo, int, np.ndarray]] = []
        self._fresh_nodes = np.zeros(0, dtype=np.int64)  # the nodes of every fresh entry, ascending
        self._states: set[int] = set()  # the DFA states of the entries of level 1

    def prune(self, d: int, level: np.ndarray, code: np.ndarray) -> np.ndarray:
        """``code`` (level ``d``'s codes) with the nodes whose subtrees a memo knows made dead: the
        entries of every state at least :data:`_SHARED_FIRSTS` nodes of the level are in (below level
        1, only the states of level 1's entries: a key DFA's "rest of any string" after a known key's
        letter, without naming the many states of a large DFA). The others are fresh, except below a
        fresh entry (its memo learns them with it)."""
        counts = np.bincount(code)
        common = np.flatnonzero(counts[1:] >= _SHARED_FIRSTS) + 1 if counts.size > 1 else counts[:0]
        out = code
        added = False
        for c in common.tolist():
            if d == 1:
                self._states.add(c // 2 - 1)
            elif c // 2 - 1 not in self._states:
                continue
            pos = np.flatnonzero(code == c)
            memo = self.tables._memo((self.tables._language(self.dfa, c // 2 - 1), c & 1, d))
            done = memo.done[pos]
            if done.any():
                if out is code:
                    out = code.copy()
                out[pos[done]] = 0
                self.kept.append((memo, d, pos[done]))
                pos = pos[~done]
            if d > 1 and pos.size and self._fresh_nodes.size:
                pos = pos[~self.tables._under(level[pos], self._fresh_nodes)]
            if pos.size:
                self.fresh.append((memo, d, pos))
                added = True
        if added:
            self._fresh_nodes = np.sort(
                np.concatenate([self.tables.trie.by_depth[k][p] for _, k, p in self.fresh])
            )
        return out


class _LexemeTables:
    """Per ``(ByteDFA key, DFA state)`` token classes over one trie, in an LRU bounded by bytes."""

    def __init__(self, trie: TokenTrie, max_bytes: int = 256 << 20) -> None:
        self.trie = trie
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._tables: OrderedDict[tuple[Hashable, Hashable], _LexTable] = OrderedDict()
        self._dfa_codes: dict[Hashable, np.ndarray] = {}
        self._codes_bytes = 0
        self._alphabets: dict[frozenset[int], tuple[list[int], list[int], np.ndarray, np.ndarray]] = {}
        self.share_depth = 3  # see _build_shared
        self._memos: dict[tuple[Hashable, int, int], _Memo] = {}  # see _build_shared
        self._memos_bytes = 0
        self._languages: dict[tuple[Hashable, int], Hashable] = {}  # see _language

    def get(self, dfa: ByteDFA, q: int) -> _LexTable:
        return self._lookup((dfa.key, q), lambda: self._build(dfa, q))

    def _lookup(self, key: tuple[Hashable, Hashable], build: Callable[[], _LexTable]) -> _LexTable:
        """The table under ``key``, built on a miss (LRU, bounded in bytes)."""
        table = self._tables.get(key)
        if table is not None:
            self.hits += 1
            self._tables.move_to_end(key)
            return table
        self.misses += 1
        table = build()
        self._tables[key] = table
        self.bytes += table.nbytes()
        while self.bytes > self.max_bytes and len(self._tables) > 1:
            _, old = self._tables.popitem(last=False)
            self.bytes -= old.nbytes()
        return table

    def _codes(self, dfa: ByteDFA) -> np.ndarray:
        """``dfa``'s table over *codes*, flat: code ``2 * (s + 1) + p`` is DFA state ``s`` with ``p`` = 1
        when a final state was passed at depth >= 1; code 0 is dead (1 is never used). Row ``c`` maps
        each byte to the next code: 0 where the DFA dies, and dead stays dead. Cached per DFA, bounded in
        bytes (a table larger than a quarter of the budget is built for each use)."""
        codes = self._dfa_codes.get(dfa.key)
        if codes is None:
            raw = dfa._table  # the package's own DFA: read its table directly
            nxt = np.frombuffer(raw, dtype=np.int32) if raw.itemsize == 4 else np.asarray(raw.tolist())
            nxt = nxt.reshape(-1, 256)
            final1 = np.zeros(dfa.num_states + 1, dtype=np.int32)  # by state + 1 (0: dead)
            final1[[s + 1 for s in dfa.finals]] = 1
            nxt1 = nxt.astype(np.int32) + 1  # 0 where the DFA dies
            to = 2 * nxt1  # 0 where it dies
            table = np.zeros((2 * (dfa.num_states + 1), 256), dtype=np.int32)
            table[2::2] = to + final1[nxt1]  # nothing passed yet: passed if the next state is final
            table[3::2] = to + (nxt1 > 0)  # a final state was passed
            codes = table.reshape(-1)
            if codes.nbytes <= self.max_bytes // 4:
                if self._codes_bytes + codes.nbytes > self.max_bytes // 4:
                    self._dfa_codes.clear()
                    self._codes_bytes = 0
                self._dfa_codes[dfa.key] = codes
                self._codes_bytes += codes.nbytes
        return codes

    def _build(self, dfa: ByteDFA, q: int, few_nodes: int = 3000, share: bool = True) -> _LexTable:
        """Run the trie through ``dfa`` from ``q``. With few first bytes (a key's DFA), a preorder walk
        from the root through the DFA's own table (:meth:`_walk_codes`). Otherwise level by level
        (:meth:`_levels`); with ``share``, the subtrees below the nodes of the first levels are run
        only when no earlier build ran them from a state reading the same language
        (:meth:`_build_shared`). A test compares every way with :meth:`_build_lexeme_walk`."""
        trie = self.trie
        firsts = dfa.live_bytes(q)
        if len(firsts) <= 16:  # few first bytes (a key's DFA): try a walk from the root
            tops = [(trie.root_child[b], dfa._table[q * 256 + b]) for b in firsts]
            tops = [(f, t) for f, t in tops if f >= 0]
            walked = [f for f, _ in tops]  # read entirely: the DFA reads their byte
            codes = [2 * (t + 1) + (t in dfa.finals) for _, t in tops]
            found = self._walk_codes(dfa, walked[:], codes, walked, few_nodes)
            if found is not None:
                return self._table(trie.mask_at(walked), np.asarray(found, dtype=np.int64))
        table = self._codes(dfa)
        code1 = table[((2 * (q + 1)) << 8) | trie.level_label[1]] if trie.max_depth else np.zeros(0, np.int32)
        if share:
            return self._build_shared(dfa, table, code1, few_nodes)
        alive_at, roots = self._levels(dfa, table, code1, few_nodes)
        return self._table(trie.pack_flags(alive_at[trie.tok_level_pos]), roots)

    def _build_shared(self, dfa: ByteDFA, table: np.ndarray, code1: np.ndarray, few_nodes: int) -> _LexTable:
        """:meth:`_levels`, not running the subtrees an earlier build ran from the same language. The
        classes of the tokens strictly below a node at depth ``d`` that the DFA reaches in state ``s``
        with passed bit ``p`` depend only on ``(language of s, p, d)``: a :class:`_Memo` under that key
        keeps them. At each level down to :attr:`share_depth`, the nodes of the states that at least
        :data:`_SHARED_FIRSTS` nodes of the level are in (a key DFA: the "rest of any string" state
        after most bytes) are entries (:class:`_Entries`); the subtrees a memo knows are pruned from
        the run and copied in, and the memo learns the others from the finished run. The language is
        named by :meth:`_language` (:meth:`ByteDFA.residual_key`: the same name in every DFA)."""
        trie = self.trie
        entries = _Entries(self, dfa)
        alive_at, roots = self._levels(dfa, table, code1, few_nodes, entries)
        alive_tok = alive_at[trie.tok_level_pos]  # per token, in token order
        parts = [roots]
        for memo, d, pos in entries.kept:  # disjoint subtrees, none inside another's (pruned)
            for a, b in self._runs(d, pos):
                alive_tok[a:b] = memo.alive[a:b]
            parts.append(memo.roots[self._under(memo.roots, trie.by_depth[d][pos])])
        roots = np.sort(np.concatenate(parts))
        for memo, d, pos in entries.fresh:  # their subtrees are final now, kept ones copied in
            for a, b in self._runs(d, pos):
                memo.alive[a:b] = alive_tok[a:b]
            memo.done[pos] = True
            grown = np.sort(np.concatenate([memo.roots, roots[self._under(roots, trie.by_depth[d][pos])]]))
            self._memos_bytes += grown.nbytes - memo.roots.nbytes
            memo.roots = grown
        return self._table(trie.pack_flags(alive_tok), roots)

    def _runs(self, d: int, pos: np.ndarray) -> list[tuple[int, int]]:
        """The token ranges (token order) of the subtrees of the nodes at positions ``pos`` (ascending)
        of level ``d``: one range per run of consecutive siblings, whose subtrees are one preorder
        interval."""
        trie = self.trie
        if not pos.size:
            return []
        brk = np.flatnonzero((np.diff(pos) != 1) | (np.diff(trie.level_parent[d][pos]) != 0)) + 1
        first = trie.by_depth[d][pos[np.concatenate(([0], brk))]]
        last = trie.by_depth[d][pos[np.concatenate((brk - 1, [pos.size - 1]))]]
        lo = np.searchsorted(trie.tok_node, first)
        hi = np.searchsorted(trie.tok_node, trie.skip[last])
        return list(zip(lo.tolist(), hi.tolist(), strict=True))

    def _under(self, roots: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Which of ``roots`` lie strictly below one of ``nodes`` (both ascending, subtrees disjoint)."""
        if not roots.size or not nodes.size:
            return np.zeros(roots.size, dtype=np.bool_)
        j = np.searchsorted(nodes, roots, side="right") - 1
        jc = np.maximum(j, 0)
        return (j >= 0) & (roots > nodes[jc]) & (roots < self.trie.skip[nodes[jc]])

    def _language(self, dfa: ByteDFA, state: int) -> Hashable:
        """A name for the language ``dfa`` reads from ``state``: the key of its own ByteDFA when at most
        :data:`_RESIDUAL_CAP` states are reachable (the same name in every DFA that reads it); past the
        cap, the DFA and the state. Cached per DFA state."""
        got = self._languages.get((dfa.key, state))
        if got is None:
            got = dfa.residual_key(state, _RESIDUAL_CAP) or (dfa.key, state)
            if len(self._languages) >= 1 << 16:
                self._languages.clear()
            self._languages[(dfa.key, state)] = got
        return got

    def _memo(self, key: tuple[Hashable, int, int]) -> _Memo:
        """The memo under ``key`` (language, passed bit, depth), made empty on first use; all are dropped when they would pass a
        quarter of the budget."""
        memo = self._memos.get(key)
        if memo is None:
            memo = _Memo(self.trie.by_depth[key[2]].size, self.trie.tok_node.size)
            if self._memos_bytes + memo.nbytes() > self.max_bytes // 4:
                self._memos.clear()
                self._memos_bytes = 0
            self._memos[key] = memo
            self._memos_bytes += memo.nbytes()
        return memo

    def _levels(
        self,
        dfa: ByteDFA,
        table: np.ndarray,
        code1: np.ndarray,
        few_nodes: int,
        entries: _Entries | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Run the trie through ``dfa`` level by level from the depth-1 codes ``code1`` (:meth:`_codes`:
        each node's DFA state, or dead, and whether a final state was passed at depth >= 1): which
        nodes the DFA reads (in ``trie.by_depth`` order, end to end) and the roots of the subtrees where
        it died after passing a final state. A level is computed densely (every node, through its
        parent's position in the level above) or, when few nodes of the level above are alive, sparsely
        (only the children of the live ones): the same codes either way. Once the live nodes' subtrees
        hold at most ``few_nodes`` nodes in all, those subtrees are finished by a preorder walk
        (:meth:`_walk_codes`), which costs per node visited rather than per level. With ``entries``,
        the nodes of the first levels whose subtrees are known are read but not run below
        (:meth:`_build_shared`)."""
        trie = self.trie
        alive_levels: list[np.ndarray] = []  # per level, in trie.by_depth order: the DFA read the node
        uncertain_parts: list[np.ndarray] = []  # nodes where the DFA died after passing a final state
        walked: list[int] = []  # nodes below the levels, read entirely (found by _walk_codes)
        code = code1  # given; the root passed no final state, so no depth-1 node is uncertain
        live = code1.size
        for d in range(1, trie.max_depth + 1):
            level = trie.by_depth[d]
            if d == 1:
                pass
            elif 4 * live >= level.size:
                parent = code[trie.level_parent_pos[d]]
                c = table[(parent << 8) | trie.level_label[d]]
                dead = np.flatnonzero(c == 0)
                uncertain_parts.append(level[dead[parent[dead] & 1 == 1]])
                code = c
            else:
                # Sparse: the children of live node f are the level's nodes in (f, skip[f]).
                f_pos = np.flatnonzero(code)
                f_nodes = trie.by_depth[d - 1][f_pos]
                lo = np.searchsorted(level, f_nodes + 1)
                hi = np.searchsorted(level, trie.skip[f_nodes])
                counts = hi - lo
                pos = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
                parent = np.repeat(code[f_pos], counts)
                c = table[parent * 256 + trie.level_label[d][pos]]
                uncertain_parts.append(level[pos[(c == 0) & (parent & 1 == 1)]])
                code = np.zeros(level.size, dtype=np.int32)
                code[pos] = c
            alive = code > 0
            alive_levels.append(alive)
            if entries is not None and d <= self.share_depth:
                code = entries.prune(d, level, code)  # read, but their subtrees are known
                alive = code > 0
            live = int(np.count_nonzero(alive))
            if live == 0:
                break
            if live <= 64:
                f_pos = np.flatnonzero(alive)
                f_nodes = level[f_pos]
                if int((trie.skip[f_nodes] - f_nodes).sum()) <= few_nodes:  # a walk visits fewer
                    below = self._walk_codes(dfa, f_nodes.tolist(), code[f_pos].tolist(), walked, few_nodes)
                    assert below is not None
                    uncertain_parts.append(np.asarray(below, dtype=np.int64))
                    break
        alive_at = np.zeros(trie.num_nodes, dtype=np.bool_)  # in by_depth order (depth 0 is empty)
        if alive_levels:
            done = np.concatenate(alive_levels)
            alive_at[: done.size] = done
        alive_at[trie.level_pos[walked]] = True
        roots = np.concatenate(uncertain_parts) if uncertain_parts else np.zeros(0, dtype=np.int64)
        return alive_at, roots

    def _walk_codes(
        self, dfa: ByteDFA, nodes: list[int], codes: list[int], alive: list[int], budget: int
    ) -> list[int] | None:
        """Preorder walk of the subtrees below ``nodes``, each one entered with its code
        (:meth:`_codes`), through ``dfa``'s own table: appends the nodes the DFA reads to ``alive`` and
        returns the roots of the subtrees where it died after passing a final state; None (``alive``
        then partly filled) once it has visited more than ``budget`` nodes."""
        trie = self.trie
        labels, depths, skips = trie.label_l, trie.depth_l, trie.skip_l
        table, finals = dfa._table, dfa.finals
        st = [0] * (trie.max_depth + 1)
        passed = [False] * (trie.max_depth + 1)  # a final state was passed at depth >= 1
        roots: list[int] = []
        for f, c in zip(nodes, codes, strict=True):
            st[depths[f]], passed[depths[f]] = c // 2 - 1, c & 1 == 1
            i, end = f + 1, skips[f]
            while i < end:
                budget -= 1
                if budget < 0:
                    return None
                d = depths[i]
                t = table[st[d - 1] * 256 + labels[i]]
                if t < 0:
                    if passed[d - 1]:
                        roots.append(i)
                    i = skips[i]
                    continue
                st[d] = t
                passed[d] = passed[d - 1] or t in finals
                alive.append(i)
                i += 1
        return roots

    def get_lexeme(self, lexeme: Any, q: Hashable) -> _LexTable:
        """The classes of a lexeme that is not a byte table but declares them shareable
        (``token_tables``: its ``key`` and state say everything its steps depend on), e.g. numbers
        under bounds; built by a plain trie walk over the lexeme alone."""
        return self._lookup((lexeme.key, q), lambda: self._build_lexeme(lexeme, q))

    def _build_lexeme(self, lexeme: Any, q: Hashable) -> _LexTable:
        """:meth:`_build_lexeme_walk`'s table, walking only the nodes a lexeme declaring its
        ``alphabet`` (the bytes ``step`` can ever read, e.g. a number's digits, signs, point and
        exponents) can read: the sub-trie of nodes whose whole path is in the alphabet
        (:meth:`_alphabet_subtrie`). Every other node is dead on its first byte outside the
        alphabet, so it is the root of an uncertain subtree exactly where its parent is alive and
        has passed a final state, which one ``isin`` over the precomputed outside children finds.
        A test compares this with the plain walk."""
        alphabet = getattr(lexeme, "alphabet", None)
        if alphabet is None:
            return self._build_lexeme_walk(lexeme, q)
        sub, sub_skip, outside, outside_parent = self._alphabet_subtrie(frozenset(alphabet))
        alive, roots, passed_alive = self._walk_lexeme(lexeme, q, sub, sub_skip)
        extra = outside[np.isin(outside_parent, np.asarray(passed_alive, dtype=np.int64))]
        return self._table(
            self.trie.mask_at(alive),
            np.concatenate([np.asarray(roots, dtype=np.int64), extra]),
        )

    def _alphabet_subtrie(
        self, alphabet: frozenset[int]
    ) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
        """For one alphabet: the nodes whose every byte from the root is in it (preorder), each one's
        skip within that list, and the nodes outside it whose parent is in it, with those parents."""
        known = self._alphabets.get(alphabet)
        if known is None:
            trie = self.trie
            readable = np.zeros(256, dtype=np.bool_)
            readable[sorted(alphabet)] = True
            inside = np.zeros(trie.num_nodes, dtype=np.bool_)
            under = np.zeros(trie.num_nodes, dtype=np.bool_)  # the parent is inside
            for d in range(1, trie.max_depth + 1):
                level, parent = trie.by_depth[d], trie.level_parent[d]
                par_in = np.ones(level.shape, dtype=np.bool_) if d == 1 else inside[parent]
                inside[level] = par_in & readable[trie.level_label[d]]
                under[level] = par_in & (d > 1)
            sub = np.flatnonzero(inside)
            sub_skip = np.searchsorted(sub, trie.skip[sub])
            outside = np.flatnonzero(under & ~inside)
            known = (sub.tolist(), sub_skip.tolist(), outside, trie.parent[outside])
            self._alphabets[alphabet] = known
        return known

    def _build_lexeme_walk(self, lexeme: Any, q: Hashable) -> _LexTable:
        """Preorder walk of the whole trie through ``lexeme`` from ``q``: the same three classes as
        :meth:`_build` (module doc, fast path 2), for any trim lexeme. The definition
        :meth:`_build_lexeme` is checked against."""
        trie = self.trie
        alive, roots, _ = self._walk_lexeme(lexeme, q, range(trie.num_nodes), trie.skip_l)
        return self._table(trie.mask_at(alive), np.asarray(roots, dtype=np.int64))

    def _walk_lexeme(
        self, lexeme: Any, q: Hashable, nodes: Sequence[int], skip_to: Sequence[int]
    ) -> tuple[list[int], list[int], list[int]]:
        """Preorder walk through ``lexeme`` from ``q`` over ``nodes`` (trie nodes in preorder, each
        one's parent among them; ``skip_to[k]``: the position past node ``nodes[k]``'s subtree): the
        nodes it reads entirely (alive), the roots of subtrees where it died after passing a final
        state, and the alive nodes past a final state."""
        trie = self.trie
        labels, depths = trie.label_l, trie.depth_l
        step, is_final = lexeme.step, lexeme.is_final
        st: list[Hashable] = [q] * (trie.max_depth + 1)
        passed = [False] * (trie.max_depth + 1)  # a final state was passed at depth >= 1
        alive: list[int] = []
        roots: list[int] = []
        passed_alive: list[int] = []
        k, m = 0, len(nodes)
        while k < m:
            i = nodes[k]
            d = depths[i]
            nxt = step(st[d - 1], labels[i])
            if nxt is None:
                if passed[d - 1]:
                    roots.append(i)
                k = skip_to[k]
                continue
            st[d] = nxt
            p = passed[d] = passed[d - 1] or is_final(nxt)
            alive.append(i)
            if p:
                passed_alive.append(i)
            k += 1
        return alive, roots, passed_alive

    def _table(self, accepted: np.ndarray, roots: np.ndarray) -> _LexTable:
        """A table from the tokens the lexeme reads entirely (accepted, a bitmask) and the roots of the subtrees
        where it died after passing a final state (uncertain: walked with the parser, with the
        ancestors the walk must pass through)."""
        trie = self.trie
        intervals: list[tuple[int, int]] = []
        n_unc = 0
        if roots.size:
            roots.sort()
            ends = trie.skip[roots]
            n_unc = int((np.searchsorted(trie.tok_node, ends) - np.searchsorted(trie.tok_node, roots)).sum())
            # Ancestors of uncertain subtrees: the walk must pass through them to reach the subtrees.
            anc_parts = []
            cur = np.unique(trie.parent[roots])
            cur = cur[cur >= 0]
            while cur.size:
                anc_parts.append(cur)
                cur = np.unique(trie.parent[cur])
                cur = cur[cur >= 0]
            ancestors = np.unique(np.concatenate(anc_parts)) if anc_parts else cur
            intervals = _merge(
                list(zip(roots.tolist(), ends.tolist(), strict=True))
                + [(a, a + 1) for a in ancestors.tolist()]
            )
        accepted.flags.writeable = False
        return _LexTable(accepted, tuple(intervals), n_unc)

    def clear(self) -> None:
        self._tables.clear()
        self._dfa_codes.clear()
        self._codes_bytes = 0
        self._alphabets.clear()
        self._memos.clear()
        self._memos_bytes = 0
        self._languages.clear()
        self.bytes = 0


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    intervals.sort()
    out: list[tuple[int, int]] = []
    for a, e in intervals:
        if out and a <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((a, e))
    return out


# -- TokenGrammar ------------------------------------------------------------------------------------


class TokenGrammar:
    """A :class:`Grammar` over a vocabulary: token masks and token steps, for any number of matchers.

    ``mask(state)`` returns a read-only int32 array ``[ceil(V/32)]`` (copy it to modify). EOS bits are
    set iff the state is accepting; after EOS (``advance`` returns :data:`TERMINATED`) the mask is
    empty. ``lexeme_tables`` / ``cache_bytes=0`` switch fast paths off (tests compare every
    combination with :meth:`mask_bruteforce`).
    """

    def __init__(
        self,
        grammar: Grammar,
        vocabulary: VocabularyLike,
        *,
        cache_bytes: int = 256 << 20,
        lexeme_tables: bool = True,
        max_interned_states: int = 65_536,
    ) -> None:
        self.grammar = grammar
        self.vocabulary = vocabulary
        # what the grammar reads: special tokens as their encodings when it names any (``_special``)
        self.reads_special_tokens = grammar.reads_special_tokens
        if self.reads_special_tokens:
            refuse_text_terminals(grammar, vocabulary)
        lifted = special_view(vocabulary) if self.reads_special_tokens else vocabulary
        self.trie = token_trie(lifted)
        self.vocab_size = self.trie.vocab_size
        self.num_words = self.trie.num_words
        self.eos_ids = self.trie.eos_ids
        self.use_lexeme_tables = lexeme_tables
        self.cache_bytes = cache_bytes
        self.max_interned_states = max_interned_states
        self._token_bytes: tuple[bytes | None, ...] = tuple(lifted.token_bytes)
        self._text_ids = self.trie.text_ids
        self._zero = np.zeros(self.num_words, dtype=np.int32)
        self._zero.flags.writeable = False
        self._cache: OrderedDict[State, np.ndarray] = OrderedDict()
        self._cache_used = 0
        self._stats = {
            "hits": 0,
            "misses": 0,
            "lexeme_path": 0,
            "full_walks": 0,
            "walked_nodes": 0,
            "resets": 0,
        }
        self._reset_interning()

    # -- interned parser states -----------------------------------------------------------------
    def _reset_interning(self) -> None:
        self._sid: dict[State, int] = {}
        self._states: list[State] = []
        self._rows: list[list[int]] = []
        self._primed: list[bool] = []  # the row's unreadable bytes are already _DEAD
        self._by_key: list[dict[Hashable, int] | None] = []  # per state: step key -> filled result

    def _intern(self, state: State) -> int:
        sid = self._sid.get(state)
        if sid is None:
            sid = len(self._states)
            self._sid[state] = sid
            self._states.append(state)
            self._rows.append([_UNKNOWN] * 256)
            self._primed.append(False)
            self._by_key.append(None)
        return sid

    def _fill(self, sid: int, byte: int) -> int:
        """Compute the transition of ``sid`` on ``byte``. The first fill of a row also marks dead
        every byte outside the state's ``readable_bound``, so a walk passes the many dead children of
        a trie node (most bytes after a closing quote) without parser steps; a byte whose
        ``step_key`` an earlier byte of the row had takes that byte's result without a parser step."""
        grammar, state = self.grammar, self._states[sid]
        if not self._primed[sid]:
            self._primed[sid] = True
            bound = grammar.readable_bound(state)
            if bound is not None:
                row = self._rows[sid]
                primed = [_DEAD] * 256
                for b in bound:
                    primed[b] = row[b]
                self._rows[sid] = primed
                if primed[byte] == _DEAD:
                    return _DEAD
        by_key = self._by_key[sid]
        if by_key is None:
            by_key = self._by_key[sid] = {}
        key = grammar.step_key(state, byte)
        n = by_key.get(key)
        if n is None:
            nxt = grammar.advance_byte(state, byte)
            n = by_key[key] = _DEAD if nxt is None else self._intern(nxt)
        self._rows[sid][byte] = n
        return n

    def _maybe_reset(self) -> None:
        if len(self._states) > self.max_interned_states:
            self._stats["resets"] += 1
            self._reset_interning()

    # -- single tokens --------------------------------------------------------------------------
    def initial(self) -> State:
        return self.grammar.initial()

    def token_bytes(self, token_id: int) -> bytes | None:
        if 0 <= token_id < len(self._token_bytes):
            return self._token_bytes[token_id]
        return None

    def check(self, state: State, token_id: int) -> tuple[State | None, str, int | None]:
        """``(next_state, "", None)`` if ``token_id`` is allowed, else ``(None, reason, byte_offset)``."""
        if state is TERMINATED:
            return None, "the sequence already ended with EOS", None
        if not 0 <= token_id < self.vocab_size:
            return None, f"token id out of range [0, {self.vocab_size})", None
        if token_id in self.eos_ids:
            if state.accepting:
                return TERMINATED, "", None
            return None, "EOS in a state that is not accepting", None
        if token_id not in self._text_ids:
            if token_id in self.trie.special_ids:
                if self.reads_special_tokens:
                    return None, "a raw 0xFF byte: it only marks special tokens, and this token is text", None
                return None, "special token is never text", None
            return None, "token has empty bytes", None
        self._maybe_reset()
        data = self._token_bytes[token_id]
        assert data
        sid = self._intern(state)
        rows = self._rows
        for k, b in enumerate(data):
            n = rows[sid][b]
            if n == _UNKNOWN:
                n = self._fill(sid, b)
            if n < 0:
                return None, "the grammar has no continuation with these bytes", k
            sid = n
        return self._states[sid], "", None

    def advance(self, state: State, token_id: int) -> State | None:
        """The state after ``token_id``, :data:`TERMINATED` for EOS in an accepting state, else None."""
        return self.check(state, token_id)[0]

    def is_allowed(self, state: State, token_id: int) -> bool:
        return self.check(state, token_id)[0] is not None

    # -- masks ------------------------------------------------------------------------------------
    def mask(self, state: State) -> np.ndarray:
        """The allowed-token bitmask of ``state`` (read-only; xgrammar's layout)."""
        if state is TERMINATED:
            return self._zero
        if self.cache_bytes > 0:
            hit = self._cache.get(state)
            if hit is not None:
                self._stats["hits"] += 1
                self._cache.move_to_end(state)
                return hit
        self._stats["misses"] += 1
        words = self._compute(state)
        words.flags.writeable = False
        if self.cache_bytes > 0:
            self._cache[state] = words
            self._cache_used += words.nbytes + 200
            while self._cache_used > self.cache_bytes and self._cache:
                _, old = self._cache.popitem(last=False)
                self._cache_used -= old.nbytes + 200
        return words

    def allowed_ids(self, state: State) -> list[int]:
        return [int(i) for i in unpack_mask(self.mask(state), self.vocab_size)]

    def fill_batch(self, states: Sequence[State], out: Any) -> None:
        """Write ``mask(states[b])`` into row ``b`` of ``out`` (numpy int32 ``[B, W]`` or a torch tensor)."""
        shape = tuple(out.shape)
        if len(shape) != 2 or shape[0] < len(states) or shape[1] != self.num_words:
            raise StateError(
                f"fill_batch: out has shape {shape}; expected [>= {len(states)}, {self.num_words}] int32"
            )
        if isinstance(out, np.ndarray):
            if out.dtype != np.int32:
                raise StateError(f"fill_batch: out has dtype {out.dtype}; expected int32")
            for b, s in enumerate(states):
                out[b] = self.mask(s)
            return
        import torch  # a torch tensor: copy rows through a pinned-free CPU buffer

        if out.dtype != torch.int32:
            raise StateError(f"fill_batch: out has dtype {out.dtype}; expected torch.int32")
        buf = np.stack([self.mask(s) for s in states]) if states else np.zeros((0, self.num_words), np.int32)
        out[: len(states)].copy_(torch.from_numpy(buf))

    def mask_bruteforce(self, state: State) -> np.ndarray:
        """The definition, token by token with ``grammar.advance`` (slow; the oracle for tests)."""
        if state is TERMINATED:
            return np.zeros(self.num_words, dtype=np.int32)
        g = self.grammar
        ids = [t for t in sorted(self._text_ids) if g.advance(state, self._token_bytes[t] or b"") is not None]
        if state.accepting:
            ids.extend(self.eos_ids)
        return pack_ids(ids, self.vocab_size)

    def mask_walk(self, state: State) -> np.ndarray:
        """The plain trie walk, no table or cache (for tests and benchmarks)."""
        if state is TERMINATED:
            return np.zeros(self.num_words, dtype=np.int32)
        self._maybe_reset()
        nodes = self._walk(self._intern(state), None)
        return self._finish(state, None, nodes)

    def _compute(self, state: State) -> np.ndarray:
        self._maybe_reset()
        sid = self._intern(state)
        tops = self._dfa_tops(state) if self.use_lexeme_tables else None
        if tops is None:
            self._stats["full_walks"] += 1
            return self._finish(state, None, self._walk(sid, None))
        self._stats["lexeme_path"] += 1
        tables = self.trie.lexeme_tables
        acc: np.ndarray | None = None
        intervals: list[tuple[int, int]] = []
        for lexeme, q in tops:
            if isinstance(lexeme, ByteDFA):
                assert isinstance(q, int)  # a byte table's states are ints
                t = tables.get(lexeme, q)
            else:
                t = tables.get_lexeme(lexeme, q)
            acc = t.accepted.copy() if acc is None else np.bitwise_or(acc, t.accepted, out=acc)
            intervals.extend(t.uncertain)
        nodes = self._walk(sid, _merge(intervals) if len(tops) > 1 else intervals) if intervals else []
        return self._finish(state, acc, nodes)

    def _finish(self, state: State, acc: np.ndarray | None, nodes: list[int]) -> np.ndarray:
        words = np.zeros(self.num_words, dtype=np.int32) if acc is None else acc
        if nodes:
            np.bitwise_or(words, pack_ids(self.trie.ids_at(nodes), self.vocab_size), out=words)
        if state.accepting:
            np.bitwise_or(words, self.trie.eos_mask, out=words)
        return words

    def _dfa_tops(self, state: State) -> list[tuple[Any, Hashable]] | None:
        """Distinct ``(lexeme, q)`` tops of the stacks of ``state`` that have tables — a ByteDFA (or
        a lexeme's ``dfa_view`` of one) or a lexeme declaring ``token_tables``; None if some top has none."""
        nodes = self.grammar.network.nodes
        seen: dict[tuple[int, Any], None] = {}
        for stack in state.stacks:
            seen[stack[-1]] = None
        out: list[tuple[Any, Hashable]] = []
        for node_id, local in seen:
            node = nodes[node_id]
            if not isinstance(node, Lex):
                return None
            if isinstance(node.lexeme, ByteDFA):
                out.append((node.lexeme, local))
                continue
            view = getattr(node.lexeme, "dfa_view", None)  # a lexeme that runs a ByteDFA inside
            top = view(local) if view is not None else None
            if top is None:
                if not getattr(node.lexeme, "token_tables", False):
                    return None
                top = (node.lexeme, local)
            out.append(top)
        return out

    def _walk(
        self, root_sid: int, intervals: list[tuple[int, int]] | None, reached: list[int] | None = None
    ) -> list[int]:
        """Preorder trie walk from ``root_sid``; the token-ending nodes whose prefix stays viable (with
        ``reached``, the interned state each of them leads to is appended to it, in the same order).

        With ``intervals`` (sorted, disjoint preorder ranges that include every needed ancestor) only
        those ranges are visited; a dead node still skips its whole subtree across ranges.
        """
        trie = self.trie
        labels, depths, skips, ends = trie.label_l, trie.depth_l, trie.skip_l, trie.ends_l
        rows = self._rows
        fill = self._fill
        st = [root_sid] * (trie.max_depth + 1)
        out: list[int] = []
        spans = [(0, trie.num_nodes)] if intervals is None else intervals
        visited = 0
        i = 0
        for a, e in spans:
            if i < a:
                i = a
            while i < e:
                d = depths[i]
                b = labels[i]
                p = st[d - 1]
                n = rows[p][b]
                if n == _UNKNOWN:
                    n = fill(p, b)
                visited += 1
                if n < 0:
                    i = skips[i]
                    continue
                st[d] = n
                if ends[i]:
                    out.append(i)
                    if reached is not None:
                        reached.append(n)
                i += 1
        self._stats["walked_nodes"] += visited
        return out

    # -- jump-forward -----------------------------------------------------------------------------
    def forced_tokens(self, state: State, limit: int = 4096) -> list[int]:
        """Greedy longest-match tokenization of ``grammar.forced_bytes(state)``.

        From the start of the forced bytes, repeatedly take the longest text token whose bytes are a
        prefix of what remains (the smallest id among tokens with the same bytes), and stop where no
        token fits. Each returned token is allowed in turn (every prefix of forced bytes is viable);
        their bytes concatenate to a prefix of the forced bytes (all of them when the vocabulary can
        spell them). Empty after EOS or when nothing is forced.
        """
        if state is TERMINATED:
            return []
        forced = self.grammar.forced_bytes(state, limit)
        trie = self.trie
        out: list[int] = []
        pos = 0
        while pos < len(forced):
            node = -1
            best = -1
            best_len = 0
            k = pos
            while k < len(forced):
                node = trie.child(node, forced[k])
                if node < 0:
                    break
                k += 1
                lo, hi = int(trie.tok_lo[node]), int(trie.tok_hi[node])
                if hi > lo:
                    best = int(trie.tok_ids[lo:hi].min())
                    best_len = k - pos
            if best < 0:
                break
            out.append(best)
            pos += best_len
        return out

    # -- bookkeeping -----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        tables = self.trie.lexeme_tables
        return {
            **self._stats,
            "cache_entries": len(self._cache),
            "cache_bytes": self._cache_used,
            "interned_states": len(self._states),
            "lexeme_tables": len(tables._tables),
            "lexeme_table_bytes": tables.bytes,
            "lexeme_table_hits": tables.hits,
            "lexeme_table_misses": tables.misses,
            "trie_nodes": self.trie.num_nodes,
            "trie_bytes": self.trie.nbytes(),
        }

    def clear_caches(self) -> None:
        self._cache.clear()
        self._cache_used = 0
        self._reset_interning()

    def __repr__(self) -> str:
        return f"TokenGrammar({self.grammar!r}, vocab_size={self.vocab_size})"
