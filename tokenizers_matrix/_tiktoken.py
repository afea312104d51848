"""tiktoken rank files (``<base64 token> <rank>`` lines) and Mistral's tekken JSON.

Both are byte-level BPE by ranks: the text is split by a regex, and each piece is encoded by
repeatedly merging the adjacent pair whose concatenation has the lowest rank (leftmost on ties) until
no pair is a token (tiktoken's ``byte_pair_merge``; Sennrich et al. 2016 with merge priority = rank).
``encode`` uses the ``tiktoken`` package when it is installed and :func:`bpe_by_ranks` otherwise; the
test suite checks the two agree.

tekken ids: the special tokens come first (ids ``0 .. num_special-1``), text token of rank ``r`` is id
``num_special + r``, as ``mistral_common``'s ``Tekkenizer`` lays them out (the vocabulary is cut to
``default_vocab_size - num_special`` ranks; files without a ``special_tokens`` list get
mistral_common's default list, ``</s>`` at id 2, padded with ``<SPECIAL_i>``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refdecoder.errors import VocabularyError

from ._common import EosSpec, eos_items, read_json, resolve_eos
from ._vocab import Vocabulary

RANKS_EXPECTED = "a tiktoken rank file (lines of '<base64 token> <rank>')"
TEKKEN_EXPECTED = "a tekken JSON (config.pattern and vocab of {rank, token_bytes})"

# Pre-tokenization regexes of the published tiktoken encodings, by file stem.
_GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
_O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
KNOWN_PATTERNS = {
    "gpt2": _GPT2,
    "r50k_base": _GPT2,
    "p50k_base": _GPT2,
    "cl100k_base": _CL100K,
    "o200k_base": _O200K,
}

# mistral_common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS, for tekken files without a special_tokens list.
_TEKKEN_DEFAULT_SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)


def bpe_by_ranks(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Ranks of the tokens BPE merges ``piece`` into (every single byte must be a token)."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best_rank, best_at = -1, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_at < 0 or rank < best_rank):
                best_rank, best_at = rank, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return [ranks[p] for p in parts]


class RanksCodec:
    """Regex split, then BPE by ranks; text ids are ``offset + rank``. Picklable."""

    def __init__(self, ranks: dict[bytes, int], pattern: str, offset: int, name: str) -> None:
        self._ranks = ranks
        self._pattern = pattern
        self._offset = offset
        self._name = name
        self._regex: Any = None
        self._tiktoken: Any = None
        self._by_rank: list[bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_regex": None, "_tiktoken": None, "_by_rank": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def regex(self) -> Any:
        if self._regex is None:
            import regex

            self._regex = regex.compile(self._pattern)
        return self._regex

    def _tiktoken_encoding(self) -> Any:
        if self._tiktoken is None:
            try:
                import tiktoken
            except ImportError:
                self._tiktoken = False
            else:
                self._tiktoken = tiktoken.Encoding(
                    self._name or "maskcert",
                    pat_str=self._pattern,
                    mergeable_ranks=self._ranks,
                    special_tokens={},
                )
        return self._tiktoken

    def encode_ranks(self, text: str) -> list[int]:
        """Ranks by :func:`bpe_by_ranks` (the pure-Python reference)."""
        out: list[int] = []
        for match in self.regex.finditer(text):
            out.extend(bpe_by_ranks(match.group().encode("utf-8"), self._ranks))
        return out

    def encode(self, text: str) -> list[int]:
        encoding = self._tiktoken_encoding()
        ranks = list(encoding.encode_ordinary(text)) if encoding else self.encode_ranks(text)
        return [r + self._offset for r in ranks]

    def normalize(self, text: str) -> str:
        return text

    def can_encode(self, char: str) -> bool:
        return True

    def library_decode(self, ids: Sequence[int]) -> str:
        """tiktoken's ``decode`` (special ids skipped) or, without tiktoken, the bytes as UTF-8."""
        ranks = [i - self._offset for i in ids if 0 <= i - self._offset < len(self._ranks)]
        encoding = self._tiktoken_encoding()
        if encoding:
            return str(encoding.decode(ranks))
        if self._by_rank is None:
            by_rank = [b""] * len(self._ranks)
            for token, rank in self._ranks.items():
                by_rank[rank] = token
            self._by_rank = by_rank
        return b"".join(self._by_rank[r] for r in ranks).decode("utf-8", errors="replace")


def _check_ranks(path: Path, ranks: dict[bytes, int], expected: str) -> None:
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise VocabularyError(str(path), expected, "ranks must be 0..n-1, each once")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise VocabularyError(
            str(path), expected, f"every single byte must be a token; missing {missing[:8]}"
        )


def load_ranks(path: Path, eos: EosSpec, name: str, pattern: str | None) -> Vocabulary:
    """A rank file has no special tokens: EOS is the ``eos`` argument, a name (added as the special id
    right after the ranks, as tiktoken adds ``<|endoftext|>``) or an id at or past the ranks."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise VocabularyError(str(path), RANKS_EXPECTED, f"cannot read: {e.strerror or e}") from e
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError(f"{len(fields)} fields")
            token, rank = base64.b64decode(fields[0], validate=True), int(fields[1])
        except (ValueError, binascii.Error) as e:
            raise VocabularyError(str(path), RANKS_EXPECTED, f"line {number}: {e}") from e
        if token in ranks:
            raise VocabularyError(str(path), RANKS_EXPECTED, f"line {number}: token {token!r} appears twice")
        ranks[token] = rank
    if not ranks:
        raise VocabularyError(str(path), RANKS_EXPECTED, "no tokens")
    _check_ranks(path, ranks, RANKS_EXPECTED)
    if pattern is None:
        stem = path.name.split(".")[0]
        if stem not in KNOWN_PATTERNS:
            raise VocabularyError(
                str(path),
                "a split pattern for this rank file",
                f"pass pattern=... to load(); known by file name: {sorted(KNOWN_PATTERNS)}",
            )
        pattern = KNOWN_PATTERNS[stem]

    n = len(ranks)
    table: list[bytes | None] = [b""] * n
    for token, rank in ranks.items():
        table[rank] = token
    names: dict[int, str] = {}
    eos_ids: set[int] = set()
    for item in eos_items(eos):
        if isinstance(item, int) and not isinstance(item, bool) and item >= n:
            token_id, label = item, f"<eos {item}>"
        elif isinstance(item, str) and item.encode("utf-8") not in ranks:
            token_id, label = max(len(table), n), item
        else:
            raise VocabularyError(
                str(path), "eos as a special token name or an id past the ranks", f"{item!r} is a text token"
            )
        table.extend([None] * (token_id + 1 - len(table)))
        names[token_id] = label
        eos_ids.add(token_id)
    if not eos_ids:
        raise VocabularyError(
            str(path), "an EOS token", "a rank file names none; pass eos='<|endoftext|>' to load()"
        )
    for token_id in range(n, len(table)):
        names.setdefault(token_id, f"<unused {token_id}>")
    return Vocabulary(
        token_bytes=tuple(table),
        eos_ids=frozenset(eos_ids),
        special_ids=frozenset(range(n, len(table))),
        kind="tiktoken",
        name=name,
        special_names=tuple(names.items()),
        codec=RanksCodec(ranks, pattern, 0, name),
    )


def load_tekken(path: Path, raw: Any, eos: EosSpec, name: str) -> Vocabulary:
    def bad(detail: str) -> VocabularyError:
        return VocabularyError(str(path), TEKKEN_EXPECTED, detail)

    config = raw.get("config")
    vocab = raw.get("vocab")
    if not isinstance(config, dict) or not isinstance(vocab, list):
        raise bad("no 'config' object or 'vocab' list")
    pattern = config.get("pattern")
    if not isinstance(pattern, str):
        raise bad("config.pattern is not a string")
    specials_raw = raw.get("special_tokens")
    if specials_raw is None:
        specials = [{"rank": i, "token_str": s} for i, s in enumerate(_TEKKEN_DEFAULT_SPECIALS)]
    elif isinstance(specials_raw, list) and all(isinstance(s, dict) for s in specials_raw):
        specials = specials_raw
    else:
        raise bad("special_tokens is not a list of objects")
    num_special = config.get("default_num_special_tokens", len(specials))
    vocab_size = config.get("default_vocab_size", len(vocab) + num_special)
    if not isinstance(num_special, int) or not isinstance(vocab_size, int) or len(specials) > num_special:
        raise bad("config.default_num_special_tokens / default_vocab_size are not consistent integers")
    inner = vocab_size - num_special
    if not 256 <= inner <= len(vocab):
        raise bad(f"default_vocab_size - num_special = {inner}, but the vocab has {len(vocab)} tokens")
    ranks: dict[bytes, int] = {}
    for position, entry in enumerate(vocab[:inner]):
        try:
            token = base64.b64decode(entry["token_bytes"], validate=True)
            rank = int(entry["rank"])
        except (KeyError, TypeError, ValueError, binascii.Error) as e:
            raise bad(f"vocab[{position}]: {type(e).__name__}: {e}") from e
        ranks[token] = rank
    if len(ranks) != inner:
        raise bad("duplicate token_bytes in vocab")
    _check_ranks(path, ranks, TEKKEN_EXPECTED)

    table: list[bytes | None] = [None] * num_special + [b""] * inner
    for token, rank in ranks.items():
        table[num_special + rank] = token
    names = {i: f"<SPECIAL_{i}>" for i in range(num_special)}
    for entry in specials:
        special_rank, text = entry.get("rank"), entry.get("token_str")
        if (
            not isinstance(special_rank, int)
            or not isinstance(text, str)
            or not 0 <= special_rank < num_special
        ):
            raise bad(f"special token {entry!r}")
        names[special_rank] = text
    ids_by_name = {text: i for i, text in names.items()}
    from_file: list[str | int] = ["</s>"] if "</s>" in ids_by_name else []
    eos_ids = resolve_eos(path, from_file, eos, ids_by_name, num_special, "the special token </s>")
    return Vocabulary(
        token_bytes=tuple(table),
        eos_ids=eos_ids,
        special_ids=frozenset(range(num_special)),
        kind="tiktoken",
        name=name,
        special_names=tuple(names.items()),
        codec=RanksCodec(ranks, pattern, num_special, name),
    )


def load_tekken_file(path: Path, eos: EosSpec, name: str) -> Vocabulary:
    return load_tekken(path, read_json(path, TEKKEN_EXPECTED), eos, name)
