"""The one backend registry, and loading adapters from it.

Every backend maskcert knows is one :class:`BackendInfo` in :data:`REGISTRY`: its adapter class, the
engine's import name and pip distribution, the versions its adapter is tested against, and the
adapter's constructor defaults (which reproducers replay; ``tests/test_repro.py`` checks them
against the adapters' signatures). The certifier, the worker subprocess, reproducers, benchmarks,
``maskcert doctor`` and ``ci/fuzz.sh`` all read this table; nothing else lists backends.

``reference`` always loads; a third-party engine loads when its package is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from props.contract.attribution import AdapterFault, adapter_fault, adapter_modules
from props.contract.compat import version_of
from refdecoder.errors import MaskcertError

__all__ = [
    "BackendInfo",
    "REGISTRY",
    "ENGINES",
    "ADAPTERS",
    "load_backend",
    "adapter_class",
    "BackendUnavailable",
    "engine_version",
]


@dataclass(frozen=True)
class BackendInfo:
    """A registered backend. ``tested`` is a PEP 440 specifier of the engine versions the adapter's
    tests passed on; ``defaults`` the adapter constructor's defaults for the options a reproducer
    replays."""

    name: str
    adapter: str  # "module:Class"
    import_name: str
    distribution: str
    tested: str
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))


REGISTRY: Mapping[str, BackendInfo] = MappingProxyType(
    {
        info.name: info
        for info in (
            BackendInfo(
                "reference",
                "props.backends.reference:ReferenceBackend",
                "refdecoder",
                "maskcert",
                ">=0.1",
                {"profile": None},
            ),
            BackendInfo(
                "xgrammar",
                "props.backends.xgrammar:XGrammarBackend",
                "xgrammar",
                "xgrammar",
                "==0.2.9",
                {
                    "any_whitespace": True,
                    "max_whitespace_cnt": None,
                    "strict_mode": True,
                    "max_threads": 8,
                    "cache_enabled": True,
                },
            ),
            BackendInfo(
                "llguidance",
                "props.backends.llguidance:LLGuidanceBackend",
                "llguidance",
                "llguidance",
                "==1.9.1",
                {
                    "whitespace_flexible": True,
                    "general_unicode_escapes": True,
                    "limits": None,
                    "log_level": 1,
                },
            ),
            BackendInfo(
                "outlines-core",
                "props.backends.outlines_core:OutlinesCoreBackend",
                "outlines_core",
                "outlines-core",
                "==0.2.14",
                {"whitespace_pattern": r"[ \t\n\r]?", "max_recursion_depth": 3, "max_rollback": 4096},
            ),
            BackendInfo(
                "lm-format-enforcer",
                "props.backends.lmfe:LMFormatEnforcerBackend",
                "lmformatenforcer",
                "lm-format-enforcer",
                "==0.11.3",
                {"max_consecutive_whitespaces": 12},
            ),
        )
    }
)

#: The third-party engines, in the registry's order.
ENGINES: tuple[str, ...] = tuple(name for name in REGISTRY if name != "reference")

#: name -> "module:Class", derived from :data:`REGISTRY`.
ADAPTERS: Mapping[str, str] = MappingProxyType({name: info.adapter for name, info in REGISTRY.items()})


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
        info = REGISTRY.get(name)
        installed = engine_version(name)
        if info is not None and installed is not None:  # the engine is there, the adapter cannot load it
            raise BackendUnavailable(
                f"backend {name!r}: the installed {info.distribution} {installed} lacks what the adapter imports "
                f"({e}); the adapter is tested on {info.distribution}{info.tested} "
                f"(pip install '{info.distribution}{info.tested}')"
            ) from e
        raise BackendUnavailable(
            f"backend {name!r} is not available: {e} (pip install 'maskcert[backends]')"
        ) from e
    cls = getattr(mod, cls_name, None)
    if cls is None:
        raise BackendUnavailable(f"backend {name!r}: module {mod_name!r} has no attribute {cls_name!r}")
    return cls


def engine_version(name: str) -> str | None:
    """The installed version of a registered backend's engine distribution (None: not installed,
    or not registered)."""
    info = REGISTRY.get(name)
    return version_of(info.distribution) if info is not None else None


def load_backend(name: str, **options: Any) -> Any:
    """An adapter by registered name or ``module:Class``. An exception of the adapter's own making
    while it starts (an API the installed engine lacks) is an
    :class:`~props.contract.attribution.AdapterFault`, not the engine's."""
    cls = adapter_class(name)
    try:
        return cls(**options)
    except Exception as e:
        why = adapter_fault(e, adapter_modules(cls))
        if why is None:
            raise
        raise AdapterFault(name, engine_version(name) or "unknown", "start", why) from e
