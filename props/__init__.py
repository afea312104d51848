"""props: maskcert's invariants, backend adapters and certification (DESIGN §4, §6).

The public API, loaded on first use (``import props`` stays cheap for the command line):

* :func:`certify` — run every invariant against a backend (``props.certify(MyAdapter, tokenizers=[...])``)
  and get a :class:`Report` (``.findings``, ``.exit_code``, ``.write(dir)``);
* :class:`Backend`, :class:`BackendMatcher`, :class:`DeclaredProfile` — the contract an adapter implements;
* :func:`load_backend` — a registered adapter or ``module:Class``;
* :class:`Finding`, :class:`FindingFailure` — what certification and fuzzing report;
* :func:`invariant_properties`, :class:`Property` — the invariants as Hypothesis properties.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "certify",
    "Report",
    "Backend",
    "BackendMatcher",
    "DeclaredProfile",
    "load_backend",
    "Finding",
    "FindingFailure",
    "invariant_properties",
    "Property",
]

_WHERE = {
    "certify": "props.certification",
    "Report": "props.certification",
    "Backend": "props.backend",
    "BackendMatcher": "props.backend",
    "DeclaredProfile": "props.backend",
    "load_backend": "props.adapters",
    "Finding": "props.findings",
    "FindingFailure": "props.findings",
    "invariant_properties": "props.properties",
    "Property": "props.properties",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'props' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
