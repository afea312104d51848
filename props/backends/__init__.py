"""The one backend registry, and loading adapters from it.

Every backend maskcert knows is one :class:`BackendInfo` in :data:`REGISTRY`: its adapter class, the
engine's import name and pip distribution, the versions its adapter is tested against, and the
adapter's constructor defaults (which reproducers replay; ``tests/test_repro.py`` checks them
against the adapters' signatures). The certifier, the worker subprocess, reproducers, benchmarks,
``maskcert doctor`` and ``ci/fuzz.sh`` all read this table; nothing else lists backends.

``reference`` always loads; a third-party engine loads when its package is installed.

Versions. ``tested`` is the range of releases the adapter supports by feature detection (each adapter
module's "Releases" note says what it detects), from the oldest release it drives to the newest it
was run on; ``releases`` names the releases it was run on (``ci/versions.sh`` certifies the
oldest and the newest). A release below the range is refused before anything runs
(:func:`check_version`, a usage error naming the range); above it, the adapter is tried, and an API
it cannot find is a usage error too (:mod:`props.contract.attribution`). ``--backend NAME==VERSION``
runs a release from the engine cache (:mod:`props.backends.engines`, :func:`engine_request`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from props.backends._common import UnsupportedOption
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
    "UnsupportedVersion",
    "engine_version",
    "check_version",
    "engine_request",
    "UnsupportedOption",
]


@dataclass(frozen=True)
class BackendInfo:
    """A registered backend. ``tested`` is a PEP 440 specifier of the engine versions the adapter
    supports (``>=oldest,<=newest``: see the module docstring), ``releases`` the releases it was run
    on (oldest first: ``tests/test_engine_releases.py`` drives each from the engine cache, ``ci/versions.sh``
    certifies the oldest and the newest); ``defaults`` the adapter constructor's defaults for the
    options a reproducer replays."""

    name: str
    adapter: str  # "module:Class"
    import_name: str
    distribution: str
    tested: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    releases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        try:
            spec = SpecifierSet(self.tested)
            for v in self.releases:
                if Version(v) not in spec:
                    raise ValueError(
                        f"{self.name}: certified release {v} lies outside tested {self.tested!r}"
                    )
        except (InvalidSpecifier, InvalidVersion) as e:
            raise ValueError(f"{self.name}: tested {self.tested!r} / releases {self.releases}: {e}") from e

    @property
    def oldest(self) -> str | None:
        """The lower bound of ``tested`` (``>=X`` or ``==X``), None when it has none."""
        for s in SpecifierSet(self.tested):
            if s.operator in (">=", "==", "~="):
                return s.version
        return None


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
                ">=0.1.17,<=0.2.9",
                {
                    "any_whitespace": True,
                    "max_whitespace_cnt": None,
                    "strict_mode": True,
                    "max_threads": 8,
                    "cache_enabled": True,
                },
                ("0.1.17", "0.1.19", "0.1.23", "0.2.9"),
            ),
            # xgrammar's transformers LogitsProcessor (xgrammar.contrib.hf), driven as model.generate
            # drives it on padded logits: certifies the glue users run (props/backends/xgrammar_hf.py).
            BackendInfo(
                "xgrammar-hf",
                "props.backends.xgrammar_hf:XGrammarHFBackend",
                "xgrammar",
                "xgrammar",
                ">=0.2.9,<=0.2.9",
                {
                    "any_whitespace": True,
                    "max_whitespace_cnt": None,
                    "strict_mode": True,
                    "max_threads": 8,
                    "cache_enabled": True,
                    "pad_to": 64,
                    "tokenizer_info": "huggingface",
                },
                ("0.2.9",),
            ),
            BackendInfo(
                "llguidance",
                "props.backends.llguidance:LLGuidanceBackend",
                "llguidance",
                "llguidance",
                ">=0.7.1,<=1.9.1",
                {
                    "whitespace_flexible": True,
                    "general_unicode_escapes": True,
                    "limits": None,
                    "log_level": 1,
                },
                ("0.7.1", "0.7.30", "1.2.0", "1.9.1"),
            ),
            BackendInfo(
                "outlines-core",
                "props.backends.outlines_core:OutlinesCoreBackend",
                "outlines_core",
                "outlines-core",
                ">=0.1.14,<=0.2.14",
                {"whitespace_pattern": r"[ \t\n\r]?", "max_recursion_depth": 3, "max_rollback": 4096},
                ("0.1.14", "0.1.26", "0.2.2", "0.2.14"),
            ),
            BackendInfo(
                "lm-format-enforcer",
                "props.backends.lmfe:LMFormatEnforcerBackend",
                "lmformatenforcer",
                "lm-format-enforcer",
                ">=0.9.6,<=0.11.3",
                {"max_consecutive_whitespaces": 12},
                ("0.9.6", "0.10.12", "0.11.3"),
            ),
            # formatron's grammars on its engine kbnf, driven per step (props/backends/formatron.py);
            # formatron 0.4.0-0.5.0 import only with pydantic<2.12 (see that module's "Releases").
            BackendInfo(
                "formatron",
                "props.backends.formatron:FormatronBackend",
                "formatron",
                "formatron",
                ">=0.4.0,<=0.5.0",
                {},
                ("0.4.0", "0.4.9", "0.5.0"),
            ),
            # transformers-CFG's token recognizer over raw token bytes (props/backends/transformers_cfg.py).
            BackendInfo(
                "transformers-cfg",
                "props.backends.transformers_cfg:TransformersCFGBackend",
                "transformers_cfg",
                "transformers-cfg",
                ">=0.2.7,<=0.2.7",
                {},
                ("0.2.7",),
            ),
            # llama.cpp's grammar sampler through llama-cpp-python's ctypes API, on a vocabulary-only GGUF
            # written from the vocabulary (props/backends/llama_cpp.py; built by ci/install_llama_cpp.sh).
            BackendInfo(
                "llama-cpp",
                "props.backends.llama_cpp:LlamaCppBackend",
                "llama_cpp",
                "llama-cpp-python",
                ">=0.3.36,<=0.3.36",
                {},
                ("0.3.36",),
            ),
            # SynCode's logits processor over an HF tokenizer (props/backends/syncode.py): Lark grammars only.
            BackendInfo(
                "syncode",
                "props.backends.syncode:SyncodeBackend",
                "syncode",
                "syncode",
                ">=0.4.16,<=0.4.16",
                {"mode": "grammar_strict"},
                ("0.4.16",),
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


class UnsupportedVersion(BackendUnavailable):
    """An engine release below the range its adapter supports (a usage error naming the range)."""

    def __init__(self, name: str, version: str, tested: str, distribution: str) -> None:
        self.backend = name
        self.version = version
        self.tested = tested
        super().__init__(
            f"{name} {version} is below the releases maskcert's adapter supports ({distribution}{tested}); "
            f"expected a release in that range (e.g. --backend {name}=={tested.split(',')[0].lstrip('>=~')})"
        )


def check_version(name: str, version: str | None) -> None:
    """:class:`UnsupportedVersion` when ``version`` of registered backend ``name`` lies below its
    ``tested`` range (an unparsable version or an unregistered name passes: nothing is known)."""
    info = REGISTRY.get(name)
    if info is None or version is None or info.oldest is None:
        return
    try:
        below = Version(version) < Version(info.oldest)
    except InvalidVersion:
        return
    if below:
        raise UnsupportedVersion(name, version, info.tested, info.distribution)


def engine_request(backend: str, *, install: bool = True) -> tuple[str, Path | None]:
    """``NAME`` or ``NAME==VERSION`` -> the backend name and the directory of that release in the
    engine cache (None for a plain name: the environment's release). Installs on a miss unless
    ``install`` is false (then a miss is :class:`BackendUnavailable`). Raises
    :class:`UnsupportedVersion` below the tested range, ``BackendUnavailable`` for an unregistered
    name with a version, :class:`~props.backends.engines.EngineInstallError` when pip fails."""
    from props.backends import engines

    try:
        request = engines.parse_request(backend)
    except ValueError as e:
        raise BackendUnavailable(f"--backend {e}") from e
    if request.version is None:
        return backend, None
    info = REGISTRY.get(request.name)
    if info is None or info.name == "reference":
        raise BackendUnavailable(
            f"--backend {backend!r}: a version can be given for a registered engine only "
            f"({', '.join(ENGINES)}), expected NAME==VERSION with one of those names"
        )
    check_version(info.name, request.version)
    path = engines.cached_engine(info.distribution, request.version)
    if path is None:
        if not install:
            raise BackendUnavailable(
                f"{info.distribution}=={request.version} is not in the engine cache ({engines.cache_root()})"
            )
        path = engines.install_engine(info.distribution, request.version)
    return info.name, path
