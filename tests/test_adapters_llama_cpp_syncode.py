"""The llama.cpp grammar-sampler (llama-cpp-python) and SynCode adapters.

As in ``tests/test_adapters.py``, these test the *adapters*: they satisfy the protocols, hand out masks
that are the engine's own (recomputed here from scratch through the engine's API), keep forks
independent, make rollback equal replay, return refusals as values, their reproducer scripts run,
and a short real ``certify`` run completes without an internal error. Differences between an engine
and the reference are findings of ``maskcert certify``, not failures here.

Both engines are optional: llama-cpp-python is built by ``ci/install_llama_cpp.sh``, syncode lives in
a ``--target`` directory on ``PYTHONPATH`` (its pins clash with the environment); without them these
tests skip.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tokenizers_matrix as tm
from maskcert.certification import certify
from props.contract.backend import Accepted, Backend, BackendMatcher, Compiled, Refused, Rejected
from props.contract.findings import Finding, Invariant, SpecKind, SpecRef
from props.corpus import Case
from props.output.repro import write_reproducers
from refdecoder import Choice, Gbnf, JsonSchema, Regex
from refdecoder.bitmask import pack_ids

REPO = Path(__file__).resolve().parent.parent
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
EMAIL_GBNF = 'root ::= [a-z]+ "@" [a-z]+ "." ("com" | "org")\n'


@pytest.fixture(scope="module")
def bpe() -> tm.Vocabulary:
    return tm.get("bpe")


@pytest.fixture(scope="module")
def byte() -> tm.Vocabulary:
    return tm.byte_vocabulary()


def _ids(vocab: tm.Vocabulary, text: str) -> list[int]:
    ids = vocab.encode(text)
    assert vocab.decode(ids) == text.encode()
    return ids


def _bit(mask: np.ndarray, i: int) -> bool:
    return bool((int(mask[i >> 5]) >> (i & 31)) & 1)


def _fork_and_rollback(backend: Any, vocab: tm.Vocabulary, spec: Any, text: str) -> None:
    """A fork advances alone; rollback(k) gives the masks and verdicts of replaying the rest."""
    compiled = backend.compile(spec, vocab)
    assert isinstance(compiled, Compiled), compiled
    ids = _ids(vocab, text)
    m = backend.matcher(compiled)
    for t in ids[:2]:
        assert isinstance(m.accept(t), Accepted)
    before = m.mask().copy()
    f = m.fork()
    for t in ids[2:]:
        assert isinstance(f.accept(t), Accepted)
    assert np.array_equal(m.mask(), before)  # the fork's tokens did not reach the original
    assert f.is_accepting() and not m.is_accepting()
    f.rollback(len(ids) - 2)
    assert np.array_equal(f.mask(), before)
    replay = backend.matcher(compiled)
    for t in ids[:1]:
        replay.accept(t)
    f.rollback(1)
    assert np.array_equal(f.mask(), replay.mask())
    assert isinstance(f.accept(ids[1]), Accepted) and np.array_equal(f.mask(), before)
    eos = min(vocab.eos_ids)
    assert isinstance(f.accept(eos), Rejected)  # not accepting yet
    for t in ids[2:]:
        f.accept(t)
    assert isinstance(f.accept(eos), Accepted) and f.is_terminated()
    assert not f.mask().any() and isinstance(f.accept(ids[0]), Rejected)
    f.rollback(1)
    assert not f.is_terminated() and f.is_accepting()


def _run_repro(tmp_path: Path, vocab: tm.Vocabulary, finding: Finding) -> subprocess.CompletedProcess[str]:
    (out,) = write_reproducers([finding], {vocab.fingerprint: vocab}, tmp_path)
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    proc = subprocess.run(
        [sys.executable, str(tmp_path / out.repro)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)),
    )
    print(proc.stdout, proc.stderr)
    return proc


def _claims(
    vocab: tm.Vocabulary, backend: str, spec: SpecRef, prefix: str, token: str, allows: bool
) -> Finding:
    """A token finding: after ``prefix`` the reference's verdict on ``token`` is ``allows`` and the
    backend's the opposite (true or not: the script finds out)."""
    (t,) = _ids(vocab, token)
    return Finding(
        Invariant.SOUNDNESS if not allows else Invariant.COMPLETENESS_TOKEN,
        backend,
        "test",
        spec,
        vocab.name,
        vocab.fingerprint,
        prefix_ids=tuple(_ids(vocab, prefix)),
        token_id=t,
        token_bytes=token.encode(),
        backend_verdict="masked" if allows else "allowed",
        reference_verdict="allowed" if allows else "masked",
        reference_allows=allows,
        message="test claim",
    )


def _certify_runs(cls: Any, vocab: tm.Vocabulary, cases: list[Case]) -> None:
    report = certify(cls, tokenizers=[vocab], corpus=(), cases=cases, examples=1, strings=1, minimize_s=1.0)
    assert not report.data["internal_errors"], report.data["internal_errors"]
    crashes = [f for f in report.findings if f.invariant == "crash"]
    assert not crashes, [f.message for f in crashes]
    assert report.data["counts"]


# -- llama.cpp (llama-cpp-python) ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama() -> Any:
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (bash ci/install_llama_cpp.sh)"
    )
    from props.backends import llama_cpp

    return llama_cpp


def _llama_own_mask(compiled: Compiled, prefix: list[int], size: int) -> np.ndarray:
    """llama.cpp from scratch: a new grammar sampler on the handle's GBNF, the prefix accepted, applied
    to every id with logit 0."""
    from llama_cpp import llama_cpp as ll

    h = compiled.handle
    model = h.initial.model
    smpl = ll.llama_sampler_init_grammar(model.vocab, h.grammar.encode(), h.root.encode())
    assert smpl
    try:
        for t in prefix:
            ll.llama_sampler_accept(smpl, t)
        data = (ll.llama_token_data * size)(*(ll.llama_token_data(i, 0.0, 0.0) for i in range(size)))
        cur = ll.llama_token_data_array(ctypes.cast(data, ll.llama_token_data_p), size, -1, False)
        ll.llama_sampler_apply(smpl, ctypes.byref(cur))
        allowed = [i for i in range(size) if data[i].logit != float("-inf")]
    finally:
        ll.llama_sampler_free(smpl)
    return pack_ids(np.asarray(allowed, dtype=np.int64), size)


def test_llama_cpp_satisfies_the_protocols(llama: Any, byte: tm.Vocabulary) -> None:
    b = llama.LlamaCppBackend()
    assert isinstance(b, Backend) and b.version and b.profile.notes
    compiled = b.compile(Choice(["ab", "c"]), byte)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    assert isinstance(m, BackendMatcher) and isinstance(m.fork(), BackendMatcher)


def test_llama_cpp_gguf_holds_the_vocabulary(llama: Any, bpe: tm.Vocabulary) -> None:
    """The GGUF the adapter writes gives back every id's bytes as llama.cpp's piece, and the EOS ids
    as its end-of-generation set (the adapter checks it on load; here, once more, by hand)."""
    model = llama._Model(bpe)
    from llama_cpp import llama_cpp as ll

    assert model.size == len(bpe)
    for i in (0, 1, 100, len(bpe) - 1):
        data = bpe.token_bytes[i]
        assert model.piece(i) == (data if data is not None else str(bpe.special_name(i)).encode())
    assert {i for i in range(len(bpe)) if ll.llama_vocab_is_eog(model.vocab, i)} == set(bpe.eos_ids)


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (Gbnf(EMAIL_GBNF), "bob@example.org"),
        (JsonSchema(PERSON), '{"name": "Zoë", "age": 42}'),
        (Choice(["yes", "yesno", "née"]), "yesno"),
    ],
    ids=["gbnf", "json", "choice"],
)
def test_llama_cpp_canonical_walk_matches_the_sampler(
    llama: Any, bpe: tm.Vocabulary, spec: Any, text: str
) -> None:
    b = llama.LlamaCppBackend()
    compiled = b.compile(spec, bpe)
    assert isinstance(compiled, Compiled), compiled
    ids = _ids(bpe, text)
    m = b.matcher(compiled)
    for k, t in enumerate(ids):
        mask = m.mask()
        assert np.array_equal(mask, _llama_own_mask(compiled, ids[:k], len(bpe))), k
        assert _bit(mask, t) and isinstance(m.accept(t), Accepted), k
    assert m.is_accepting() and _bit(m.mask(), min(bpe.eos_ids))
    assert isinstance(m.accept(min(bpe.eos_ids)), Accepted) and m.is_terminated()


def test_llama_cpp_fork_isolation_and_rollback_equals_replay(llama: Any, bpe: tm.Vocabulary) -> None:
    _fork_and_rollback(llama.LlamaCppBackend(), bpe, Gbnf(EMAIL_GBNF), "bob@example.org")


def test_llama_cpp_refusals_are_values(llama: Any, bpe: tm.Vocabulary) -> None:
    b = llama.LlamaCppBackend()
    assert isinstance(b.compile(Regex("[a-z]+"), bpe), Refused)
    assert isinstance(b.compile(Choice([]), bpe), Refused)
    assert isinstance(b.compile(JsonSchema(False), bpe), Refused)
    bad = b.compile(Gbnf('root ::= "a" undefined-rule\n'), bpe)
    assert isinstance(bad, Refused) and "failed to parse grammar" in bad.reason  # llama.cpp's log line
    assert isinstance(b.compile(Gbnf('root ::= "a"\n', root="start"), bpe), Refused)
    odd = b.compile(JsonSchema({"type": "string", "pattern": "a(?=b)"}), bpe)  # the converter's assertion
    assert isinstance(odd, Refused) and "json_schema_to_gbnf" in odd.reason
    assert isinstance(b.compile(JsonSchema(True), bpe), Compiled)  # true is {} in the converter's form


def test_llama_cpp_choice_literals_escape(llama: Any, byte: tm.Vocabulary) -> None:
    """Quotes, backslashes and control characters in choice options reach llama.cpp as themselves."""
    b = llama.LlamaCppBackend()
    options = ['say "hi"', "back\\slash", "tab\there", "new\nline"]
    compiled = b.compile(Choice(options), byte)
    assert isinstance(compiled, Compiled)
    for option in options:
        m = b.matcher(compiled)
        for t in _ids(byte, option):
            assert isinstance(m.accept(t), Accepted), option
        assert m.is_accepting(), option


def test_llama_cpp_reproducer_runs(llama: Any, byte: tm.Vocabulary, tmp_path: Path) -> None:
    """The script rebuilds the GGUF and the sampler: a false claim is not reproduced, a true one is."""
    spec = SpecRef(SpecKind.CHOICE, ["ab", "c"], name="ab-or-c")
    proc = _run_repro(tmp_path / "no", byte, _claims(byte, "llama-cpp", spec, "a", "c", allows=False))
    assert proc.returncode == 0 and "NOT REPRODUCED" in proc.stdout
    # 'b' after 'a' is allowed: a claim that the reference masks it (while the backend allows it)
    # reproduces, since the script judges the backend against the recorded verdict
    proc = _run_repro(tmp_path / "yes", byte, _claims(byte, "llama-cpp", spec, "a", "b", allows=False))
    assert proc.returncode == 1 and "REPRODUCED: " in proc.stdout


def test_llama_cpp_certify_runs(llama: Any, byte: tm.Vocabulary) -> None:
    cases = [
        Case(SpecRef(SpecKind.GBNF, EMAIL_GBNF, "email", "test"), valid=("a@b.com",), invalid=("a@b.net",)),
        Case(SpecRef(SpecKind.CHOICE, ["yes", "yesno"], "choices", "test"), valid=("yes", "yesno")),
        Case(SpecRef(SpecKind.JSON_SCHEMA, PERSON, "person", "test"), valid=({"name": "a", "age": 1},)),
    ]
    _certify_runs(llama.LlamaCppBackend, byte, cases)


# -- SynCode -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sc() -> Any:
    pytest.importorskip("syncode", reason="syncode is not importable (a --target install on PYTHONPATH)")
    from props.backends import syncode

    return syncode


def _syncode_own_mask(compiled: Compiled, prefix: list[int], size: int, mode: str) -> np.ndarray:
    """SynCode from scratch: a new logits processor on the same grammar and tokenizer, called on the
    prefix with zero scores."""
    import syncode
    import torch

    h = compiled.handle
    proc = syncode.SyncodeLogitsProcessor(
        syncode.Grammar(h.grammar), h.tokenizer, use_cache=False, parse_output_only=False, mode=mode
    )
    out = proc(torch.tensor([prefix], dtype=torch.long).reshape(1, len(prefix)), torch.zeros((1, size)))
    return pack_ids(np.flatnonzero(torch.isfinite(out[0]).numpy()), size)


def test_syncode_satisfies_the_protocols(sc: Any, byte: tm.Vocabulary) -> None:
    b = sc.SyncodeBackend()
    assert isinstance(b, Backend) and b.version and b.profile.notes
    compiled = b.compile(Choice(["ab", "c"]), byte)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    assert isinstance(m, BackendMatcher) and isinstance(m.fork(), BackendMatcher)


@pytest.mark.parametrize("mode", ["grammar_strict", "grammar_mask"])
@pytest.mark.parametrize(
    ("spec", "text"),
    [(Choice(["yes", "yesno", "maybe"]), "yesno"), (Regex("[a-z]+@[a-z]+"), "bob@example")],
    ids=["choice", "regex"],
)
def test_syncode_canonical_walk_matches_the_processor(
    sc: Any, bpe: tm.Vocabulary, spec: Any, text: str, mode: str
) -> None:
    b = sc.SyncodeBackend(mode=mode)
    compiled = b.compile(spec, bpe)
    assert isinstance(compiled, Compiled), compiled
    ids = _ids(bpe, text)
    m = b.matcher(compiled)
    for k, t in enumerate(ids):
        try:
            own = _syncode_own_mask(compiled, ids[:k], len(bpe), mode)
        except Exception as e:  # SynCode's own failure (grammar_mask: a KeyError in LookupTable) surfaces
            with pytest.raises(type(e)):
                m.mask()
            return
        mask = m.mask()
        assert np.array_equal(mask, own), k
        outcome = m.accept(t)
        assert isinstance(outcome, Accepted) == _bit(mask, t), k
        if not isinstance(outcome, Accepted):  # grammar_strict may break a token: a difference, not a bug
            return
    assert m.is_accepting() == _bit(m.mask(), min(bpe.eos_ids))


def test_syncode_fork_isolation_and_rollback_equals_replay(sc: Any, byte: tm.Vocabulary) -> None:
    _fork_and_rollback(sc.SyncodeBackend(), byte, Choice(["abcd", "abce"]), "abcd")


def test_syncode_refusals_are_values(sc: Any, bpe: tm.Vocabulary) -> None:
    b = sc.SyncodeBackend()
    assert isinstance(b.compile(JsonSchema(PERSON), bpe), Refused)
    assert isinstance(b.compile(Gbnf(EMAIL_GBNF), bpe), Refused)
    assert isinstance(b.compile(Regex("a\\nb"), bpe), Refused)  # Lark would evaluate the escape
    assert isinstance(b.compile(Regex("a*"), bpe), Refused)  # Lark: no zero-width terminal
    assert isinstance(b.compile(Choice([""]), bpe), Refused)
    assert isinstance(b.compile(JsonSchema(True), bpe), Compiled)  # SynCode's builtin json grammar


def test_syncode_lark_literals_read_back(sc: Any) -> None:
    assert sc.lark_regex("a/b|c") == "start: PATTERN\nPATTERN: /a\\/b|c/\n"
    assert sc.lark_regex("a\\\\b") is None and sc.lark_regex("\\x41") is None
    assert sc.lark_choice(('say "hi"', "it's")) == 'start: "say \\"hi\\"" | "it\'s"\n'
    assert sc.lark_choice(("a\nb",)) is None


def test_syncode_byte_level_tokenizer_reads_back(sc: Any, byte: tm.Vocabulary) -> None:
    text = sc.byte_level_tokenizer_json(byte.token_bytes, dict(byte.special_names))
    data = json.loads(text)
    assert len(data["model"]["vocab"]) == len(byte) and data["added_tokens"][0]["content"] == "</s>"
    assert sc.byte_level_tokenizer_json([b"a", b"a", None], {2: "</s>"}) is None


def test_syncode_reproducer_runs(sc: Any, byte: tm.Vocabulary, tmp_path: Path) -> None:
    """The script rebuilds the tokenizer and the processor; it reproduces the claim that SynCode allows
    'b' after 'a' only because SynCode does (one run: importing syncode takes seconds)."""
    spec = SpecRef(SpecKind.CHOICE, ["ab", "c"], name="ab-or-c")
    proc = _run_repro(tmp_path, byte, _claims(byte, "syncode", spec, "a", "b", allows=False))
    assert proc.returncode == 1 and "REPRODUCED: " in proc.stdout and "backend now : allowed" in proc.stdout


def test_syncode_certify_runs(sc: Any, byte: tm.Vocabulary) -> None:
    cases = [
        Case(SpecRef(SpecKind.CHOICE, ["yes", "yesno"], "choices", "test"), valid=("yes", "yesno")),
        Case(SpecRef(SpecKind.REGEX, "[a-c]+x", "letters", "test"), valid=("abx",), invalid=("x",)),
    ]
    _certify_runs(sc.SyncodeBackend, byte, cases)
