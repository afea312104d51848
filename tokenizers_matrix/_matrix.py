"""The named vocabularies that tests and the certifier parametrize over.

``ci``: the byte vocabulary and small tokenizers trained here, one per family (seconds to build, cached).
``full``: those plus real vocabularies: the 65k and 129k byte-level BPEs in the project's shared data
(``$MASKCERT_SHARED_DATA``, else ``<repo>/../shared/data``), and, when ``mistral_common`` is installed,
its 32k SentencePiece ``tokenizer.model.v1`` and 131k tekken vocabulary. An entry whose files are
absent is not an error: :func:`unavailable` returns the reason to skip it (docs/style.md §11).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from refdecoder.errors import VocabularyError

from ._load import load
from ._train import train_bpe, train_sentencepiece
from ._vocab import Vocabulary, byte_vocabulary

Level = Literal["ci", "full"]
LEVELS: tuple[Level, ...] = ("ci", "full")


def shared_data_dir() -> Path | None:
    """``$MASKCERT_SHARED_DATA``, else ``<repo root>/../shared/data``; None if neither exists."""
    env = os.environ.get("MASKCERT_SHARED_DATA")
    candidate = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    return candidate if candidate.is_dir() else None


def _mistral_data_dir() -> Path | None:
    spec = importlib.util.find_spec("mistral_common")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _shared_file(relative: str) -> Callable[[], Path | None]:
    def locate() -> Path | None:
        root = shared_data_dir()
        return root / relative if root is not None else None

    return locate


def _mistral_file(relative: str) -> Callable[[], Path | None]:
    def locate() -> Path | None:
        root = _mistral_data_dir()
        return root / relative if root is not None else None

    return locate


@dataclass(frozen=True)
class MatrixEntry:
    """One named vocabulary: how to build it and, for files outside the package, where they are."""

    name: str
    level: Level
    build: Callable[[], Vocabulary]
    locate: Callable[[], Path | None] | None = None  # the file it needs, if any
    needs: str = ""  # what provides that file, for the skip reason

    def unavailable(self) -> str | None:
        """Why this entry cannot be built here, or None."""
        if self.locate is None:
            return None
        path = self.locate()
        if path is None:
            return f"{self.name}: {self.needs} not found"
        if not path.is_file():
            return f"{self.name}: {path} is missing ({self.needs})"
        return None


def _from_file(
    name: str, locate: Callable[[], Path | None], eos: str | None = None
) -> Callable[[], Vocabulary]:
    def build() -> Vocabulary:
        path = locate()
        if path is None:
            raise VocabularyError(name, "a located tokenizer file")
        return load(path, eos, name=name)

    return build


_SHARED = "the shared data folder (set MASKCERT_SHARED_DATA or place shared/ beside the repository)"
_MISTRAL = "the mistral_common package (pip install mistral-common)"
_anthropic = _shared_file("tokenizers/anthropic-legacy-claude/tokenizer.json")
_deepseek = _shared_file("tokenizers/deepseek-v3-litellm/tokenizer.json")
_mistral_sp = _mistral_file("tokenizer.model.v1")
_mistral_tekken = _mistral_file("tekken_240911.json")

_ENTRIES: tuple[MatrixEntry, ...] = (
    MatrixEntry("byte", "ci", byte_vocabulary),
    MatrixEntry("bpe", "ci", lambda: train_bpe(name="bpe")),
    MatrixEntry(
        "hf-metaspace-bpe", "ci", lambda: train_bpe(1500, style="metaspace", name="hf-metaspace-bpe")
    ),
    MatrixEntry(
        "sp-bpe-bytefallback", "ci", lambda: train_sentencepiece("bpe", True, name="sp-bpe-bytefallback")
    ),
    MatrixEntry(
        "sp-bpe-nofallback", "ci", lambda: train_sentencepiece("bpe", False, name="sp-bpe-nofallback")
    ),
    MatrixEntry("sp-unigram", "ci", lambda: train_sentencepiece("unigram", True, name="sp-unigram")),
    # The Anthropic file has no tokenizer_config.json; its end-of-text token is the special <EOT> (id 0).
    MatrixEntry(
        "anthropic-legacy-claude",
        "full",
        _from_file("anthropic-legacy-claude", _anthropic, "<EOT>"),
        _anthropic,
        _SHARED,
    ),
    MatrixEntry(
        "deepseek-v3-litellm",
        "full",
        _from_file("deepseek-v3-litellm", _deepseek, "<\uff5cend\u2581of\u2581sentence\uff5c>"),
        _deepseek,
        _SHARED,
    ),
    MatrixEntry("mistral-sp-v1", "full", _from_file("mistral-sp-v1", _mistral_sp), _mistral_sp, _MISTRAL),
    MatrixEntry(
        "mistral-tekken", "full", _from_file("mistral-tekken", _mistral_tekken), _mistral_tekken, _MISTRAL
    ),
)
_BY_NAME = {entry.name: entry for entry in _ENTRIES}


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")


def entries(level: Level = "ci") -> list[MatrixEntry]:
    """Every entry of ``level`` (``full`` includes ``ci``), available here or not."""
    _check_level(level)
    return [e for e in _ENTRIES if level == "full" or e.level == "ci"]


def names(level: Level = "ci") -> list[str]:
    return [e.name for e in entries(level)]


def unavailable(name: str) -> str | None:
    """Why the named vocabulary cannot be loaded here (a skip reason), or None."""
    return _entry(name).unavailable()


def _entry(name: str) -> MatrixEntry:
    if name not in _BY_NAME:
        raise VocabularyError(name, f"a matrix vocabulary name, one of {sorted(_BY_NAME)}")
    return _BY_NAME[name]


@cache
def get(name: str) -> Vocabulary:
    """The named vocabulary, loaded (or trained) once per process."""
    entry = _entry(name)
    reason = entry.unavailable()
    if reason is not None:
        raise VocabularyError(name, "an available vocabulary", reason)
    return entry.build()


def resolve(name_or_path: str) -> Vocabulary:
    """A matrix vocabulary by name, else a tokenizer file by path (what every command line takes)."""
    if name_or_path in _BY_NAME:
        return get(name_or_path)
    path = Path(name_or_path)
    if path.exists():
        from ._load import load

        return load(path)
    raise VocabularyError(
        name_or_path,
        f"a matrix name ({', '.join(sorted(_BY_NAME))}) or a tokenizer file "
        "(tokenizer.json, SentencePiece .model, tiktoken ranks)",
    )


def matrix(level: Level = "ci") -> list[Vocabulary]:
    """The vocabularies of ``level`` that are available here, in matrix order."""
    return [get(e.name) for e in entries(level) if e.unavailable() is None]


def describe_matrix(level: Level = "ci") -> list[dict[str, Any]]:
    """One row per entry: name, kind, size, #specials, EOS ids and names, short fingerprint; for an
    entry that is not available, its reason instead (``unavailable``)."""
    rows: list[dict[str, Any]] = []
    for entry in entries(level):
        reason = entry.unavailable()
        if reason is not None:
            rows.append({"name": entry.name, "level": entry.level, "unavailable": reason})
            continue
        vocab = get(entry.name)
        rows.append(
            {
                "name": entry.name,
                "level": entry.level,
                "kind": vocab.kind,
                "size": len(vocab),
                "specials": len(vocab.special_ids),
                "byte_fallback": len(vocab.byte_fallback_ids),
                "eos_ids": sorted(vocab.eos_ids),
                "eos": list(vocab.eos_names),
                "max_token_len": vocab.max_token_len,
                "fingerprint": vocab.fingerprint[:12],
            }
        )
    return rows


def format_matrix(level: Level = "ci") -> str:
    """:func:`describe_matrix` as an aligned text table (for ``maskcert tokenizers``)."""
    header = ["name", "level", "kind", "size", "specials", "EOS", "fingerprint"]
    lines: list[list[str]] = [header]
    notes: list[str] = []
    for row in describe_matrix(level):
        if "unavailable" in row:
            lines.append([row["name"], row["level"], "-", "-", "-", "-", "unavailable"])
            notes.append(row["unavailable"])
            continue
        eos = ", ".join(f"{i} {name}" for i, name in zip(row["eos_ids"], row["eos"], strict=True))
        lines.append(
            [
                row["name"],
                row["level"],
                row["kind"],
                str(row["size"]),
                str(row["specials"]),
                eos,
                row["fingerprint"],
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )
    return text + "".join(f"\n  ({note})" for note in notes)
