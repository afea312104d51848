"""``load(path)``: recognise a tokenizer file by its content and hand it to the right loader."""

from __future__ import annotations

import os
import re
from pathlib import Path

from refdecoder.errors import VocabularyError

from ._common import EosSpec, read_json
from ._hf import load_tokenizer_json
from ._sp import load_sentencepiece
from ._tiktoken import load_ranks, load_tekken
from ._vocab import Vocabulary

EXPECTED = "a tokenizer file: HF tokenizer.json, SentencePiece .model, tiktoken ranks or tekken JSON"
_RANK_LINE = re.compile(rb"[A-Za-z0-9+/=]+ \d+\s*\Z")
_IN_A_FOLDER = ("tokenizer.json", "tokenizer.model", "tekken.json")


def load(
    path: str | os.PathLike[str],
    eos: EosSpec = None,
    *,
    name: str | None = None,
    pattern: str | None = None,
) -> Vocabulary:
    """Load a vocabulary from a tokenizer file (or a folder holding ``tokenizer.json``,
    ``tokenizer.model`` or ``tekken.json``).

    Recognised by content: a JSON object with ``model`` is a Hugging Face ``tokenizer.json``; with
    ``config`` and ``vocab``, Mistral's tekken; a ``ModelProto`` protobuf (or any ``*.model*`` file) is
    SentencePiece; lines ``<base64> <rank>`` are tiktoken ranks (``pattern`` is their split regex,
    known by file name for gpt2/r50k/p50k/cl100k/o200k).

    ``eos`` (token strings or ids) is used where the file does not name its EOS; where it does, the two
    must agree. ``name`` defaults to the folder name for ``tokenizer.json``/``tokenizer.model``, else
    the file name. Anything unknown or malformed raises :class:`VocabularyError` naming the file.
    """
    path = Path(path)
    if path.is_dir():
        for candidate in _IN_A_FOLDER:
            if (path / candidate).is_file():
                return load(path / candidate, eos, name=name or path.name, pattern=pattern)
        raise VocabularyError(str(path), EXPECTED, f"a folder without {' / '.join(_IN_A_FOLDER)}")
    if not path.is_file():
        raise VocabularyError(str(path), EXPECTED, "no such file")
    if name is None:
        generic = path.name in ("tokenizer.json", "tokenizer.model")
        name = path.parent.name if generic and path.parent.name else path.name
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise VocabularyError(str(path), EXPECTED, f"cannot read: {e.strerror or e}") from e

    if ".model" in path.name:
        return load_sentencepiece(path, eos, name)
    if head.lstrip()[:1] == b"{":
        raw = read_json(path, "a tokenizer.json or tekken JSON object")
        if isinstance(raw, dict) and "model" in raw:
            return load_tokenizer_json(path, eos, name, raw)
        if isinstance(raw, dict) and "vocab" in raw and "config" in raw:
            return load_tekken(path, raw, eos, name)
        keys = sorted(raw)[:8] if isinstance(raw, dict) else []
        raise VocabularyError(str(path), f"{EXPECTED} ('model' or 'config'+'vocab' keys)", f"keys {keys}")
    first = head.split(b"\n", 1)[0]
    if _RANK_LINE.match(first):
        return load_ranks(path, eos, name, pattern)
    if head[:1] == b"\n":  # a ModelProto starts with field 1 (pieces), tag byte 0x0a
        return load_sentencepiece(path, eos, name)
    raise VocabularyError(str(path), EXPECTED, f"unrecognised content starting {head[:16]!r}")
