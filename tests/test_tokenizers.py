"""tokenizers_matrix: the Vocabulary value, its loaders, trained builders, matrix and strategies.

Properties run over every vocabulary of ``matrix("ci")``; a bounded slice runs on the 129k DeepSeek
vocabulary from the shared data; the whole ``full`` level runs with ``MASKCERT_FULL=1``.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizers_matrix as tm
from refdecoder.errors import MaskcertError, VocabularyError
from tokenizers_matrix import strategies as ts
from tokenizers_matrix._tiktoken import KNOWN_PATTERNS, RanksCodec, bpe_by_ranks

CI_NAMES = tm.names("ci")
FULL_ONLY = [n for n in tm.names("full") if n not in CI_NAMES]
SP_KINDS = ("sentencepiece-bpe", "sentencepiece-unigram")
DEEPSEEK = "deepseek-v3-litellm"

full = pytest.mark.skipif(
    os.environ.get("MASKCERT_FULL") != "1", reason="full tokenizer matrix: set MASKCERT_FULL=1"
)


@pytest.fixture(scope="module", params=CI_NAMES)
def vocab(request: pytest.FixtureRequest) -> tm.Vocabulary:
    return tm.get(request.param)


def _full_param(name: str) -> object:
    reason = tm.unavailable(name)
    marks = [pytest.mark.full, full] + ([pytest.mark.skip(reason=reason)] if reason else [])
    return pytest.param(name, marks=marks, id=name)


@pytest.fixture(scope="module", params=[_full_param(n) for n in FULL_ONLY])
def real_vocab(request: pytest.FixtureRequest) -> tm.Vocabulary:
    return tm.get(request.param)


@pytest.fixture(scope="module")
def deepseek() -> tm.Vocabulary:
    reason = tm.unavailable(DEEPSEEK)
    if reason:
        pytest.skip(reason)
    return tm.get(DEEPSEEK)


# -- the properties, as functions so every vocabulary level runs the same checks ----------------------


def check_canonical_roundtrip(vocab: tm.Vocabulary, text: str) -> None:
    ids = vocab.encode(text)
    assert not any(vocab.is_special(i) for i in ids), [vocab.token_repr(i) for i in ids]
    assert vocab.decode(ids) == vocab.normalize(text).encode("utf-8")


def check_library_decode(vocab: tm.Vocabulary, seg: ts.Segmentation) -> None:
    assert vocab.decode(seg.ids) == seg.data
    try:
        expected = seg.data.decode("utf-8")
    except UnicodeDecodeError:
        return  # libraries differ in how they replace invalid UTF-8; only valid text is compared
    assert vocab.library_decode(seg.ids) == expected


def check_segmentation(vocab: tm.Vocabulary, seg: ts.Segmentation) -> None:
    assert seg.data == vocab.normalize(seg.text).encode("utf-8")
    assert vocab.decode(seg.ids) == seg.data
    assert all(not vocab.is_special(i) for i in seg.ids)


def any_segmentation(vocab: tm.Vocabulary) -> st.SearchStrategy[ts.Segmentation]:
    return st.one_of(
        ts.canonical_encodings(vocab),
        ts.segmentations(vocab),
        ts.noncanonical_segmentations(vocab),
        ts.char_splitting_segmentations(vocab),
    )


def has_every_byte(vocab: tm.Vocabulary) -> bool:
    return all(bytes([b]) in vocab.index.ids_by_bytes for b in range(256))


# -- properties over matrix("ci") -----------------------------------------------------------------------


@given(data=st.data())
def test_canonical_encoding_spells_the_text(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    text = data.draw(ts.texts(vocab), label="text")
    check_canonical_roundtrip(vocab, text)
    # What normalize does for the trained families: nothing, except SentencePiece's "▁" meaning space.
    expected = text.replace("\u2581", " ") if vocab.kind in SP_KINDS else text
    assert vocab.normalize(text) == expected


@given(data=st.data())
def test_decode_agrees_with_the_library(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    check_library_decode(vocab, data.draw(any_segmentation(vocab), label="segmentation"))


@given(data=st.data())
def test_every_segmentation_strategy_spells_its_input(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    for name, strategy in [
        ("canonical", ts.canonical_encodings(vocab)),
        ("random", ts.segmentations(vocab)),
        ("noncanonical", ts.noncanonical_segmentations(vocab)),
        ("char-splitting", ts.char_splitting_segmentations(vocab)),
    ]:
        check_segmentation(vocab, data.draw(strategy, label=name))


@given(data=st.data())
def test_noncanonical_differs_when_it_can(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    seg = data.draw(ts.noncanonical_segmentations(vocab, ts.texts(vocab, max_size=8)))
    canonical = tuple(vocab.encode(seg.text))
    if tm.count_segmentations(vocab, seg.data) > 1:
        assert seg.ids != canonical
    else:
        assert seg.ids == canonical


@given(data=st.data())
def test_char_splitting_splits_every_character_it_can(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    seg = data.draw(ts.char_splitting_segmentations(vocab))
    split, total = ts.split_characters(vocab, seg)
    if has_every_byte(vocab):
        assert split == total
    assert split <= total


@given(data=st.data())
def test_all_segmentations_are_distinct_and_complete(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    text = data.draw(ts.texts(vocab, max_size=4))
    encoded = vocab.normalize(text).encode("utf-8")
    count = tm.count_segmentations(vocab, encoded)
    found = tm.all_segmentations(vocab, encoded, limit=200)
    assert len(found) == min(count, 200)
    assert len(set(found)) == len(found)
    assert all(vocab.decode(ids) == encoded for ids in found)
    if count <= 200:
        assert tuple(vocab.encode(text)) in found


@given(data=st.data())
def test_index_matches_are_every_token_spelled_there(vocab: tm.Vocabulary, data: st.DataObject) -> None:
    """``TokenIndex.matches`` (lengths cut at the longest token under a two-byte head) lists exactly the
    tokens whose bytes are ``data[start:end]``, shortest first: the definition, over every token."""
    text = data.draw(ts.texts(vocab, max_size=12))
    encoded = vocab.normalize(text).encode("utf-8") + data.draw(st.binary(max_size=3))
    start = data.draw(st.integers(0, len(encoded)))
    want = sorted(
        (len(b), i) for i, b in enumerate(vocab.token_bytes) if b is not None and encoded.startswith(b, start)
    )
    got = [(end - start, i) for i, end in vocab.index.matches(encoded, start)]
    assert sorted(got) == want and [n for n, _ in got] == sorted(n for n, _ in got)


def test_specials_carry_no_text_and_eos_is_special(vocab: tm.Vocabulary) -> None:
    assert vocab.eos_ids and vocab.eos_ids <= vocab.special_ids
    for i in vocab.special_ids:
        assert vocab.token_bytes[i] is None
        assert vocab.decode([i]) == b""
    assert all(vocab.token_bytes[i] for i in vocab.text_ids)
    assert len(vocab.text_ids) + len(vocab.special_ids) == len(vocab)
    assert vocab.max_token_len == max(len(vocab.token_bytes[i] or b"") for i in vocab.text_ids)
    assert len(vocab.eos_names) == len(vocab.eos_ids)


def test_byte_fallback_ids_are_single_bytes(vocab: tm.Vocabulary) -> None:
    fallback = vocab.byte_fallback_ids
    if vocab.name in ("sp-bpe-bytefallback", "sp-unigram", "hf-metaspace-bpe"):
        assert {vocab.decode([i]) for i in fallback} == {bytes([b]) for b in range(256)}
    else:
        assert not fallback
    assert all(vocab.is_byte_fallback(i) == (i in fallback) for i in range(len(vocab)))


def test_metaspace_means_space(vocab: tm.Vocabulary) -> None:
    if vocab.kind not in SP_KINDS:
        pytest.skip("not a ▁ vocabulary")
    assert all("\u2581".encode() not in data for _, data in vocab.text_tokens() if data != "\u2581".encode())
    assert any(data.startswith(b" ") and len(data) > 1 for _, data in vocab.text_tokens())
    assert vocab.decode(vocab.encode(" a  b ")) == b" a  b "  # no dummy prefix, no whitespace folding


def test_value_semantics_and_pickling(vocab: tm.Vocabulary) -> None:
    assert len(vocab.fingerprint) == 64 and int(vocab.fingerprint, 16) >= 0
    clone = pickle.loads(pickle.dumps(vocab))
    assert clone == vocab and hash(clone) == hash(vocab)
    assert clone.encode("héllo wörld {1}") == vocab.encode("héllo wörld {1}")
    assert len({vocab, clone}) == 1


def test_matrix_names_and_table() -> None:
    vocabs = tm.matrix("ci")
    assert [v.name for v in vocabs] == CI_NAMES
    assert len({v.fingerprint for v in vocabs}) == len(vocabs)
    assert {v.kind for v in vocabs} == set(tm.KINDS) - {"tiktoken"}
    rows = tm.describe_matrix("ci")
    assert [r["name"] for r in rows] == CI_NAMES
    assert all({"kind", "size", "specials", "eos_ids", "eos", "fingerprint"} <= r.keys() for r in rows)
    table = tm.format_matrix("ci")
    assert all(name in table for name in CI_NAMES)
    assert set(tm.names("ci")) < set(tm.names("full"))
    with pytest.raises(ValueError):
        tm.names("nightly")  # type: ignore[arg-type]
    with pytest.raises(VocabularyError, match="matrix vocabulary name"):
        tm.get("no-such-vocabulary")


# -- building vocabularies: the value's invariants, tiny vocabularies ---------------------------------


def test_tiny_vocabulary_encodes_with_fewest_tokens() -> None:
    tiny = tm.from_tokens(["a", "b", "c", "ab", "bc", "abc"])
    assert tiny.decode(tiny.encode("abcab")) == b"abcab"
    assert [tiny.token_bytes[i] for i in tiny.encode("abcab")] == [b"abc", b"ab"]
    assert tm.count_segmentations(tiny, "abc") == 4
    assert sorted(tm.all_segmentations(tiny, "abc")) == sorted([(0, 1, 2), (0, 4), (3, 2), (5,)])
    assert tm.all_segmentations(tiny, "abd") == [] and tm.count_segmentations(tiny, "abd") == 0
    with pytest.raises(VocabularyError, match="cannot segment"):
        tiny.encode("abd")
    assert tiny.token_repr(3) == "3 b'ab'" and tiny.token_repr(6) == "6 </s>"
    assert tiny.can_encode("a") and not tiny.can_encode("d")


def test_byte_vocabulary() -> None:
    byte = tm.byte_vocabulary()
    assert len(byte) == 257 and byte.kind == "byte" and byte.eos_ids == {256}
    assert byte.encode("é") == [0xC3, 0xA9]
    assert byte == tm.get("byte")
    assert tm.count_segmentations(byte, "héllo") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"eos_ids": frozenset()}, "at least one EOS"),
        ({"eos_ids": frozenset({0})}, "EOS ids to be special"),
        ({"special_ids": frozenset({1, 2})}, "bytes for exactly the non-special ids"),
        ({"token_bytes": (b"a", b"", None)}, "non-empty bytes"),
        ({"kind": "wordpiece"}, "kind in"),
        ({"eos_ids": frozenset({7})}, r"EOS ids in \[0, 3\)"),
        ({"byte_fallback_ids": frozenset({1})}, "single byte for each byte-fallback id"),
        ({"special_names": ((0, "<x>"),)}, "names only for special ids"),
    ],
)
def test_vocabulary_checks_its_invariants(change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "token_bytes": (b"a", b"bc", None),
        "eos_ids": frozenset({2}),
        "special_ids": frozenset({2}),
        "kind": "byte-level-bpe",
        "name": "bad",
    }
    fields.update(change)
    with pytest.raises(VocabularyError, match=message) as info:
        tm.Vocabulary(**fields)  # type: ignore[arg-type]
    assert isinstance(info.value, MaskcertError) and info.value.path == "bad"


def test_decode_rejects_unknown_ids() -> None:
    byte = tm.byte_vocabulary()
    for bad in (-1, 257):
        with pytest.raises(VocabularyError, match=r"token ids in \[0, 257\)"):
            byte.decode([bad])


def test_fingerprint_is_deterministic_across_training_runs() -> None:
    # Trained without the cache: the same corpus and parameters give the same vocabulary.
    for build, name in [
        (lambda: tm.train_bpe(cache=False), "bpe"),
        (lambda: tm.train_sentencepiece("unigram", True, cache=False), "sp-unigram"),
        (lambda: tm.train_sentencepiece("bpe", False, cache=False), "sp-bpe-nofallback"),
    ]:
        first, second = build(), build()
        assert first.fingerprint == second.fingerprint == tm.get(name).fingerprint
        assert first.token_bytes == tm.get(name).token_bytes


def test_training_cache_is_keyed_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASKCERT_CACHE", str(tmp_path))
    first = tm.train_sentencepiece("bpe", True, vocab_size=1200)
    folders = list((tmp_path / "tokenizers").iterdir())
    assert (
        len(folders) == 1
        and (folders[0] / "tokenizer.model").is_file()
        and (folders[0] / "key.json").is_file()
    )
    assert tm.train_sentencepiece("bpe", True, vocab_size=1200) == first
    assert len(list((tmp_path / "tokenizers").iterdir())) == 1
    assert len(first) == 1200


# -- loaders: Hugging Face tokenizer.json --------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder with the trained files a user would have (tokenizer.json, tokenizer.model)."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MASKCERT_CACHE", str(root))
        assert tm.train_bpe() == tm.get("bpe")
        assert tm.train_bpe(1500, style="metaspace") == tm.get("hf-metaspace-bpe")
        assert tm.train_sentencepiece("bpe", True) == tm.get("sp-bpe-bytefallback")
    return root / "tokenizers"


def _trained_file(cache: Path, prefix: str, name: str) -> Path:
    (path,) = [p / name for p in cache.iterdir() if p.name.startswith(prefix)]
    return path


@pytest.fixture(scope="module")
def bpe_json(fresh_cache: Path) -> dict[str, object]:
    return json.loads(
        _trained_file(fresh_cache, "hf-bpe-byte-level-", "tokenizer.json").read_text(encoding="utf-8")
    )


@pytest.fixture(scope="module")
def metaspace_json(fresh_cache: Path) -> dict[str, object]:
    return json.loads(
        _trained_file(fresh_cache, "hf-bpe-metaspace-", "tokenizer.json").read_text(encoding="utf-8")
    )


@pytest.fixture(scope="module")
def sp_model(fresh_cache: Path) -> bytes:
    return _trained_file(fresh_cache, "sp-bpe-bytefallback-", "tokenizer.model").read_bytes()


def _write(folder: Path, raw: object, config: object = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder / "tokenizer.json"


def test_tokenizer_json_eos_from_config(tmp_path: Path, bpe_json: dict[str, object]) -> None:
    expected = tm.get("bpe")
    for i, config in enumerate([{"eos_token": "<|endoftext|>"}, {"eos_token": {"content": "<|endoftext|>"}}]):
        vocab = tm.load(_write(tmp_path / str(i), bpe_json, config))
        assert vocab == expected and vocab.eos_names == ("<|endoftext|>",)
        assert vocab.name == str(i)  # a tokenizer.json is named after its folder
    special_map = tmp_path / "map"
    _write(special_map, bpe_json)
    (special_map / "special_tokens_map.json").write_text('{"eos_token": "<|endoftext|>"}')
    assert tm.load(special_map) == expected  # a folder, and special_tokens_map.json


def test_tokenizer_json_eos_errors(tmp_path: Path, bpe_json: dict[str, object]) -> None:
    bare = _write(tmp_path / "bare", bpe_json)
    with pytest.raises(VocabularyError, match="expected an EOS token") as info:
        tm.load(bare)
    assert str(bare) in str(info.value) and "tokenizer_config.json" in str(info.value)
    assert tm.load(bare, eos="<|endoftext|>") == tm.get("bpe")
    assert tm.load(bare, eos=0).eos_ids == {0}
    with pytest.raises(VocabularyError, match="in the vocabulary"):
        tm.load(bare, eos="</s>")
    with pytest.raises(VocabularyError, match=r"EOS id in \[0, 1024\)"):
        tm.load(bare, eos=5000)
    configured = _write(tmp_path / "configured", bpe_json, {"eos_token": "<|endoftext|>"})
    with pytest.raises(VocabularyError, match="agrees with the file's EOS"):
        tm.load(configured, eos="a")
    wrong = _write(tmp_path / "wrong", bpe_json, {"eos_token": "<nope>"})
    with pytest.raises(VocabularyError, match="names '<nope>'"):
        tm.load(wrong)
    broken = _write(tmp_path / "broken", bpe_json)
    (tmp_path / "broken" / "tokenizer_config.json").write_text('{"eos_token": ')
    with pytest.raises(VocabularyError, match="invalid JSON") as info:
        tm.load(broken)
    assert "tokenizer_config.json" in info.value.path


def test_tokenizer_json_added_tokens(tmp_path: Path, bpe_json: dict[str, object]) -> None:
    raw = json.loads(json.dumps(bpe_json))
    size = len(tm.get("bpe"))
    common = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    raw["added_tokens"] += [
        {"id": size, "content": "<|user|>", "special": True, **common},
        {"id": size + 1, "content": "<tool ☂>", "special": False, **common},
    ]
    vocab = tm.load(_write(tmp_path / "added", raw, {"eos_token": "<|endoftext|>"}))
    assert len(vocab) == size + 2
    assert vocab.token_bytes[size] is None and vocab.special_name(size) == "<|user|>"
    assert vocab.token_bytes[size + 1] == "<tool ☂>".encode()
    text = "a <tool ☂> b <|user|>"
    ids = vocab.encode(text)
    assert size + 1 in ids and size not in ids  # special-token strings are encoded as text
    assert vocab.decode(ids) == text.encode()
    assert vocab.library_decode(ids) == text


def test_tokenizer_json_metaspace_llama_style(tmp_path: Path, metaspace_json: dict[str, object]) -> None:
    expected = tm.get("hf-metaspace-bpe")
    assert expected.kind == "sentencepiece-bpe" and len(expected.byte_fallback_ids) == 256
    # Older Llama files: no pre-tokenizer; the normalizer prepends "▁" and replaces spaces.
    raw = json.loads(json.dumps(metaspace_json))
    raw["pre_tokenizer"] = None
    raw["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    vocab = tm.load(_write(tmp_path / "llama", raw, {"eos_token": {"content": "</s>"}}))
    assert vocab == expected
    for text in [" a  b ", "x\ty", "naïve ☃ 日本", "\u2581lit"]:
        ids = vocab.encode(text)
        assert vocab.decode(ids) == vocab.normalize(text).encode()
        assert vocab.library_decode(ids) == vocab.normalize(text)


def test_tokenizer_json_unigram(tmp_path: Path) -> None:
    pieces = [
        ["<unk>", 0.0],
        ["<s>", 0.0],
        ["</s>", 0.0],
        ["▁", -2.0],
        ["a", -3.0],
        ["b", -3.0],
        ["▁ab", -1.0],
    ]
    raw = {
        "version": "1.0",
        "added_tokens": [
            {
                "id": i,
                "content": p,
                "special": True,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
            }
            for i, p in enumerate(["<unk>", "<s>", "</s>"])
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": False},
    }
    vocab = tm.load(_write(tmp_path / "uni", raw), eos="</s>")
    assert vocab.kind == "sentencepiece-unigram" and vocab.token_bytes[6] == b" ab"
    assert vocab.encode("ab ab") == [4, 5, 6]
    assert vocab.can_encode("a") and vocab.can_encode(" ") and not vocab.can_encode("c")
    assert vocab.library_decode([4, 5, 6]) == "ab ab"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merg', "invalid JSON"),
        ("{}", "'model' or 'config'"),
        ('{"model": {"type": "WordPiece", "vocab": {}}}', "model type 'WordPiece'"),
        (
            '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}',
            "neither a ByteLevel nor a Metaspace",
        ),
        (
            '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [5]}, "decoder": {"type": "ByteLevel"}}',
            "tokenizers cannot load it",
        ),
        ('{"model": 3}', "no 'model' object"),
    ],
)
def test_malformed_tokenizer_json(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(content)
    with pytest.raises(VocabularyError, match=message) as info:
        tm.load(path, eos=0)
    assert info.value.path == str(path)


def test_unrecognised_files(tmp_path: Path) -> None:
    for name, content in [("empty.bin", b""), ("notes.txt", b"hello there\n"), ("x.json", b"[1, 2]")]:
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(VocabularyError) as info:
            tm.load(path)
        assert info.value.path == str(path)
    with pytest.raises(VocabularyError, match="no such file"):
        tm.load(tmp_path / "missing.json")
    with pytest.raises(VocabularyError, match="a folder without"):
        tm.load(tmp_path)


# -- loaders: SentencePiece ----------------------------------------------------------------------------


def test_sentencepiece_model_loads_with_its_eos(tmp_path: Path, sp_model: bytes) -> None:
    path = tmp_path / "m.model"
    path.write_bytes(sp_model)
    vocab = tm.load(path)
    assert vocab == tm.get("sp-bpe-bytefallback") and vocab.name == "m.model"
    assert vocab.eos_names == ("</s>",) and {vocab.special_name(i) for i in vocab.special_ids} == {
        "<unk>",
        "<s>",
        "</s>",
    }
    assert tm.load(path, eos="</s>") == vocab
    with pytest.raises(VocabularyError, match="agrees with the file's EOS"):
        tm.load(path, eos="<s>")


def test_sentencepiece_encoding_is_byte_faithful(sp_model: bytes) -> None:
    import sentencepiece

    vocab = tm.get("sp-bpe-bytefallback")
    stock = sentencepiece.SentencePieceProcessor(model_proto=sp_model)
    # Out of the box SentencePiece prepends a dummy "▁"; our encode does not.
    assert vocab.decode(stock.encode("a b", out_type=int)) == b" a b"
    assert vocab.decode(vocab.encode("a b")) == b"a b"


def test_sentencepiece_without_byte_fallback_reports_unknown_characters() -> None:
    vocab = tm.get("sp-bpe-nofallback")
    assert not vocab.byte_fallback_ids
    unknown = "\U0001f9ec"  # not in the corpus
    assert not vocab.can_encode(unknown) and vocab.can_encode("a") and vocab.can_encode("\n")
    ids = vocab.encode(f"a{unknown}b")
    assert any(vocab.special_name(i) == "<unk>" for i in ids)  # the unknown token carries no bytes
    assert vocab.decode(ids) == b"ab"


@pytest.mark.parametrize(
    "content",
    [b"this is not a protobuf", b"\x0a\xff\xff\xff\xff\x0f", b"", b"\x0a\x02\x0a"],
)
def test_malformed_sentencepiece_model(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "tokenizer.model"
    path.write_bytes(content)
    with pytest.raises(VocabularyError, match="SentencePiece model") as info:
        tm.load(path)
    assert info.value.path == str(path)


# -- loaders: tiktoken ranks and tekken ------------------------------------------------------------------

TINY_MERGES = [b"th", b"the", b" t", b" the", b"in", b"ing", b"  ", b"\xc3\xa9", b"er", b" a", b"an", b"and"]


def _tiny_ranks() -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for token in TINY_MERGES:
        ranks[token] = len(ranks)
    return ranks


def _write_ranks(path: Path, ranks: dict[bytes, int]) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    return path


@pytest.fixture(scope="module")
def tiny_tiktoken(tmp_path_factory: pytest.TempPathFactory) -> tm.Vocabulary:
    path = _write_ranks(tmp_path_factory.mktemp("ranks") / "tiny.tiktoken", _tiny_ranks())
    return tm.load(path, eos="<|endoftext|>", pattern=KNOWN_PATTERNS["gpt2"])


def test_tiktoken_rank_file(tiny_tiktoken: tm.Vocabulary) -> None:
    vocab = tiny_tiktoken
    n = len(_tiny_ranks())
    assert vocab.kind == "tiktoken" and len(vocab) == n + 1 and vocab.eos_ids == {n}
    assert vocab.special_name(n) == "<|endoftext|>"
    # GPT-2 split: "the", " thing", " and", " é"; " thing" merges "th" (rank 256) before " t" (258).
    pieces = [vocab.token_bytes[i] for i in vocab.encode("the thing and é")]
    assert pieces == [b"the", b" ", b"th", b"ing", b" a", b"n", b"d", b" ", b"\xc3\xa9"]
    assert vocab.encode("the") == [_tiny_ranks()[b"the"]]


@given(text=ts.texts())
def test_tiktoken_round_trip_and_reference_bpe(tiny_tiktoken: tm.Vocabulary, text: str) -> None:
    check_canonical_roundtrip(tiny_tiktoken, text)
    codec = tiny_tiktoken.codec
    assert isinstance(codec, RanksCodec)
    assert codec.encode_ranks(text) == tiny_tiktoken.encode(text)  # pure Python == tiktoken (if installed)


def test_bpe_by_ranks_merges_lowest_rank_first() -> None:
    ranks = _tiny_ranks()
    assert bpe_by_ranks(b"the", ranks) == [ranks[b"the"]]
    assert bpe_by_ranks(b" thing", ranks) == [ranks[b" "], ranks[b"th"], ranks[b"ing"]]
    assert bpe_by_ranks(b" then", ranks) == [ranks[b" the"], ranks[b"n"]]  # " " + "the" (rank 259) last
    assert bpe_by_ranks(b"zz", ranks) == [ranks[b"z"], ranks[b"z"]]


def test_tiktoken_rank_file_errors(tmp_path: Path) -> None:
    good = _write_ranks(tmp_path / "gpt2.tiktoken", _tiny_ranks())
    with pytest.raises(VocabularyError, match="names none"):
        tm.load(good)
    assert tm.load(good, eos="<|endoftext|>").eos_ids == {len(_tiny_ranks())}  # pattern known by name
    assert tm.load(good, eos=300).eos_ids == {300}
    with pytest.raises(VocabularyError, match="is a text token"):
        tm.load(good, eos="the")
    unknown = _write_ranks(tmp_path / "mystery.tiktoken", _tiny_ranks())
    with pytest.raises(VocabularyError, match="pass pattern="):
        tm.load(unknown, eos="<|endoftext|>")
    cases = {
        "bad-base64": "YQ== 0\n!!!! 1\n",
        "missing-byte": "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(255)),
        "gap": "YQ== 0\nYg== 5\n",
        "duplicate": "YQ== 0\nYQ== 1\n",
    }
    for name, content in cases.items():
        path = tmp_path / f"{name}.tiktoken"
        path.write_text(content)
        with pytest.raises(VocabularyError) as info:
            tm.load(path, eos="<|endoftext|>", pattern=KNOWN_PATTERNS["gpt2"])
        assert info.value.path == str(path) and "tiktoken" in info.value.expected


def _tekken(
    ranks: dict[bytes, int], specials: list[dict[str, object]] | None, num_special: int
) -> dict[str, object]:
    raw: dict[str, object] = {
        "config": {
            "pattern": KNOWN_PATTERNS["o200k_base"],
            "num_vocab_tokens": len(ranks),
            "default_vocab_size": len(ranks) + num_special,
            "default_num_special_tokens": num_special,
            "version": "v7",
        },
        "vocab": [
            {
                "rank": r,
                "token_bytes": base64.b64encode(t).decode(),
                "token_str": t.decode("utf-8", "replace"),
            }
            for t, r in ranks.items()
        ],
    }
    if specials is not None:
        raw["special_tokens"] = specials
    return raw


def test_tekken_json(tmp_path: Path) -> None:
    ranks = _tiny_ranks()
    specials = [
        {"rank": 0, "token_str": "<unk>", "is_control": True},
        {"rank": 1, "token_str": "</s>", "is_control": True},
    ]
    path = tmp_path / "tekken.json"
    path.write_text(json.dumps(_tekken(ranks, specials, 4)))
    vocab = tm.load(path)
    assert vocab.kind == "tiktoken" and len(vocab) == len(ranks) + 4
    assert (
        vocab.eos_ids == {1} and vocab.special_ids == {0, 1, 2, 3} and vocab.special_name(3) == "<SPECIAL_3>"
    )
    assert vocab.encode("the") == [4 + ranks[b"the"]]
    assert vocab.decode(vocab.encode("and the thing é")) == "and the thing é".encode()
    # Without a special_tokens list: mistral_common's defaults, </s> at id 2.
    path.write_text(json.dumps(_tekken(ranks, None, 30)))
    assert tm.load(path).eos_ids == {2} and tm.load(path).special_name(3) == "[INST]"
    bad = _tekken(ranks, specials, 4)
    bad["vocab"][260]["token_bytes"] = "%%%"  # type: ignore[index]
    path.write_text(json.dumps(bad))
    with pytest.raises(VocabularyError, match=r"vocab\[260\]") as info:
        tm.load(path)
    assert info.value.path == str(path)
    path.write_text(json.dumps(_tekken(ranks, [{"rank": 0, "token_str": "<unk>"}], 4)))
    with pytest.raises(VocabularyError, match="none in the special token </s>"):
        tm.load(path)
    assert tm.load(path, eos="<SPECIAL_2>").eos_ids == {2}


# -- real vocabularies: a bounded slice in CI, everything with MASKCERT_FULL=1 ------------------------------


@settings(max_examples=5)
@given(data=st.data())
def test_deepseek_slice(deepseek: tm.Vocabulary, data: st.DataObject) -> None:
    text = data.draw(ts.texts(deepseek, max_size=12), label="text")
    check_canonical_roundtrip(deepseek, text)
    assert deepseek.normalize(text) == text
    check_library_decode(deepseek, data.draw(any_segmentation(deepseek), label="segmentation"))
    seg = data.draw(ts.char_splitting_segmentations(deepseek), label="char-splitting")
    check_segmentation(deepseek, seg)
    split, total = ts.split_characters(deepseek, seg)
    assert split == total


def test_deepseek_layout(deepseek: tm.Vocabulary) -> None:
    assert deepseek.kind == "byte-level-bpe" and len(deepseek) == 129_280
    assert deepseek.eos_names == ("<\uff5cend\u2581of\u2581sentence\uff5c>",) and deepseek.eos_ids == {1}
    eot = deepseek.encode("<|EOT|>")  # a non-special added token: text
    assert len(eot) == 1 and deepseek.token_bytes[eot[0]] == b"<|EOT|>"
    assert deepseek.decode(deepseek.encode("<\uff5cend\u2581of\u2581sentence\uff5c>")) == (
        "<\uff5cend\u2581of\u2581sentence\uff5c>".encode()
    )


@full
@pytest.mark.full
@given(data=st.data())
def test_full_properties(real_vocab: tm.Vocabulary, data: st.DataObject) -> None:
    text = data.draw(ts.texts(real_vocab), label="text")
    check_canonical_roundtrip(real_vocab, text)
    for strategy in (ts.segmentations, ts.noncanonical_segmentations, ts.char_splitting_segmentations):
        seg = data.draw(strategy(real_vocab), label=strategy.__name__)
        check_segmentation(real_vocab, seg)
        check_library_decode(real_vocab, seg)


@full
@pytest.mark.full
def test_full_layouts(real_vocab: tm.Vocabulary) -> None:
    assert real_vocab.eos_ids <= real_vocab.special_ids
    assert all(real_vocab.token_bytes[i] is None for i in real_vocab.special_ids)
    clone = pickle.loads(pickle.dumps(real_vocab))
    assert clone == real_vocab and clone.encode("naïve 日本 😀") == real_vocab.encode("naïve 日本 😀")
    if real_vocab.name == "anthropic-legacy-claude":
        assert real_vocab.eos_names == ("<EOT>",)
        assert real_vocab.normalize("ﬁ①") == "fi1"  # its normalizer is NFKC
    if real_vocab.name == "mistral-sp-v1":
        assert len(real_vocab) == 32_000 and len(real_vocab.byte_fallback_ids) == 256
    if real_vocab.name == "mistral-tekken":
        assert len(real_vocab) == 131_072 and real_vocab.eos_ids == {2}


@full
@pytest.mark.full
@given(text=ts.texts())
def test_full_tekken_reference_bpe_matches_tiktoken(text: str) -> None:
    pytest.importorskip("tiktoken")
    if tm.unavailable("mistral-tekken"):
        pytest.skip(tm.unavailable("mistral-tekken") or "")
    vocab = tm.get("mistral-tekken")
    codec = vocab.codec
    assert isinstance(codec, RanksCodec)
    assert [r + 1000 for r in codec.encode_ranks(text)] == vocab.encode(text)


def test_shared_data_is_found_or_skipped() -> None:
    root = tm.shared_data_dir()
    if root is None:
        assert tm.unavailable(DEEPSEEK) is not None
        pytest.skip("shared data absent: the DeepSeek slice skips with a reason")
    assert (root / "tokenizers").is_dir()


def test_unwritable_cache_falls_back_to_a_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MASKCERT_CACHE", str(blocker))
    assert tm.train_bpe(vocab_size=300) is not None
    assert blocker.read_text() == "not a folder"


def test_resolve_takes_matrix_names_and_files_and_names_what_it_expected(tmp_path: Path) -> None:
    assert tm.resolve("byte") == tm.byte_vocabulary()
    with pytest.raises(VocabularyError) as info:
        tm.resolve(str(tmp_path / "missing.json"))
    assert "a matrix name" in info.value.expected and "tokenizer file" in info.value.expected
