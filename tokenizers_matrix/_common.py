"""Helpers every loader shares: reading JSON with errors that name the file, and resolving EOS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Union

from refdecoder import Limits, read_spec_json
from refdecoder.errors import SpecFileError, VocabularyError

# What a caller may pass as ``eos``: a token string, an id, or several of them.
EosSpec = Union[str, int, Iterable[Union[str, int]], None]  # noqa: UP007 (a runtime alias on 3.10)


# Tokenizer files are large (tokenizer.json of a 200k vocabulary: ~10-30 MB) but never deep.
_FILE_LIMITS = Limits(schema_bytes=512_000_000, nesting_depth=64)


def read_json(path: Path, expected: str) -> Any:
    """The JSON document in ``path`` (refdecoder's spec reader: size, UTF-8, nesting depth checked
    before parsing), or :class:`VocabularyError` naming the file, what was expected and where."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabularyError(str(path), expected, f"cannot read: {e.strerror or e}") from e
    try:
        return read_spec_json(data, str(path), expected=expected, limits=_FILE_LIMITS)
    except SpecFileError as e:
        raise VocabularyError(e.path, e.expected, e.detail) from None


def eos_items(eos: EosSpec) -> list[str | int]:
    if eos is None:
        return []
    if isinstance(eos, (str, int)):
        return [eos]
    return list(eos)


def resolve_eos(
    path: Path,
    from_file: list[str | int],
    argument: EosSpec,
    ids_by_name: Mapping[str, int],
    size: int,
    where: str,
) -> frozenset[int]:
    """EOS ids: from the file where it says so, else from ``argument`` (token strings or ids).

    When both are given they must agree: a silent choice between two EOS would hide a mistake.
    ``where`` says where the file would have named it, for the error message.
    """

    def to_id(item: str | int, source: str) -> int:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise VocabularyError(str(path), "eos as a token string or an id", f"{source} gave {item!r}")
        if isinstance(item, int):
            if not 0 <= item < size:
                raise VocabularyError(str(path), f"an EOS id in [0, {size})", f"{source} gave {item}")
            return item
        if item not in ids_by_name:
            raise VocabularyError(
                str(path), "an EOS token that is in the vocabulary", f"{source} names {item!r}"
            )
        return ids_by_name[item]

    file_ids = frozenset(to_id(item, where) for item in from_file)
    arg_ids = frozenset(to_id(item, "the eos argument") for item in eos_items(argument))
    if file_ids and arg_ids and file_ids != arg_ids:
        raise VocabularyError(
            str(path),
            "an eos argument that agrees with the file's EOS",
            f"{where} gives ids {sorted(file_ids)}, the eos argument {sorted(arg_ids)}",
        )
    ids = file_ids or arg_ids
    if not ids:
        raise VocabularyError(
            str(path),
            "an EOS token",
            f"none in {where}; pass eos='<token>' (or an id) to load()",
        )
    return ids
