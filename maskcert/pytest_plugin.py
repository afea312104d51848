"""The pytest plugin: ``pytest --maskcert-backend module:Class`` runs the invariants in a backend's CI.

Installed with maskcert (entry point ``pytest11``), inactive unless ``--maskcert-backend`` is given.
Then it adds one test item per (corpus case, tokenizer), named ``maskcert[<backend>/<case>/<tokenizer>]``,
each running :func:`maskcert.certification.certify_case`; an item fails when it has any finding and prints each
finding's invariant, step, token, both verdicts and certificate. Refusals and declared profile
differences are not failures. Options: ``--maskcert-tokenizer`` (repeatable; default ``bpe``),
``--maskcert-corpus`` (repeatable; default ``builtin``), ``--maskcert-examples`` (Hypothesis examples
per search, default 4), ``--maskcert-in-process`` (no worker subprocess).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

__all__ = ["MaskcertItem"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("maskcert", "certify a structured-generation backend against the reference")
    group.addoption("--maskcert-backend", default=None, help="adapter name or module:Class to certify")
    group.addoption(
        "--maskcert-tokenizer",
        action="append",
        default=None,
        help="tokenizers_matrix name or tokenizer file (repeatable; default: bpe)",
    )
    group.addoption(
        "--maskcert-corpus",
        action="append",
        default=None,
        help="builtin | json-schema-test-suite | jsonschemabench | PATH (repeatable; default: builtin)",
    )
    group.addoption("--maskcert-examples", type=int, default=4, help="Hypothesis examples per search")
    group.addoption("--maskcert-in-process", action="store_true", help="run the backend in this process")


class MaskcertItem(pytest.Item):
    """One (case, tokenizer) of the certification, as a test."""

    def __init__(self, *, case: Any, vocab: Any, state: dict[str, Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.vocab = vocab
        self.state = state

    def runtest(self) -> None:
        from maskcert.certification import certify_case, resolve_backend

        config = self.state["config"]
        if "backend" not in self.state:
            self.state["backend"] = resolve_backend(
                self.state["name"], dict(config.backend_options), config.isolate
            )
        result = certify_case(self.state["backend"], self.case, self.vocab, **config.case_options())
        if result.findings:
            raise MaskcertFindings(result.findings)
        if result.status == "checked" and not result.checks:
            raise AssertionError("no invariant was checked")  # pragma: no cover - certify_case always checks

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, MaskcertFindings):
            return excinfo.value.describe()
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "maskcert", None, self.name


class MaskcertFindings(AssertionError):
    def __init__(self, findings: list[Any]) -> None:
        self.findings = findings
        super().__init__(f"{len(findings)} finding(s)")

    def describe(self) -> str:
        lines = []
        for f in self.findings:
            lines.append(f"[{f.invariant}] {f.message}")
            lines.append(
                f"    step {f.step}, prefix {f.prefix_bytes!r}, token {f.token_id} {f.token_bytes!r}"
            )
            lines.append(f"    backend:   {f.backend_verdict}")
            lines.append(f"    reference: {f.reference_verdict}")
            cert = json.dumps(f.to_json()["certificate"], ensure_ascii=False, default=str)
            lines.append(f"    certificate: {cert[:600]}")
        return "\n".join(lines)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    backend = config.getoption("--maskcert-backend")
    if not backend:
        return
    from maskcert.certification import CertifyConfig, load_vocabularies
    from props.corpus import load_corpus

    run = CertifyConfig(
        tokenizers=config.getoption("--maskcert-tokenizer") or ["bpe"],
        corpus=config.getoption("--maskcert-corpus") or ["builtin"],
        examples=config.getoption("--maskcert-examples"),
        isolate=False if config.getoption("--maskcert-in-process") else None,
    )
    vocabs = load_vocabularies(run.tokenizers)
    cases = [c for name in run.corpus for c in load_corpus(name)]
    state: dict[str, Any] = {"name": backend, "config": run}
    for case in cases:
        for vocab in vocabs:
            items.append(
                MaskcertItem.from_parent(
                    session,
                    name=f"maskcert[{backend}/{case.name}/{vocab.name}]",
                    case=case,
                    vocab=vocab,
                    state=state,
                )
            )
