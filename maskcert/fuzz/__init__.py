"""Fuzzing campaigns (``maskcert fuzz``): properties under the ``fuzz`` Hypothesis profile until a
time budget is spent, every failure kept in a persistent example database and in ``findings.jsonl``.

A campaign replays the database first (known failures are reported before anything new), then
explores with fresh seeds; it runs in this process, in ``workers`` local processes sharing one
database, or as Ray tasks; SIGINT/SIGTERM stop it without losing a finding. See ``docs/campaigns.md``.

Targets (:data:`BUILTIN_TARGETS`): ``invariants`` (``props.checks.properties`` for a backend),
``reference`` (the reference against jsonschema, ``re``, a second GBNF parser, the slow mask
definition, and the sampler's exact model), ``sampler``, ``serving``, ``hostile`` (adversarial specs
against the reference: typed outcomes in bounded time and memory) — or any ``module:function``
returning a list of :class:`Property`.
"""

from maskcert.fuzz._campaign import CampaignResult, FindingEvent, run_campaign
from maskcert.fuzz._config import (
    BUILTIN_TARGETS,
    CampaignConfig,
    FuzzUsageError,
    check_database,
    open_database,
    parse_budget,
)
from maskcert.fuzz._log import FindingsLog, read_findings
from maskcert.fuzz._property import Property, PropertyLike, TargetContext, cover, coverage_snapshot
from maskcert.fuzz._reference import reference_properties
from maskcert.fuzz._sampler import sampler_properties
from maskcert.fuzz._serving import serving_properties
from maskcert.fuzz._targets import build_properties, invariants_target, resolve_target

__all__ = [
    "BUILTIN_TARGETS",
    "CampaignConfig",
    "CampaignResult",
    "FindingEvent",
    "FindingsLog",
    "FuzzUsageError",
    "Property",
    "PropertyLike",
    "TargetContext",
    "build_properties",
    "invariants_target",
    "reference_properties",
    "sampler_properties",
    "serving_properties",
    "check_database",
    "cover",
    "coverage_snapshot",
    "open_database",
    "parse_budget",
    "read_findings",
    "resolve_target",
    "run_campaign",
]
