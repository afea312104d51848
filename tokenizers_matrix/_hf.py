"""Hugging Face ``tokenizer.json``: byte-level BPE (GPT-2 table) and Metaspace (``▁``) BPE / Unigram.

Token bytes come from the file; ``encode`` is the ``tokenizers`` library itself
(``add_special_tokens=False``, special-token strings in the text encoded as text). To make that
encoding byte-faithful the file is patched before loading, as for SentencePiece (see ``_sp``): the
dummy prefix space is turned off (ByteLevel ``add_prefix_space``, Metaspace ``prepend_scheme``,
a ``Prepend("▁")`` normalizer) and so is the decoder step that strips it (``Strip`` of one leading
space). Other normalizers (e.g. NFKC in the 65k Anthropic file) are kept; ``normalize`` reports what
they do.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refdecoder.errors import VocabularyError

from ._common import EosSpec, read_json, resolve_eos
from ._pieces import METASPACE, byte_level_bytes, byte_piece_value, metaspace_bytes
from ._vocab import Kind, Vocabulary

EXPECTED = "a Hugging Face tokenizer.json (BPE or Unigram model, ByteLevel or Metaspace)"


def _nodes(node: Any, key: str) -> list[dict[str, Any]]:
    """A component and, for a ``Sequence``, its members (``key`` names the member list)."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [n for member in node.get(key) or [] for n in _nodes(member, key)]
    return [node]


def _style(raw: dict[str, Any]) -> str | None:
    pre = _nodes(raw.get("pre_tokenizer"), "pretokenizers")
    dec = _nodes(raw.get("decoder"), "decoders")
    norm = _nodes(raw.get("normalizer"), "normalizers")
    types = {n.get("type") for n in pre + dec}
    if "ByteLevel" in types:
        return "byte-level"
    if "Metaspace" in types or any(
        n.get("type") == "Replace" and METASPACE in json.dumps(n, ensure_ascii=False) for n in norm + dec
    ):
        return "metaspace"
    return None


def _patched(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` with the dummy prefix space and its stripping turned off."""
    raw = {**raw, **{key: copy.deepcopy(raw.get(key)) for key in ("normalizer", "pre_tokenizer", "decoder")}}
    for node in _nodes(raw.get("pre_tokenizer"), "pretokenizers"):
        if node.get("type") == "ByteLevel":
            node["add_prefix_space"] = False
        if node.get("type") == "Metaspace":
            node["prepend_scheme"] = "never"
            node["add_prefix_space"] = False
    for node in _nodes(raw.get("decoder"), "decoders"):
        if node.get("type") == "Metaspace":
            node["prepend_scheme"] = "never"
            node["add_prefix_space"] = False

    def drop(node: Any, key: str, unwanted: Any) -> Any:
        if isinstance(node, dict) and node.get("type") == "Sequence":
            members = [drop(m, key, unwanted) for m in node.get(key) or []]
            node[key] = [m for m in members if m is not None]
            return node
        return None if isinstance(node, dict) and unwanted(node) else node

    raw["normalizer"] = drop(raw.get("normalizer"), "normalizers", lambda n: n.get("type") == "Prepend")
    raw["decoder"] = drop(
        raw.get("decoder"), "decoders", lambda n: n.get("type") == "Strip" and n.get("start", 0) > 0
    )
    return raw


@dataclass(frozen=True)
class _Added:
    content: str
    special: bool


class HFCodec:
    """``tokenizers.Tokenizer`` over the patched file; picklable (rebuilt from the JSON)."""

    def __init__(
        self, patched_json: str, metaspace: bool, byte_fallback: bool, single_pieces: frozenset[str]
    ) -> None:
        self._json = patched_json
        self._metaspace = metaspace
        self._byte_fallback = byte_fallback
        self._single = single_pieces  # one-character text pieces, or bytes for byte-level (as chars)
        self._tok: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tok": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def tokenizer(self) -> Any:
        if self._tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self._json)
            tok.encode_special_tokens = True
            self._tok = tok
        return self._tok

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def normalize(self, text: str) -> str:
        normalizer = self.tokenizer.normalizer
        out = normalizer.normalize_str(text) if normalizer is not None else text
        return out.replace(METASPACE, " ") if self._metaspace else out

    def can_encode(self, char: str) -> bool:
        text = self.normalize(char)
        if self._byte_fallback:
            return True
        if self._metaspace:
            return all(c.replace(" ", METASPACE) in self._single for c in text)
        return all(chr(b) in self._single for b in text.encode("utf-8"))

    def library_decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def _hf_config_eos(path: Path) -> tuple[list[str | int], str]:
    """EOS named by ``tokenizer_config.json`` or ``special_tokens_map.json`` beside ``path``."""
    where = []
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        beside = path.parent / name
        where.append(name)
        if not beside.is_file():
            continue
        config = read_json(beside, "a JSON object with an eos_token")
        eos = config.get("eos_token") if isinstance(config, dict) else None
        if isinstance(eos, dict):
            eos = eos.get("content")
        if isinstance(eos, str):
            return [eos], str(beside)
        if eos is not None:
            raise VocabularyError(str(beside), "eos_token as a string or {'content': ...}", f"got {eos!r}")
    return [], " or ".join(where) + " beside it"


def load_tokenizer_json(path: Path, eos: EosSpec, name: str, raw: Any = None) -> Vocabulary:
    """Load a tokenizer.json (``raw``: its parsed content, if the caller has read it already)."""
    if raw is None:
        raw = read_json(path, EXPECTED)
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), dict):
        raise VocabularyError(str(path), EXPECTED, "no 'model' object")
    model = raw["model"]
    model_type = model.get("type") or (
        "BPE" if "merges" in model else "Unigram" if isinstance(model.get("vocab"), list) else None
    )
    if model_type not in ("BPE", "Unigram"):
        raise VocabularyError(str(path), EXPECTED, f"model type {model_type!r} is not supported")
    style = _style(raw)
    if style is None:
        raise VocabularyError(
            str(path), EXPECTED, "neither a ByteLevel nor a Metaspace (▁) pre-tokenizer/decoder"
        )
    if style == "byte-level" and model_type != "BPE":
        raise VocabularyError(str(path), EXPECTED, "a ByteLevel tokenizer must have a BPE model")
    patched = json.dumps(_patched(raw))
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(patched)
    except Exception as e:  # the library's own parse error: report it, naming the file
        raise VocabularyError(str(path), EXPECTED, f"tokenizers cannot load it: {e}") from e

    # The library accepted the file, so its vocab and added tokens are well formed.
    vocab = model["vocab"]
    ids_by_name: dict[str, int] = (
        dict(vocab) if isinstance(vocab, dict) else {piece: i for i, (piece, _score) in enumerate(vocab)}
    )
    added = {
        int(t["id"]): _Added(t["content"], bool(t.get("special"))) for t in raw.get("added_tokens") or []
    }
    ids_by_name.update((t.content, i) for i, t in added.items())
    size = max([*ids_by_name.values(), -1]) + 1
    pieces: list[str | None] = [None] * size
    for piece, token_id in ids_by_name.items():
        pieces[token_id] = piece
    byte_fallback = bool(model.get("byte_fallback"))
    unk_piece = model.get("unk_token")  # BPE names its unknown token, Unigram gives its id
    unk_id = model.get("unk_id") if model_type == "Unigram" else ids_by_name.get(unk_piece or "")

    table: list[bytes | None] = [None] * size
    special: set[int] = set()
    names: dict[int, str] = {}
    fallback_ids: set[int] = set()
    for token_id, maybe_piece in enumerate(pieces):
        token = added.get(token_id)
        piece = maybe_piece or ""
        if maybe_piece is None or (token is not None and token.special) or token_id == unk_id:
            special.add(token_id)
            names[token_id] = maybe_piece if maybe_piece is not None else f"<unused {token_id}>"
        elif token is not None:
            table[token_id] = token.content.encode("utf-8")
        elif style == "byte-level":
            table[token_id] = byte_level_bytes(piece)
        elif byte_fallback and (value := byte_piece_value(piece)) is not None:
            table[token_id] = bytes([value])
            fallback_ids.add(token_id)
        else:
            table[token_id] = metaspace_bytes(piece)
        if table[token_id] == b"":
            table[token_id] = None
            special.add(token_id)
            names[token_id] = piece

    from_file, where = _hf_config_eos(path)
    eos_ids = resolve_eos(path, from_file, eos, ids_by_name, size, where)
    for token_id in eos_ids:  # an EOS is never text, whatever the file says
        table[token_id] = None
        special.add(token_id)
        names.setdefault(token_id, pieces[token_id] or f"<eos {token_id}>")
        fallback_ids.discard(token_id)

    if style == "byte-level":
        single = frozenset(chr(d[0]) for d in table if d is not None and len(d) == 1)
        kind: Kind = "byte-level-bpe"
    else:
        single = frozenset(
            p for i, p in enumerate(pieces) if p is not None and len(p) == 1 and table[i] is not None
        )
        kind = "sentencepiece-bpe" if model_type == "BPE" else "sentencepiece-unigram"
    codec = HFCodec(patched, style == "metaspace", byte_fallback and bool(fallback_ids), single)
    codec._tok = tok
    tok.encode_special_tokens = True
    return Vocabulary(
        token_bytes=tuple(table),
        eos_ids=eos_ids,
        special_ids=frozenset(special),
        kind=kind,
        name=name,
        special_names=tuple(names.items()),
        byte_fallback_ids=frozenset(fallback_ids),
        codec=codec,
    )
