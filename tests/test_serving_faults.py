"""Every named serving fault is caught by the serving invariants within a bounded run, and the same run
without the fault is clean (docs/design.md §5)."""

from __future__ import annotations

import pytest

import serving_sim
from maskcert.cli import main
from props.backends import load_backend
from props.contract.findings import INVARIANTS, SIMULATION_FINDING, SIMULATION_INVARIANTS
from serving_sim import FAULTS, exit_code, format_report, run_simulation

REFERENCE = load_backend("reference")

# The invariant that must catch each fault (others may fire too: one bug has many symptoms).
CAUGHT_BY = {
    "shared_beam_matcher": "fork",
    "beam_reorder_without_matcher_reorder": "fork",
    "spec_accept_without_grammar": "speculative",
    "cache_key_without_vocab": "isolation",
    "eos_always_allowed": "eos",
    "resume_without_replay": "resume",
    "soft_filter_after_mask_dropped": "soundness",
    "max_tokens_as_stop": "finish_reason",
    "stream_split_char": "utf8",
    "spec_rollback_off_by_one": "rollback",
    "beam_kv_not_forked": "kv",
    "budget_ignored": "budget",
}

REQUESTS = 14  # the coverage block plus a few random requests: about a second a run


def test_every_fault_has_a_test_and_a_description():
    assert set(CAUGHT_BY) == set(FAULTS)
    assert {"shared_beam_matcher", "spec_accept_without_grammar", "cache_key_without_vocab"} <= set(FAULTS)
    for name, text in FAULTS.items():
        assert text and "\n" not in text, name
    assert set(CAUGHT_BY.values()) <= {k for k in SIMULATION_INVARIANTS if not k.startswith("backend:")}


def test_every_simulation_invariant_becomes_a_finding_invariant():
    assert set(SIMULATION_FINDING) == set(SIMULATION_INVARIANTS)
    assert set(SIMULATION_FINDING.values()) <= set(INVARIANTS)


def test_unknown_fault_is_refused():
    with pytest.raises(serving_sim.UnknownFault, match="expected one of"):
        run_simulation(REFERENCE, fault="no_such_fault", requests=1)


@pytest.fixture(scope="module")
def clean_report() -> serving_sim.SimulationReport:
    return run_simulation(REFERENCE, seed=0, requests=REQUESTS)


def test_clean_run_is_clean(clean_report):
    r = clean_report
    assert r.violation_counts == {}, format_report(r)
    assert r.unfinished == 0
    assert exit_code(r) == 0
    m = r.metrics
    # The run exercised what the faults live in.
    assert m["preemptions"] >= 1 and m["resumes"] >= 1
    assert m["cancellations"] >= 1 and r.refused >= 1
    assert m["speculative"]["grammar_rejections"] >= 1
    assert m["speculative"]["probability_rejections"] >= 1
    assert {"stop", "length"} <= set(m["finish_reasons"])
    assert r.compile_cache["hits"] >= 1 and r.checked["masks"] > 0 and r.checked["validated"] > 0


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_caught(fault, clean_report):
    r = run_simulation(REFERENCE, fault=fault, seed=0, requests=REQUESTS)
    assert CAUGHT_BY[fault] in r.violation_counts, format_report(r)
    assert exit_code(r) == 1
    assert all(v.message for v in r.violations)
    # The same workload without the fault is clean (the fixture ran it).
    assert clean_report.violation_counts == {}


def test_several_faults_at_once():
    r = run_simulation(
        REFERENCE, faults=["eos_always_allowed", "stream_split_char"], seed=1, requests=REQUESTS
    )
    assert {"eos", "utf8"} <= set(r.violation_counts)
    assert r.faults == ("eos_always_allowed", "stream_split_char")


def test_cli_prints_metrics_and_exit_codes(capsys):
    assert main(["simulate", "--fault", "max_tokens_as_stop", "--requests", "11", "--seed", "0"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATIONS" in out and "finish_reason" in out
    for metric in (
        "compile ms cold",
        "mask ms per step",
        "sampling ms per step",
        "TTFT",
        "inter-token",
        "mask density",
        "compile cache",
        "prefix cache",
        "model waited for masks",
        "speculative",
    ):
        assert metric in out, metric
    assert main(["simulate", "--list-faults"]) == 0
    assert "shared_beam_matcher" in capsys.readouterr().out
    assert main(["simulate", "--backend", "no-such-backend"]) == 2
    assert "maskcert simulate: unknown backend 'no-such-backend'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 5))
def test_faults_caught_across_seeds(seed):
    clean = run_simulation(REFERENCE, seed=seed, requests=24)
    assert clean.violation_counts == {} and clean.unfinished == 0, format_report(clean)
    for fault, invariant in CAUGHT_BY.items():
        r = run_simulation(REFERENCE, fault=fault, seed=seed, requests=24)
        assert invariant in r.violation_counts, (fault, format_report(r))
