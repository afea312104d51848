"""Targets: named factories of properties. A factory takes a :class:`TargetContext` and returns a list
of properties (``name`` + ``@given`` test without settings).

``reference``  the reference against independent oracles (jsonschema, ``re``, a second GBNF parser,
               the slow per-token mask definition) plus the sampler checks;
``sampler``    the sampler against its exact model only;
``serving``    the serving simulation and its replay checker over random seeds and configurations;
``invariants`` the backend-vs-reference invariants of ``props.checks.properties`` (imported when used);
``hostile``    adversarial specs against the reference: typed outcome, bounded time and memory
               (``maskcert.fuzz._hostile``).

Any ``module:function`` is a target too (a user's own properties, the tests' toy backends).
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from maskcert.fuzz._config import BUILTIN_TARGETS, CampaignConfig, FuzzUsageError
from maskcert.fuzz._property import PropertyLike, TargetContext

__all__ = ["resolve_target", "build_properties", "invariants_target", "check_target"]

Factory = Callable[[TargetContext], list[Any]]


def invariants_target(ctx: TargetContext) -> list[Any]:
    """``props.checks.properties.invariant_properties(backend, vocabularies)`` for the chosen backend."""
    from props.checks.properties import invariant_properties

    return list(invariant_properties(ctx.load_backend(), ctx.vocabularies()))


def _reference_target(ctx: TargetContext) -> list[Any]:
    from maskcert.fuzz._reference import reference_properties
    from maskcert.fuzz._sampler import sampler_properties

    return reference_properties(ctx) + sampler_properties(ctx)


def _sampler_target(ctx: TargetContext) -> list[Any]:
    from maskcert.fuzz._sampler import sampler_properties

    return sampler_properties(ctx)


def _hostile_target(ctx: TargetContext) -> list[Any]:
    from maskcert.fuzz._hostile import hostile_properties

    return hostile_properties(ctx)


def _serving_target(ctx: TargetContext) -> list[Any]:
    from maskcert.fuzz._serving import serving_properties

    return serving_properties(ctx)


_BUILTIN: dict[str, Factory] = {
    "invariants": invariants_target,
    "reference": _reference_target,
    "sampler": _sampler_target,
    "serving": _serving_target,
    "hostile": _hostile_target,
}
assert set(_BUILTIN) == set(BUILTIN_TARGETS)


def resolve_target(target: str) -> Factory:
    """The factory for a built-in name or ``module:function``; :class:`FuzzUsageError` otherwise."""
    if target in _BUILTIN:
        return _BUILTIN[target]
    if ":" not in target:
        raise FuzzUsageError("--target", target, f"one of {', '.join(BUILTIN_TARGETS)} or module:function")
    mod_name, func_name = target.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise FuzzUsageError("--target", target, f"an importable module ({e})") from e
    func = getattr(mod, func_name, None)
    if not callable(func):
        raise FuzzUsageError("--target", target, f"a function {func_name!r} in module {mod_name!r}")
    factory: Factory = func
    return factory


def check_target(config: CampaignConfig) -> None:
    """Fail early (before any worker starts) on a target or backend that cannot run here."""
    resolve_target(config.target)
    if config.target == "invariants" and importlib.util.find_spec("props.checks.properties") is None:
        raise FuzzUsageError(
            "--target", "invariants", "props.checks.properties (not in this installation yet)"
        )
    if config.target in ("invariants", "serving"):
        from props.backends import engine_request, load_backend

        name, engine_path = engine_request(config.backend)  # NAME==VERSION: installed into the engine cache
        if engine_path is None:
            load_backend(name)  # BackendUnavailable (exit 2) when it is not installed


def build_properties(config: CampaignConfig) -> list[PropertyLike]:
    ctx = TargetContext(config.backend, config.tokenizers, config.isolate, dict(config.options))
    props: list[PropertyLike] = list(resolve_target(config.target)(ctx))
    if config.properties:
        props = [p for p in props if any(fnmatch.fnmatchcase(p.name, pat) for pat in config.properties)]
    if not props:
        raise FuzzUsageError("--target", config.target, "a target with at least one (selected) property")
    names = [p.name for p in props]
    if len(set(names)) != len(names):
        raise FuzzUsageError("--target", config.target, f"properties with distinct names, not {names}")
    return props
