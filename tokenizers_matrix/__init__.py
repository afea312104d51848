"""Vocabularies for maskcert (docs/design.md §3): a :class:`Vocabulary` value, loaders for real tokenizer
files, small deterministic trained tokenizers, and the named matrix tests parametrize over.

Hypothesis strategies over a vocabulary live in :mod:`tokenizers_matrix.strategies`.
"""

from ._index import TokenIndex
from ._load import load
from ._matrix import (
    LEVELS,
    Level,
    MatrixEntry,
    describe_matrix,
    entries,
    format_matrix,
    get,
    matrix,
    names,
    resolve,
    shared_data_dir,
    unavailable,
)
from ._segment import all_segmentations, count_segmentations
from ._train import cache_root, corpus_bytes, train_bpe, train_sentencepiece
from ._vocab import KINDS, Codec, Kind, Vocabulary, byte_vocabulary, from_tokens

__all__ = [
    "Vocabulary",
    "Kind",
    "KINDS",
    "Codec",
    "TokenIndex",
    "load",
    "byte_vocabulary",
    "from_tokens",
    "train_bpe",
    "train_sentencepiece",
    "corpus_bytes",
    "cache_root",
    "Level",
    "LEVELS",
    "MatrixEntry",
    "matrix",
    "entries",
    "names",
    "get",
    "resolve",
    "unavailable",
    "shared_data_dir",
    "describe_matrix",
    "format_matrix",
    "all_segmentations",
    "count_segmentations",
]
