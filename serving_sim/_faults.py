"""Named, switchable faults: realistic serving bugs the invariant checker must catch (docs/design.md §5).

Each fault is one ``if`` in the engine (search for ``self._fault(...)`` in ``_engine.py``), so the
faulty code path sits next to the correct one it corrupts.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._errors import UnknownFault

__all__ = ["FAULTS", "AGENT_FAULTS", "check_faults"]

FAULTS: dict[str, str] = {
    "shared_beam_matcher": "beams and n>1 samples share one grammar matcher instead of forking it",
    "beam_reorder_without_matcher_reorder": (
        "a beam reorder moves token ids, KV and scores by the index map but leaves matchers in place"
    ),
    "spec_accept_without_grammar": (
        "speculative verify accepts draft tokens on probability alone, skipping the grammar check"
    ),
    "cache_key_without_vocab": (
        "the grammar compile cache key omits the vocabulary fingerprint, so engines share grammars"
    ),
    "eos_always_allowed": "EOS is allowed in every constrained mask, accepting or not",
    "resume_without_replay": "a preempted request resumes with a fresh matcher (generated tokens not replayed)",
    "soft_filter_after_mask_dropped": (
        "when the grammar leaves no valid token, the mask is dropped and soft filters pick a disallowed token"
    ),
    "max_tokens_as_stop": "max_tokens truncation is reported as finish reason 'stop' and valid output",
    "stream_split_char": "stream deltas decode each token on its own, splitting multi-byte characters",
    "spec_rollback_off_by_one": "after a speculative rejection the matcher rolls back one token too few",
    "beam_kv_not_forked": "beams forked from one parent share its KV handle instead of forking it",
    "budget_ignored": (
        "finish_within_max_tokens is ignored: masks keep tokens after which the output cannot end in time"
    ),
}


#: Faults only the agent workload exposes (``serving_sim._agent``: tool calls, grammar switching,
#: jump-forward); kept apart from :data:`FAULTS`, which every mixed workload must catch.
AGENT_FAULTS: dict[str, str] = {
    "jump_forward_uncertain": (
        "jump-forward emits the first tool's name and delimiter as soon as the trigger is sampled, "
        "before the name is certain"
    ),
    "switch_rollback_keeps_tail": (
        "a speculative rollback past the tool-name switch keeps the arguments grammar instead of the head's"
    ),
}


def check_faults(names: Iterable[str], *, agent: bool = True) -> frozenset[str]:
    """The fault names as a set; :class:`UnknownFault` for a name not in :data:`FAULTS` (nor in
    :data:`AGENT_FAULTS` when ``agent``: a workload without tool calls would switch an agent fault on
    and never exercise it, so a run that cannot catch it refuses it)."""
    known = (*FAULTS, *AGENT_FAULTS) if agent else tuple(FAULTS)
    out = frozenset(names)
    for name in sorted(out):
        if name not in known:
            hint = (
                " (an agent-workload fault: run_simulation(workload='agent'), maskcert simulate --workload agent)"
                if name in AGENT_FAULTS
                else ""
            )
            raise UnknownFault(name, known, hint)
    return out
