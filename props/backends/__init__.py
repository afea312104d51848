"""Backend adapters: ``reference`` always; third-party engines when their packages are installed."""

from __future__ import annotations

import importlib
from typing import Any

from refdecoder.errors import MaskcertError

__all__ = ["load_backend", "adapter_class", "ADAPTERS", "BackendUnavailable"]

# name -> "module:Class"
ADAPTERS = {
    "reference": "props.backends.reference:ReferenceBackend",
    "xgrammar": "props.backends.xgrammar:XGrammarBackend",
    "llguidance": "props.backends.llguidance:LLGuidanceBackend",
    "outlines-core": "props.backends.outlines_core:OutlinesCoreBackend",
    "lm-format-enforcer": "props.backends.lmfe:LMFormatEnforcerBackend",
}


class BackendUnavailable(MaskcertError, ImportError):
    """An optional backend's package is not installed (the CLI exits 2 with this message)."""


def adapter_class(name: str) -> Any:
    """The adapter class for a registered name or ``module:Class`` (imports its backend package:
    :class:`BackendUnavailable` when that is not installed)."""
    target = ADAPTERS.get(name, name)
    if ":" not in target:
        raise BackendUnavailable(
            f"unknown backend {name!r}: expected one of {sorted(ADAPTERS)} or 'module:Class'"
        )
    mod_name, cls_name = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise BackendUnavailable(
            f"backend {name!r} is not available: {e} (pip install 'maskcert[backends]')"
        ) from e
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise BackendUnavailable(f"backend {name!r}: module {mod_name!r} has no attribute {cls_name!r}")
    return cls


def load_backend(name: str, **options: Any) -> Any:
    """An adapter by registered name or ``module:Class``."""
    return adapter_class(name)(**options)
