"""The formatron (kbnf) and transformers-CFG adapters.

As in ``tests/test_adapters.py``, these are tests of the *adapters*: they satisfy the protocols,
hand out masks that are the engine's own (recomputed here from scratch through the engine's API),
keep forks independent, make rollback equal replay, return refusals as values, and a short real
``certify`` run completes without an internal error. Differences between an engine and the
reference are findings of ``maskcert certify``, not failures here; the one exception is a quality
check that a known formatron behaviour (kbnf ends eagerly) is found.

Each engine is optional: its tests skip when the package (or, for formatron, a pydantic it can
import with) is missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tokenizers_matrix as tm
from maskcert.certification import certify
from props.backends import REGISTRY
from props.contract.backend import Accepted, Backend, BackendMatcher, Compiled, Refused, Rejected
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case
from refdecoder import Choice, Gbnf, JsonSchema, Regex
from refdecoder.bitmask import num_words, pack_ids

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
EMAIL_GBNF = 'root ::= [a-z]+ "@" [a-z]+ "." ("com" | "org")\n'
LIST_GBNF = 'root ::= "[" item ("," ws item)* "]"\nitem ::= [0-9]+ | "\\"" [a-zé]* "\\""\nws ::= " "?\n'


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


def _walk_ids(vocab: tm.Vocabulary, text: str) -> list[int]:
    return [*_ids(vocab, text), min(vocab.eos_ids)]


# -- formatron -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def formatron() -> Any:
    # ImportError, not only ModuleNotFoundError: the adapter raises ImportError naming the pydantic cause
    return pytest.importorskip("props.backends.formatron", exc_type=ImportError)


def _formatron_raw_mask(mod: Any, compiled: Compiled, vocab: tm.Vocabulary, prefix: list[int]) -> np.ndarray:
    """kbnf from scratch: an Engine on formatron's grammar, the prefix fed with try_accept_new_token,
    EOS alone once it has finished (formatron's FormattersLogitsProcessor), else its allowed ids."""
    import kbnf

    engine = kbnf.Engine(compiled.handle.grammar, mod.kbnf_vocabulary(vocab))
    for t in prefix:
        engine.try_accept_new_token(t)
    if engine.is_finished():
        allowed = sorted(vocab.eos_ids)
    else:
        engine.compute_allowed_token_ids()
        allowed = engine.get_allowed_token_ids_from_last_computation()
    return pack_ids(np.asarray(allowed, dtype=np.int64), len(vocab))


FORMATRON_WALKS = [
    pytest.param(Choice(["yes", "no", "maybe so"]), "maybe so", id="choice"),
    pytest.param(Regex(r"[a-z]+@[a-z]+\.(com|org)"), "ab@cd.org", id="regex"),
    pytest.param(JsonSchema(PERSON), '{"name": "Al", "age": 42}', id="json"),
    pytest.param(JsonSchema({"type": "array", "items": {"type": "boolean"}}), "[true, false]", id="array"),
]
#: formatron 0.4.0's create_schema refuses array roots ("Root schema must have type 'object'")
OBJECT_ROOTS_ONLY = "Root schema must have type 'object'"


def test_formatron_satisfies_the_protocols(formatron: Any, byte: tm.Vocabulary) -> None:
    b = formatron.FormatronBackend()
    assert isinstance(b, Backend) and b.name == "formatron" and b.version
    assert b.profile.notes
    compiled = b.compile(Choice(["ab", "c"]), byte)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    assert isinstance(m, BackendMatcher) and isinstance(m.fork(), BackendMatcher)
    assert REGISTRY["formatron"].adapter == "props.backends.formatron:FormatronBackend"


@pytest.mark.parametrize(("spec", "text"), FORMATRON_WALKS)
def test_formatron_canonical_walk_matches_kbnf(
    formatron: Any, bpe: tm.Vocabulary, spec: Any, text: str
) -> None:
    b = formatron.FormatronBackend()
    compiled = b.compile(spec, bpe)
    if isinstance(compiled, Refused) and OBJECT_ROOTS_ONLY in compiled.reason:
        pytest.skip(f"formatron {b.version}: {compiled.reason}")
    assert isinstance(compiled, Compiled), compiled
    ids = _ids(bpe, text)
    eos = min(bpe.eos_ids)
    m = b.matcher(compiled)
    for k, t in enumerate(ids):
        mask = m.mask()
        assert mask.dtype == np.int32 and mask.shape == (num_words(len(bpe)),)
        np.testing.assert_array_equal(
            mask, _formatron_raw_mask(formatron, compiled, bpe, ids[:k]), f"step {k}"
        )
        assert _bit(mask, t) and not _bit(mask, eos) and not m.is_accepting()
        bad = next(i for i in bpe.text_ids if not _bit(mask, i))
        assert isinstance(m.accept(bad), Rejected)  # kbnf leaves its state unchanged on a rejection
        np.testing.assert_array_equal(m.mask(), mask)
        assert isinstance(m.accept(eos), Rejected)  # EOS before the engine has finished
        out = m.accept(t)
        assert isinstance(out, Accepted) and not out.terminated
    np.testing.assert_array_equal(m.mask(), _formatron_raw_mask(formatron, compiled, bpe, ids))
    assert m.is_accepting() and _bit(m.mask(), eos)
    assert isinstance(m.accept(ids[0]), Rejected)  # the engine has finished: EOS only
    end = m.accept(eos)
    assert isinstance(end, Accepted) and end.terminated and m.is_terminated() and not m.mask().any()


def test_formatron_fork_isolation_and_rollback_equals_replay(formatron: Any, bpe: tm.Vocabulary) -> None:
    b = formatron.FormatronBackend()
    compiled = b.compile(JsonSchema(PERSON), bpe)
    assert isinstance(compiled, Compiled)
    ids = _walk_ids(bpe, '{"name": "Bo", "age": 7}')
    _fork_and_rollback(b, compiled, ids)


def test_formatron_reads_every_dialect_as_2020_12(formatron: Any, bpe: tm.Vocabulary) -> None:
    """create_schema reads 2020-12 only; the adapter declares that dialect whatever ``$schema`` says
    (as the reference reads every json-schema.org dialect), and adds the ``$id`` it requires."""
    b = formatron.FormatronBackend()
    for dialect in ("http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"):
        spec = JsonSchema({"$schema": dialect, **PERSON})
        assert isinstance(b.compile(spec, bpe), Compiled), dialect


def test_formatron_refusals_are_values(formatron: Any, bpe: tm.Vocabulary) -> None:
    b = formatron.FormatronBackend()
    refused = {
        "gbnf": Gbnf('root ::= "a"'),
        "boolean schema": JsonSchema(True),
        "root type": JsonSchema({"type": "string"}),
        "python regex syntax": Regex("(a"),
        "rust regex: lookahead": Regex("(?=a)a"),
        "empty choice": Choice([]),
    }
    for what, spec in refused.items():
        out = b.compile(spec, bpe)
        assert isinstance(out, Refused), (what, out)
        assert out.reason, what


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "object", "anyOf": [{"type": "object"}]}, id="anyOf-with-siblings"),
        pytest.param(
            {"type": "object", "properties": {"s": {"type": "string", "pattern": "a+", "minLength": 2}}},
            id="pattern-with-minLength",
        ),
    ],
)
def test_formatron_assertion_refusals_are_values(formatron: Any, bpe: tm.Vocabulary, schema: Any) -> None:
    """formatron rejects some keyword combinations with an assertion (later 0.4.x releases; 0.4.0
    compiles them): the adapter returns Refused exactly when formatron itself raises."""
    from formatron.formatter import FormatterBuilder
    from formatron.schemas import json_schema

    full = {"$id": formatron.SCHEMA_ID, **schema, "$schema": formatron.SCHEMA_DIALECT}
    try:
        FormatterBuilder().json(json_schema.create_schema(full))
        raised = None
    except AssertionError as e:
        raised = e
    out = formatron.FormatronBackend().compile(JsonSchema(schema), bpe)
    if raised is None:
        assert isinstance(out, Compiled), out
    else:
        assert isinstance(out, Refused) and str(raised) in out.reason, (out, raised)


# -- transformers-CFG ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tcfg() -> Any:
    pytest.importorskip("transformers_cfg")
    import props.backends.transformers_cfg as mod

    return mod


def _tcfg_raw_mask(
    mod: Any, compiled: Compiled, vocab: tm.Vocabulary, prefix: list[int], root: str
) -> np.ndarray:
    """transformers-CFG from scratch: a new recognizer on the grammar text, the prefix run through
    its own sequence update (``_update_state_with_single_token_seq(..., as_string=False)``), then
    ``filter_vocab``."""
    from transformers_cfg.grammar_utils import IncrementalGrammarConstraint

    tokens = mod._RawTokens(vocab)
    recognizer = IncrementalGrammarConstraint(
        compiled.handle.grammar, root, tokens, trie=mod.raw_trie(tokens), homomorphism=mod.RawMapping(tokens)
    )
    state = recognizer._update_state_with_single_token_seq(prefix, None, as_string=False)
    acceptance = recognizer.filter_vocab(state, None)
    return pack_ids(np.flatnonzero(acceptance.numpy()), len(vocab))


TCFG_WALKS = [
    pytest.param(Choice(["yes", "no", "maybe so"]), "maybe so", id="choice"),
    pytest.param(Gbnf(EMAIL_GBNF), "ab@cd.org", id="gbnf"),
    pytest.param(Gbnf(LIST_GBNF), '[12, "né", 3]', id="gbnf-unicode"),
    pytest.param(Gbnf("top ::= x x\nx ::= [ab]\n", root="top"), "ab", id="root-name"),
]


def test_transformers_cfg_satisfies_the_protocols(tcfg: Any, byte: tm.Vocabulary) -> None:
    b = tcfg.TransformersCFGBackend()
    assert isinstance(b, Backend) and b.name == "transformers-cfg" and b.version
    assert b.profile.notes
    compiled = b.compile(Choice(["ab", "c"]), byte)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    assert isinstance(m, BackendMatcher) and isinstance(m.fork(), BackendMatcher)
    assert REGISTRY["transformers-cfg"].adapter == "props.backends.transformers_cfg:TransformersCFGBackend"


@pytest.mark.parametrize(("spec", "text"), TCFG_WALKS)
def test_transformers_cfg_canonical_walk_matches_the_recognizer(
    tcfg: Any, bpe: tm.Vocabulary, spec: Any, text: str
) -> None:
    b = tcfg.TransformersCFGBackend()
    compiled = b.compile(spec, bpe)
    assert isinstance(compiled, Compiled), compiled
    root = spec.root if isinstance(spec, Gbnf) else "root"
    ids = _ids(bpe, text)
    eos = min(bpe.eos_ids)
    m = b.matcher(compiled)
    for k, t in enumerate(ids):
        mask = m.mask()
        assert mask.dtype == np.int32 and mask.shape == (num_words(len(bpe)),)
        np.testing.assert_array_equal(mask, _tcfg_raw_mask(tcfg, compiled, bpe, ids[:k], root), f"step {k}")
        assert _bit(mask, t), f"canonical token {bpe.token_repr(t)} masked at step {k}"
        assert _bit(mask, eos) == m.is_accepting()
        bad = next(i for i in bpe.text_ids if not _bit(mask, i))
        assert isinstance(m.accept(bad), Rejected)
        np.testing.assert_array_equal(m.mask(), mask)
        out = m.accept(t)
        assert isinstance(out, Accepted) and not out.terminated
    np.testing.assert_array_equal(m.mask(), _tcfg_raw_mask(tcfg, compiled, bpe, ids, root))
    assert m.is_accepting()
    end = m.accept(eos)
    assert isinstance(end, Accepted) and end.terminated and m.is_terminated() and not m.mask().any()
    assert isinstance(m.accept(ids[0]), Rejected)


def test_transformers_cfg_fork_isolation_and_rollback_equals_replay(tcfg: Any, bpe: tm.Vocabulary) -> None:
    b = tcfg.TransformersCFGBackend()
    compiled = b.compile(Gbnf(LIST_GBNF), bpe)
    assert isinstance(compiled, Compiled)
    _fork_and_rollback(b, compiled, _walk_ids(bpe, '[1, "é", 22]'))


def test_transformers_cfg_refusals_are_values(tcfg: Any, bpe: tm.Vocabulary) -> None:
    b = tcfg.TransformersCFGBackend()
    refused = {
        "regex": Regex("a+"),
        "json schema": JsonSchema({"type": "object"}),
        "syntax error": Gbnf('root ::= "a'),
        "no such root": Gbnf('start ::= "a"'),
        "empty choice": Choice([]),
    }
    for what, spec in refused.items():
        out = b.compile(spec, bpe)
        assert isinstance(out, Refused), (what, out)
        assert out.reason, what
    assert "expecting an end quote" in b.compile(Gbnf('root ::= "a'), bpe).reason  # the parser's own words


def test_transformers_cfg_literal_escapes_round_trip(tcfg: Any, byte: tm.Vocabulary) -> None:
    """A choice option with quotes, backslashes, control and non-ASCII characters is the same string
    in the recognizer: exactly its bytes walk to an accepting state."""
    option = 'a"\\\n\tœ'
    b = tcfg.TransformersCFGBackend()
    compiled = b.compile(Choice([option]), byte)
    assert isinstance(compiled, Compiled)
    m = b.matcher(compiled)
    for t in _ids(byte, option):
        assert isinstance(m.accept(t), Accepted)
    assert m.is_accepting()


# -- both ----------------------------------------------------------------------------------------------
def _fork_and_rollback(b: Any, compiled: Compiled, ids: list[int]) -> None:
    """Forks are independent and rollback(k) leaves the matcher as a fresh walk of the ids kept."""

    def walked(n: int) -> Any:
        m = b.matcher(compiled)
        for t in ids[:n]:
            assert isinstance(m.accept(t), Accepted)
        return m

    half = len(ids) // 2
    m = walked(half)
    before = m.mask().copy()
    f = m.fork()
    for t in ids[half:]:
        assert isinstance(f.accept(t), Accepted)
    assert f.is_terminated() and not m.is_terminated()
    np.testing.assert_array_equal(m.mask(), before)  # the fork's walk left the original alone
    g = m.fork()
    assert isinstance(m.accept(ids[half]), Accepted)
    np.testing.assert_array_equal(g.mask(), before)  # and the original's walk left the fork alone

    full = walked(len(ids))
    for k in range(len(ids) + 1):
        m = walked(len(ids))
        m.rollback(k)
        fresh = walked(len(ids) - k)
        np.testing.assert_array_equal(m.mask(), fresh.mask(), f"rollback({k})")
        assert m.is_accepting() == fresh.is_accepting() and m.is_terminated() == fresh.is_terminated()
        if k:  # and the matcher goes on from there as the fresh one does
            assert isinstance(m.accept(ids[len(ids) - k]), Accepted)
    with pytest.raises(ValueError):
        full.rollback(len(ids) + 1)


def _certify_case(name: str, case: Case, vocab: tm.Vocabulary) -> Any:
    report = certify(name, tokenizers=[vocab], corpus=(), cases=[case], examples=0, strings=2, minimize_s=0)
    assert report.exit_code != 3, report.data.get("internal_errors")
    assert not report.data.get("internal_errors")
    assert report.data["specs"]["checked"] >= 1, report.data["specs"]
    return report


def test_formatron_certify_runs_and_finds_eager_ending(formatron: Any, byte: tm.Vocabulary) -> None:
    """kbnf ends as soon as the start rule is complete: after ``a`` the regex ``a|ab`` can no longer
    continue with ``b`` (the reference allows it), a completeness finding."""
    case = Case(SpecRef(SpecKind.REGEX, "a|ab", "a-or-ab", "test"), valid=("a", "ab"))
    report = _certify_case("formatron", case, byte)
    hits = [f for f in report.findings if f.invariant.startswith("completeness") and f.token_bytes == b"b"]
    assert hits, [f.message for f in report.findings]


def test_transformers_cfg_certify_runs(tcfg: Any, byte: tm.Vocabulary) -> None:
    case = Case(SpecRef(SpecKind.GBNF, EMAIL_GBNF, "email", "test"), valid=("ab@cd.org", "x@y.com"))
    report = _certify_case("transformers-cfg", case, byte)
    assert report.data["backend"]["name"] == "transformers-cfg"
