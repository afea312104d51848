"""Small tokenizers trained deterministically on the corpus that ships with the package.

Each builder trains with the family's own library (Hugging Face ``tokenizers``, ``sentencepiece``),
writes the files a user would have (``tokenizer.json`` + ``tokenizer_config.json``, ``.model``) and
loads them with :func:`load`, so the loaders are exercised too. Results are cached on disk under
``$MASKCERT_CACHE/tokenizers`` (default ``~/.cache/maskcert/tokenizers``), keyed by a hash of the
corpus, the parameters and the library version; training is deterministic (single thread, fixed seed,
no sampling or shuffling of sentences), so a cache miss rebuilds the same vocabulary and fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ._load import load
from ._vocab import Vocabulary

_CACHE_FORMAT = 1


def corpus_bytes() -> bytes:
    """The training corpus (``tokenizers_matrix/data/corpus.txt``), as bytes."""
    return resources.files("tokenizers_matrix").joinpath("data/corpus.txt").read_bytes()


def _corpus_lines(per_chunk: int = 1) -> list[str]:
    """The corpus as lines (keeping their ends), or as chunks of ``per_chunk`` lines."""
    lines = corpus_bytes().decode("utf-8").splitlines(keepends=True)
    return ["".join(lines[i : i + per_chunk]) for i in range(0, len(lines), per_chunk)]


def cache_root() -> Path:
    base = os.environ.get("MASKCERT_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "maskcert") / "tokenizers"


def _library_version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "unknown"


@contextlib.contextmanager
def _built(
    builder: str, params: dict[str, Any], library: str, produce: Callable[[Path], None], cache: bool
) -> Iterator[Path]:
    """A folder holding the files ``produce`` writes: from the cache when ``cache`` and present."""
    key_source = {
        "format": _CACHE_FORMAT,
        "builder": builder,
        "params": params,
        "library": f"{library}=={_library_version(library)}",
        "corpus": hashlib.sha256(corpus_bytes()).hexdigest(),
    }
    key = hashlib.sha256(json.dumps(key_source, sort_keys=True).encode()).hexdigest()[:24]
    if cache:
        folder = cache_root() / f"{builder}-{key}"
        if (folder / "key.json").is_file():
            yield folder
            return
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            scratch = folder.parent / f".{folder.name}.{uuid.uuid4().hex}"
            scratch.mkdir()
        except OSError:
            cache = False  # an unwritable cache: train into a temporary folder instead
    if not cache:
        with tempfile.TemporaryDirectory(prefix="maskcert-train-") as tmp:
            produce(Path(tmp))
            yield Path(tmp)
        return
    try:
        produce(scratch)
        (scratch / "key.json").write_text(json.dumps(key_source, sort_keys=True, indent=1))
        try:
            os.replace(scratch, folder)
        except OSError:
            if not (folder / "key.json").is_file():  # not a concurrent writer finishing first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    yield folder


BpeStyle = Literal["byte-level", "metaspace"]


def train_bpe(
    vocab_size: int = 1024,
    *,
    style: BpeStyle = "byte-level",
    name: str | None = None,
    cache: bool = True,
    special_tokens: Sequence[str] = (),
) -> Vocabulary:
    """A BPE trained with Hugging Face ``tokenizers`` on the corpus.

    ``byte-level``: GPT-2 style (ByteLevel pre-tokenizer and decoder, all 256 bytes in the alphabet),
    EOS ``<|endoftext|>``. ``metaspace``: Llama style (Metaspace ``▁`` pre-tokenizer, ``<0xNN>`` byte
    fallback pieces in the model vocabulary, ``<unk>``/``<s>``/``</s>``), EOS ``</s>``.
    ``special_tokens``: added special tokens after EOS (byte-level only; ids 1, 2, ... in order), as
    tool-call vocabularies have them.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    params: dict[str, Any] = {"vocab_size": vocab_size, "style": style, "min_frequency": 2}
    eos = "<|endoftext|>" if style == "byte-level" else "</s>"
    if special_tokens:
        if style != "byte-level":
            raise ValueError(f"special_tokens: expected style 'byte-level', not {style!r}")
        if len(set(special_tokens)) != len(special_tokens) or eos in special_tokens:
            raise ValueError(f"special_tokens: expected distinct names other than {eos!r}")
        params["special_tokens"] = list(special_tokens)  # absent when empty: earlier caches stay valid

    def produce(folder: Path) -> None:
        byte_pieces = [f"<0x{b:02X}>" for b in range(256)]
        if style == "byte-level":
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(
                vocab_size=vocab_size,
                min_frequency=2,
                special_tokens=[eos, *special_tokens],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                show_progress=False,
            )
        else:
            tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
            tok.decoder = decoders.Sequence(
                [
                    decoders.Replace("\u2581", " "),
                    decoders.ByteFallback(),
                    decoders.Fuse(),
                    decoders.Strip(" ", 1, 0),
                ]
            )
            trainer = trainers.BpeTrainer(
                vocab_size=vocab_size,
                min_frequency=2,
                special_tokens=["<unk>", "<s>", eos, *byte_pieces],
                show_progress=False,
            )
        tok.train_from_iterator(_corpus_lines(), trainer)
        raw = json.loads(tok.to_str())
        if style == "metaspace":  # byte pieces live in the model vocabulary, not among added tokens
            raw["added_tokens"] = [t for t in raw["added_tokens"] if t["content"] not in byte_pieces]
        (folder / "tokenizer.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos}), encoding="utf-8")

    default_name = "bpe" if style == "byte-level" else "hf-metaspace-bpe"
    with _built(f"hf-bpe-{style}", params, "tokenizers", produce, cache) as folder:
        return load(folder / "tokenizer.json", name=name or default_name)


SpModelType = Literal["bpe", "unigram"]

# SentencePiece drops a sentence's trailing newline; feeding chunks of lines keeps "\n" in the model.
_SP_LINES_PER_SENTENCE = 8


def train_sentencepiece(
    model_type: SpModelType = "bpe",
    byte_fallback: bool = True,
    vocab_size: int = 2000,
    *,
    name: str | None = None,
    cache: bool = True,
) -> Vocabulary:
    """A SentencePiece model trained on the corpus, Llama style: identity normalization, no removal
    of extra whitespace, digits split, every corpus character kept (``character_coverage=1.0``),
    optional ``<0xNN>`` byte fallback. EOS ``</s>``."""
    import sentencepiece

    params: dict[str, Any] = {
        "model_type": model_type,
        "vocab_size": vocab_size,
        "byte_fallback": byte_fallback,
        "character_coverage": 1.0,
        "num_threads": 1,
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "add_dummy_prefix": True,
        "split_digits": True,
        "allow_whitespace_only_pieces": True,
        "max_sentence_length": 1 << 16,
        "input_sentence_size": 0,
        "shuffle_input_sentence": False,
        "seed": 0,
        "lines_per_sentence": _SP_LINES_PER_SENTENCE,
    }

    def produce(folder: Path) -> None:
        out = io.BytesIO()
        kwargs = {k: v for k, v in params.items() if k not in ("seed", "lines_per_sentence")}
        sentencepiece.set_random_generator_seed(params["seed"])
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(_corpus_lines(_SP_LINES_PER_SENTENCE)),
            model_writer=out,
            minloglevel=2,
            **kwargs,
        )
        (folder / "tokenizer.model").write_bytes(out.getvalue())

    fallback = "bytefallback" if byte_fallback else "nofallback"
    default_name = f"sp-{model_type}-{fallback}" if model_type == "bpe" else f"sp-unigram-{fallback}"
    with _built(f"sp-{model_type}-{fallback}", params, "sentencepiece", produce, cache) as folder:
        return load(folder / "tokenizer.model", name=name or default_name)
