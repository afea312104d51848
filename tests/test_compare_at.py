"""Slow engines still get covered (issue 34): ``--compare-at branching`` (and ``auto`` once an engine's
masks prove slow) compares masks only where the language branches, walks the forced steps without
comparing, counts them, and the report says how much time the engine's own calls took."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from maskcert.certification import (
    CertifyConfig,
    CertifyError,
    certify,
    certify_case,
    load_vocabularies,
    resolve_backend,
)
from props.checks import invariants
from props.checks.witness import canonical_ids
from props.contract.findings import Invariant, SpecKind, SpecRef
from props.corpus import Case
from refdecoder import Matcher as RefMatcher
from refdecoder.bitmask import num_words

PATTERN = "ab[cd]e"  # forced a, b; a branch between c and d; forced e; the end


def _run(toy: str, compare_at: str) -> tuple[int, set[Invariant]]:
    backend = resolve_backend(f"tests._toys:{toy}", isolate=False)
    vocab = load_vocabularies(["byte"])[0]
    case = Case(SpecRef(SpecKind.REGEX, PATTERN, "forced", "test"))
    result = certify_case(backend, case, vocab, seed=0, examples=0, strings=2, compare_at=compare_at)
    assert result.status == "checked"
    return int(result.instances.get("compare/steps-forced-skipped", 0)), {
        f.invariant for f in result.findings
    }


def test_branching_mode_skips_forced_steps_and_still_finds_defects() -> None:
    skipped_every, found_every = _run("ExtraClosingBrace", "every")
    skipped_branch, found_branch = _run("ExtraClosingBrace", "branching")
    assert skipped_every == 0 and skipped_branch > 0
    # '}' is allowed everywhere: the first step and the branch still show it.
    assert Invariant.SOUNDNESS in found_every and Invariant.SOUNDNESS in found_branch
    # A defect at the end (EOS never offered: an empty mask there) is found: the end is never skipped.
    _, no_eos = _run("NoEos", "branching")
    assert no_eos & {Invariant.EOS, Invariant.LIVENESS}


def test_auto_mode_switches_once_masks_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run("ExtraClosingBrace", "auto")[0] == 0  # a toy's masks are fast: every step compared
    monkeypatch.setattr(invariants, "SLOW_MASK_MS", 0.0)
    monkeypatch.setattr(invariants, "SLOW_MASK_SAMPLES", 1)
    assert _run("ExtraClosingBrace", "auto")[0] > 0


def test_report_says_where_the_time_went(tmp_path: Path) -> None:
    certify(
        "tests._toys:ExtraClosingBrace",
        tokenizers=["byte"],
        corpus=(),
        regexes=[PATTERN],
        examples=0,
        compare_at="branching",
        minimize_s=0,
        out=tmp_path,
    )
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "Time: the engine's own calls took" in md and "were walked without comparing masks" in md
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["profile"]["per_spec"] and all(
        "engine_s" in e and "own_s" in e for e in report["profile"]["per_spec"]
    )
    # Times live in the profile, never among the instances (a resumed or sharded run must equal a whole one).
    assert all("engine_s" not in e for e in report["instances"]["per_spec"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "the engine&#x27;s own calls took" in html or "the engine's own calls took" in html


def test_compare_at_is_checked() -> None:
    with pytest.raises(CertifyError, match="compare_at='sometimes'"):
        CertifyConfig(compare_at="sometimes")
    assert CertifyConfig(compare_at="branching").case_options()["compare_at"] == "branching"


class _Says:
    """A backend matcher whose ``is_accepting()`` says ``accepting``; the rest is ``inner``'s."""

    def __init__(self, inner: Any, accepting: bool) -> None:
        self.inner = inner
        self.accepting = accepting

    def is_accepting(self) -> bool:
        return self.accepting

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_JSON = SpecRef(SpecKind.JSON_SCHEMA, {"type": "array", "items": {"enum": [1, "ab"]}}, "a", "test")
_REGEX = SpecRef(SpecKind.REGEX, "(ab|c)*d?", "r", "test")
# Token 1 is <s> in sp-bpe-bytefallback (special, not text): the grammar names it.
_LARK = SpecRef(SpecKind.LARK, {"text": "start: <[1]> /[0-9]+/", "special_tokens": {}}, "l", "test")


@pytest.mark.parametrize(
    "spec,vocab",
    [(s, v) for s in (_JSON, _REGEX) for v in ("byte", "bpe", "sp-bpe-bytefallback")]
    + [(_LARK, "sp-bpe-bytefallback")],
    ids=lambda x: x if isinstance(x, str) else x.kind,
)
def test_equal_masks_shortcut_finds_what_the_full_comparison_finds(
    spec: SpecRef, vocab: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare_step``'s shortcut for equal masks against its general path: along canonical walks of
    valid texts, equal masks and an ``is_accepting()`` that tells the truth or lies give the same
    findings, checks, certificates and instances (non-text tokens included, where the grammar names
    them)."""
    v = load_vocabularies([vocab])[0]
    backend = resolve_backend("reference", isolate=False)
    texts = {
        SpecKind.JSON_SCHEMA: [b'[1,"ab",1]', b"[]"],
        SpecKind.REGEX: [b"ababcd", b""],
        SpecKind.LARK: [b"12"],  # after the special token id 1 (any vocabulary's id 1)
    }[spec.kind]

    def run(skip: bool) -> tuple[list[dict[str, Any]], list[dict[str, int]]]:
        monkeypatch.setattr(invariants, "SKIP_EQUAL_MASKS", skip)
        t = invariants.prepare(backend, spec, v)
        assert isinstance(t, invariants.Target), t
        if spec.kind == SpecKind.LARK:
            # Read <s> as a non-text token, so that masks equal to the reference's hold one the
            # comparison must still report (its "specials").
            text = t.text.copy()
            text[1] = False
            t.read_as_text(text)
        found: list[dict[str, Any]] = []
        for text in texts:
            ids = canonical_ids(v, text) or v.index.fewest_tokens(text)
            assert ids is not None
            ids = [1, *ids] if spec.kind == SpecKind.LARK else list(ids)
            r, inner = RefMatcher(t.reference), t.matcher()
            for n in range(len(ids) + 1):
                for lie in (False, True):
                    m = _Says(inner, r.is_accepting() != lie)
                    rm = t.reference_mask(r)
                    for f in invariants.compare_step(t, m, r, ids[:n], "canonical", backend_bits=rm.copy()):
                        found.append({k: val for k, val in dataclasses.asdict(f).items() if k != "spec"})
                if n < len(ids):
                    r.accept(int(ids[n]))
                    inner.accept(int(ids[n]))
        counts = (t.checks, t.certified, t.suppressed, t.instances)
        return found, [{str(k): c for k, c in counter.items()} for counter in counts]

    fast, slow = run(True), run(False)
    assert fast == slow
    assert sum(fast[1][0].values()) > 0 and fast[0]  # the lies were found


@given(
    size=st.integers(1, 200),
    seed=st.integers(0, 2**32 - 1),
    flips=st.lists(st.integers(0, 10**6), max_size=3),
    garbage=st.booleans(),
)
def test_packed_comparison_is_the_unpacked_one(size: int, seed: int, flips: list[int], garbage: bool) -> None:
    """``same_bits`` and ``bits_at`` read the packed words as ``mask_bits`` reads them: a flipped token
    bit makes rows unequal, a flipped bit past the vocabulary (garbage in the last word's tail) does not."""
    from props.checks.invariants import bits_at, mask_bits, same_bits
    from refdecoder._tokens import num_words

    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**31), 2**31, size=num_words(size), dtype=np.int64).astype(np.int32)
    b = a.copy()
    for f in flips:
        bit = f % (32 * len(b))
        b[bit >> 5] ^= np.int32(np.uint32(1 << (bit & 31)).view(np.int32))
    if garbage and size % 32:
        b[-1] ^= np.int32(np.uint32(1 << 31).view(np.int32))  # past the vocabulary when size % 32
    assert same_bits(a, b, size) == np.array_equal(mask_bits(a, size), mask_bits(b, size))
    ids = np.arange(size, dtype=np.int64)
    assert np.array_equal(bits_at(b, size, ids), mask_bits(b, size))


@pytest.mark.parametrize("size", [1, 31, 32, 33, 70, 96, 129])
def test_packed_comparison_sees_every_single_bit(size: int) -> None:
    """Each bit of a row flipped alone, in every word: ``same_bits`` says unequal exactly where the
    flipped bit is a token (below ``size``), as the unpacked comparison does."""
    from props.checks.invariants import mask_bits, same_bits
    from refdecoder._tokens import num_words

    a = np.random.default_rng(size).integers(-(2**31), 2**31, size=num_words(size), dtype=np.int64)
    a = a.astype(np.int32)
    for bit in range(32 * len(a)):
        b = a.copy()
        b[bit >> 5] ^= np.int32(np.uint32(1 << (bit & 31)).view(np.int32))
        assert same_bits(a, b, size) == (bit >= size), bit
        assert same_bits(a, b, size) == np.array_equal(mask_bits(a, size), mask_bits(b, size)), bit


_TARGETS: dict[str, Any] = {}


def _target(vocab: str) -> tuple[Any, np.ndarray]:
    """A target of the reference over ``vocab`` and its own text ids (built once per vocabulary: the
    test sets the text ids it reads)."""
    if vocab not in _TARGETS:
        v = load_vocabularies([vocab])[0]
        t = invariants.prepare(resolve_backend("reference", isolate=False), _JSON, v)
        assert isinstance(t, invariants.Target), t
        _TARGETS[vocab] = (t, t.text.copy())
    return _TARGETS[vocab]


@given(
    vocab=st.sampled_from(["byte", "sp-bpe-bytefallback"]),
    seed=st.integers(0, 2**32 - 1),
    density=st.sampled_from([0.0, 0.02, 0.5, 0.98, 1.0]),
    flips=st.lists(st.integers(0, 10**6), max_size=6),
    non_text=st.lists(st.integers(0, 10**6), max_size=4),
    extra_words=st.integers(0, 2),
)
def test_packed_differences_are_the_unpacked_ones(
    vocab: str, seed: int, density: float, flips: list[int], non_text: list[int], extra_words: int
) -> None:
    """``_differences_packed`` against the definition ``_differences`` on the unpacked rows: random
    rows of any density, rows that differ in a few bits (text, EOS, non-text ids, the last word's
    bits past the vocabulary), rows longer than the vocabulary (a padded engine row: the rest is not
    read), and text sets with non-text ids in them. A row shorter than the vocabulary is None."""
    t, own_text = _target(vocab)
    rng = np.random.default_rng(seed)
    text = own_text.copy()
    text[[i % t.size for i in non_text]] = False
    text[t.eos] = False
    t.read_as_text(text)
    words = num_words(t.size) + extra_words
    a = np.packbits(rng.random(words * 32) < density, bitorder="little").view("<i4").copy()
    b = a.copy()
    for f in [*flips, *(int(e) for e in t.eos)]:
        bit = f % (32 * words)
        b[bit >> 5] ^= np.int32(np.uint32(1 << (bit & 31)).view(np.int32))
    for bp, rp in ((a, b), (b, a), (a, a)):
        packed = invariants._differences_packed(t, bp, rp)
        slow = invariants._differences(t, invariants.mask_bits(bp, t.size), invariants.mask_bits(rp, t.size))
        assert packed is not None
        assert packed[:4] == slow[:4]
        assert packed[4].tolist() == slow[4].tolist() and packed[5].tolist() == slow[5].tolist()
    assert invariants._differences_packed(t, a[: num_words(t.size) - 1], b) is None


@pytest.mark.parametrize("vocab", ["byte", "bpe"])
def test_compare_step_finds_the_same_on_packed_and_unpacked_differences(
    vocab: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare_step with the packed differences and with the unpacked definition, fed the same
    engine rows (the reference's, with bits flipped at every step: soundness, completeness, EOS and
    an empty row), gives the same findings, checks and certificates."""
    v = load_vocabularies([vocab])[0]
    backend = resolve_backend("reference", isolate=False)
    text = b'[1,"ab",1]'

    def run(packed: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
        monkeypatch.setattr(invariants, "PACKED_DIFFERENCES", packed)
        t = invariants.prepare(backend, _JSON, v)
        assert isinstance(t, invariants.Target), t
        ids = list(canonical_ids(v, text) or v.index.fewest_tokens(text) or [])
        r, inner = RefMatcher(t.reference), t.matcher()
        rng = np.random.default_rng(7)
        found: list[dict[str, Any]] = []
        for n in range(len(ids) + 1):
            row = np.array(t.reference_packed(r), dtype=np.int32)
            for variant in range(3):
                bp = row.copy()
                if variant == 1:
                    for bit in rng.integers(0, t.size, 5):
                        bp[bit >> 5] ^= np.int32(np.uint32(1 << int(bit & 31)).view(np.int32))
                    for e in t.eos:
                        bp[e >> 5] ^= np.int32(np.uint32(1 << int(e & 31)).view(np.int32))
                elif variant == 2:
                    bp[:] = 0
                for f in invariants.compare_step(t, inner, r, ids[:n], "canonical", backend_row=bp):
                    found.append({k: val for k, val in dataclasses.asdict(f).items() if k != "spec"})
            if n < len(ids):
                r.accept(int(ids[n]))
                inner.accept(int(ids[n]))
        return found, {str(k): c for k, c in t.checks.items()}

    packed, unpacked = run(True), run(False)
    assert packed == unpacked
    kinds = {f["invariant"] for f in packed[0]}
    assert {Invariant.LIVENESS, Invariant.EOS} <= kinds and len(kinds) >= 3, kinds
