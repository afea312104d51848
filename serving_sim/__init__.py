"""serving_sim: a continuous-batching serving loop with switchable faults, and the checker that
catches them (docs/design.md §5).

``Engine`` runs requests (beams, ``n > 1``, speculation, preemption, streaming) over a model and a
backend adapter; ``InvariantChecker`` watches its trace and replays every sequence on the
reference; a request may opt in to ``finish_within_max_tokens`` (the reference's exact token budget,
``_budget``); ``run_simulation`` drives a mixed workload and ``format_report`` prints its metrics and
violations (``maskcert simulate``). ``FAULTS`` names the bugs the suite must catch; the invariants
are :data:`props.contract.findings.SIMULATION_INVARIANTS`.

The agent workload (``run_simulation(..., workload="agent")``, ``agent_workload``) serves tool calls
over a vocabulary with special tokens: a ``ToolSwitch`` swaps a request's grammar to the chosen tool's
arguments when its name completes, jump-forward streams forced text once it is certain, and
``AGENT_FAULTS`` names the bugs only it exposes.

Backends come in as adapter instances (a ``props.contract.Backend``); resolving a name to an adapter
is the application's job (``maskcert simulate --backend NAME``), as is the command line itself.
"""

from ._admission import AdmissionLimits, spec_depth
from ._agent import (
    AGENT_TOOLS,
    SwitchingMatcher,
    ToolCallingModel,
    ToolSwitch,
    agent_vocabulary,
    tool_call_specs,
)
from ._caches import CacheEntry, CacheKey, CompileCache, MatcherSnapshot, PrefixCache, spec_fingerprint
from ._checker import InvariantChecker, Violation
from ._engine import Engine, EngineConfig
from ._errors import LifecycleError, ServingError, SnapshotMismatch, UnknownFault
from ._faults import AGENT_FAULTS, FAULTS
from ._lifecycle import TRANSITIONS, Event, Status, diagram, transition
from ._metrics import Metrics
from ._models import AdversarialModel, Draft, KVHandle, Model, NoisyDraft, TinyLlamaModel
from ._request import (
    FINISH_REASONS,
    AdmissionRefused,
    Completion,
    Delta,
    Finished,
    FinishReason,
    Request,
    RequestHandle,
)
from ._simulate import SimulationReport, exit_code, format_report, run_simulation
from ._trace import TraceEvent
from ._workload import (
    Arrival,
    agent_workload,
    candidate_specs,
    default_vocabularies,
    make_workload,
    permuted_vocabulary,
    shortest_output,
)

__all__ = [
    "FAULTS",
    "AGENT_FAULTS",
    "AGENT_TOOLS",
    "ToolSwitch",
    "SwitchingMatcher",
    "ToolCallingModel",
    "tool_call_specs",
    "agent_vocabulary",
    "agent_workload",
    "Engine",
    "EngineConfig",
    "AdmissionLimits",
    "Request",
    "RequestHandle",
    "Completion",
    "Delta",
    "Finished",
    "AdmissionRefused",
    "FinishReason",
    "FINISH_REASONS",
    "Status",
    "Event",
    "TRANSITIONS",
    "transition",
    "diagram",
    "CompileCache",
    "CacheKey",
    "CacheEntry",
    "PrefixCache",
    "MatcherSnapshot",
    "spec_fingerprint",
    "spec_depth",
    "Model",
    "Draft",
    "KVHandle",
    "AdversarialModel",
    "NoisyDraft",
    "TinyLlamaModel",
    "InvariantChecker",
    "Violation",
    "TraceEvent",
    "Metrics",
    "SimulationReport",
    "run_simulation",
    "format_report",
    "exit_code",
    "Arrival",
    "make_workload",
    "candidate_specs",
    "default_vocabularies",
    "permuted_vocabulary",
    "shortest_output",
    "ServingError",
    "LifecycleError",
    "SnapshotMismatch",
    "UnknownFault",
]
