"""props: maskcert's checking library, in layers that each import only from the ones below
(``docs/architecture.md``; enforced by the import-linter contracts in ``pyproject.toml``):

* :mod:`props.contract` — the typed contract: findings, invariants, severities, the ``Backend``
  protocol, spec references;
* :mod:`props.corpus` — specs with valid and invalid instances, and the *independent* validators
  (the oracle: ``jsonschema``, ``re``/``regex``, a second GBNF parser) that certificates are checked by;
* :mod:`props.checks` — the invariants as functions, as Hypothesis properties and as a stateful machine;
* :mod:`props.backends` — the one backend registry, the adapters and the worker subprocess;
* :mod:`props.output` — reports (JSON, Markdown, HTML) and standalone reproducers.

The application (``maskcert certify``, ``fuzz``, ``bench``, the pytest plugin) is the top-level
:mod:`maskcert` package: ``maskcert.certify(MyAdapter, tokenizers=[...])``.
"""
