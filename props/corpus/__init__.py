"""The corpus ``maskcert certify`` runs, and the independent validators its certificates rely on.

* :func:`load_corpus` — :class:`Case` records (a :class:`~props.contract.findings.SpecRef` with instances in
  and out of its language) from the builtin data files (``builtin/*.json``), the shared
  JSON-Schema-Test-Suite and JSONSchemaBench copies, or user files; skips are recorded with their
  reasons in :attr:`Corpus.skipped`.
* :func:`serializations` — the JSON texts of one instance a ``JsonProfile`` allows.
* :func:`validate_output` / :func:`validate_instance` — is this output in the spec's language, decided
  without ``refdecoder`` (``json`` + ``jsonschema``, ``re``, a second GBNF recognizer, membership).
* :func:`reference_spec` — the ``refdecoder`` spec a ``SpecRef`` names.
"""

from __future__ import annotations

import refdecoder
from props.contract.findings import SpecKind, SpecRef
from props.corpus import _load
from props.corpus._errors import CorpusError
from props.corpus._load import Case, Corpus, corpus_names, load_corpus
from props.corpus._serialize import serializations
from props.corpus._validate import (
    draft_validator,
    parse_json_output,
    profile_of,
    schema_validator,
    validate_instance,
    validate_output,
    validator_draft,
)
from props.corpus.features import feature_cases

_load.GENERATED[_load.FEATURES] = feature_cases  # load_corpus("features"): the feature probe suite

__all__ = [
    "Case",
    "Corpus",
    "CorpusError",
    "corpus_names",
    "draft_validator",
    "schema_validator",
    "load_corpus",
    "parse_json_output",
    "profile_of",
    "reference_spec",
    "serializations",
    "validate_instance",
    "validate_output",
    "validator_draft",
]


def reference_spec(spec: SpecRef) -> refdecoder.Spec:
    """The ``refdecoder`` spec ``spec`` names (``JsonSchema`` with its profile, ``Regex``, ``Gbnf``
    — source a grammar text or ``{"text", "root"}`` — or ``Choice``); a profile that is not a
    ``JsonProfile``'s fields is a :class:`CorpusError`."""
    if spec.kind == SpecKind.JSON_SCHEMA:
        return spec.to_spec(profile_of(spec))
    return spec.to_spec()
