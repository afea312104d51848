"""``maskcert matrix --versions`` and ``--diff`` (maskcert.history) on a toy release series
(:mod:`tests._history`): regressions, defect bounds, reuse of unchanged release matrices, shards,
bisection of bounds between sampled releases, the upgrade diff and its exit code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from maskcert.cli import main
from maskcert.history import (
    HistoryError,
    ReleaseRun,
    build_history,
    choose_versions,
    diff,
    diff_releases,
    is_regression,
    load_matrix,
    parse_versions_arg,
    sample_versions,
)
from tests._history import BACKENDS, RELEASED, toy_history


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("history")
    h = toy_history(out)
    return out, h.data


def test_history_names_regressions_and_defect_bounds(hist: tuple[Path, dict[str, Any]]) -> None:
    out, data = hist
    assert data["ran"] == ["0.1.17", "0.1.19", "0.2.9"] and data["skipped"] == ["0.1.18"]
    assert data["versions"] == RELEASED
    # 0.1.19 (ignores uniqueItems) breaks an exact cell; 0.2.9 (blocks backslashes) breaks another.
    regressions = {(r["feature"], r["from"], r["to"]) for r in data["regressions"]}
    assert ("json_schema/uniqueItems", "0.1.17", "0.1.19") in regressions
    assert ("json_schema/pattern", "0.1.19", "0.2.9") in regressions
    for r in data["regressions"]:
        assert (out / r["link"].split("#")[0]).is_file(), r
    by_id = {d["id"]: d for d in data["defects"]}
    unsound = [d for d in data["defects"] if d["invariant"] == "soundness"]
    assert unsound, data["defects"]
    for d in unsound:  # the toy of 0.1.19 only: fixed in the next release run, 0.2.9
        assert d["present"] == ["0.1.19"] and d["first_bad"] == "0.1.19" and d["first_fixed"] == "0.2.9"
        assert not d["in_newest"]
        # 0.1.18 was not run and there is no reproducer to bisect: the first bad release is a bound.
        assert d["exact_bounds"] == {"first_bad": False, "first_fixed": True}
    newest = [d for d in data["defects"] if d["in_newest"]]
    assert newest and all(d["first_bad"] == "0.2.9" and d["first_fixed"] is None for d in newest)
    for d in by_id.values():
        assert (out / d["link"].split("#")[0]).is_file()
    # The timeline: one entry per release run, per feature.
    assert [t["status"] for t in data["cells"]["json_schema/uniqueItems"]][0] == "exact"
    assert data["cells"]["json_schema/uniqueItems"][1]["status"] == "unsound"
    md = (out / "history.md").read_text(encoding="utf-8")
    assert "## Regressions" in md and "0.1.17 -> 0.1.19" in md and "(or earlier)" in md
    assert json.loads((out / "history.json").read_text(encoding="utf-8"))["ran"] == data["ran"]


def test_unchanged_release_matrices_are_reused_and_changed_ones_rerun(
    hist: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    src, data = hist
    out = tmp_path / "again"
    shutil.copytree(src, out)
    again = toy_history(out)
    assert [r["reused"] for r in again.data["releases"]] == [True, True, True]
    assert again.data["cells"] == data["cells"] and again.data["regressions"] == data["regressions"]
    # Other checks (another maskcert) judged 0.1.19: its matrix is not reused.
    key = out / "releases" / "0.1.19" / "release.json"
    saved = json.loads(key.read_text(encoding="utf-8"))
    key.write_text(json.dumps({**saved, "checks": "0" * 16}), encoding="utf-8")
    third = toy_history(out)
    assert [r["reused"] for r in third.data["releases"]] == [True, False, True]
    assert json.loads(key.read_text(encoding="utf-8"))["checks"] == saved["checks"]
    # A matrix left incomplete is not reused either.
    key.write_text(json.dumps({**saved, "complete": False}), encoding="utf-8")
    assert [r["reused"] for r in toy_history(out).data["releases"]] == [True, False, True]


def test_shards_write_disjoint_releases_that_a_last_run_reuses(tmp_path: Path) -> None:
    one = toy_history(tmp_path, shard=(1, 2))
    two = toy_history(tmp_path, shard=(2, 2))
    assert one.data["ran"] == ["0.1.17", "0.2.9"] and two.data["ran"] == ["0.1.19"]
    assert not (tmp_path / "history.json").exists()
    full = toy_history(tmp_path)
    assert all(r["reused"] for r in full.data["releases"])
    with pytest.raises(HistoryError, match="K/N"):
        toy_history(tmp_path / "bad", shard=(3, 2))


def test_bounds_between_sampled_releases_are_bisected(hist: tuple[Path, dict[str, Any]]) -> None:
    """A bisector that finds the transition inside the unsampled releases makes the bound exact."""
    out, _ = hist
    runs = [
        ReleaseRun(v, out / "releases" / v, load_matrix(out / "releases" / v), True)
        for v in ("0.1.17", "0.1.19", "0.2.9")
    ]
    asked: list[tuple[str, str, str, tuple[str, ...]]] = []

    def bisector(defect: Any, lo: str, hi: str, between: Any) -> dict[str, Any]:
        asked.append((defect["id"], lo, hi, tuple(between)))
        return {
            "first_showing": "0.1.18",
            "first_fixing": None,
            "transitions": [{"from": "0.1.17", "to": "0.1.18", "kind": "introduced"}],
        }

    h = build_history("xgrammar", "xgrammar", None, RELEASED, runs, out, bisector=bisector)
    unsound = [d for d in h.data["defects"] if d["invariant"] == "soundness"]
    assert unsound and all(d["first_bad"] == "0.1.18" and d["exact_bounds"]["first_bad"] for d in unsound)
    assert all(lo == "0.1.17" and hi == "0.1.19" and between == ("0.1.18",) for _i, lo, hi, between in asked)
    # Defects first seen in 0.2.9 have 0.1.19 run just before them in the span: nothing to bisect.
    assert {i for i, *_ in asked} == {d["id"] for d in unsound}


def test_diff_lists_changed_cells_with_proofs_and_exits_1_on_regression(
    hist: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = hist
    a, b = src / "releases" / "0.1.17", src / "releases" / "0.1.19"
    d = diff_releases(str(a), str(b), out=tmp_path)
    (changed,) = [c for c in d.data["changed"] if c["feature"] == "json_schema/uniqueItems"]
    assert changed["before"] == "exact" and changed["after"] == "unsound" and changed["regression"]
    assert changed["new_defects"] and not changed["gone_defects"]
    for x in changed["new_defects"]:
        assert (tmp_path / x["link"].split("#")[0]).resolve().is_file()
    assert "Regressions" in (tmp_path / "diff.md").read_text(encoding="utf-8")
    code = main(["matrix", "--diff", str(a), str(b), "--out", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 1 and "REGRESSION json_schema/uniqueItems: exact -> unsound" in out
    # The other way round it is a fix: defects gone, exit 0.
    code = main(["matrix", "--diff", str(b), str(a), "--out", str(tmp_path / "back")])
    back = json.loads((tmp_path / "back" / "diff.json").read_text(encoding="utf-8"))
    assert code == 0 and back["regressions"] == 0
    assert any(c["gone_defects"] for c in back["changed"])
    # Diffing a matrix with itself changes nothing.
    same = diff(load_matrix(a), load_matrix(a))
    assert same.data["changed"] == [] and same.data["unchanged"] == same.data["features"] == 2


def test_regression_rule() -> None:
    exact = {"status": "exact", "defects": []}
    bad = {"status": "incomplete", "defects": [{"id": "D1"}]}
    worse = {"status": "incomplete", "defects": [{"id": "D1"}, {"id": "D2"}]}
    unsound = {"status": "unsound+incomplete", "defects": [{"id": "D1"}, {"id": "D3"}]}
    assert is_regression(exact, bad) and is_regression(exact, {"status": "refused"})
    assert is_regression(bad, unsound)  # it was incomplete; now it is unsound too
    assert not is_regression(bad, exact) and not is_regression(worse, bad) and not is_regression(bad, bad)
    # Another signature of a wrong the cell already had is listed, not a regression.
    assert not is_regression(bad, worse) and not is_regression(unsound, bad)
    # Refused or crashing cells had nothing checked: what shows after them is newly checked.
    refused, crash = {"status": "refused", "defects": []}, {"status": "crash", "defects": [{"id": "D9"}]}
    assert not is_regression(refused, unsound) and not is_regression(crash, bad)
    assert is_regression(bad, crash) and not is_regression(bad, refused) and not is_regression(crash, refused)
    # Not verdicts on the engine: never a regression.
    for other in ("not_run", "internal_error", "not_decided"):
        assert not is_regression(exact, {"status": other, "defects": []})
        assert not is_regression({"status": other, "defects": []}, bad)
    assert not is_regression(None, bad)


def test_sampling_and_spans() -> None:
    vs = [f"0.{i}" for i in range(10)]
    for n in range(2, 12):
        s = sample_versions(vs, n)
        assert s[0] == vs[0] and s[-1] == vs[-1] and len(s) == min(n, 10) and s == sorted(s, key=vs.index)
    assert sample_versions(vs, None) == vs
    with pytest.raises(HistoryError, match="at least 2"):
        sample_versions(vs, 1)
    assert parse_versions_arg("xgrammar==0.1.17..0.2.9") == ("xgrammar", "0.1.17..0.2.9")
    assert parse_versions_arg("xgrammar") == ("xgrammar", None)
    with pytest.raises(HistoryError, match="NAME==A..B"):
        parse_versions_arg("==0.1")
    assert choose_versions("xgrammar", "0.1.18..", released=RELEASED) == ("xgrammar", RELEASED[1:])
    with pytest.raises(HistoryError, match="no release"):
        choose_versions("xgrammar", "9.0..", released=RELEASED)
    with pytest.raises(HistoryError, match="registered engine"):
        choose_versions("nope", None, released=RELEASED)
    assert set(BACKENDS) == set(RELEASED)


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["matrix", "--sample", "3", "--out", str(tmp_path)]) == 2
    assert "need --versions" in capsys.readouterr().err
    assert main(["matrix", "--versions", "nope==1..2", "--out", str(tmp_path)]) == 2
    assert "registered engine" in capsys.readouterr().err
    assert main(["matrix", "--diff", "xgrammar", "xgrammar==0.2.9", "--out", str(tmp_path)]) == 2
    assert "NAME==VERSION" in capsys.readouterr().err
    assert main(["matrix", "--versions", "xgrammar", "--backend", "x", "--out", str(tmp_path)]) == 2
    assert main(["site", str(tmp_path / "site"), str(tmp_path / "no-such-history")]) == 2


def test_bisections_are_kept_and_bounded_by_their_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import maskcert.bisect as bisect_module
    from maskcert.bisect import BisectResult, Run
    from maskcert.history import Bisector

    script = tmp_path / "releases" / "0.2.9" / "repro" / "D1.py"
    script.parent.mkdir(parents=True)
    script.write_text("raise SystemExit(1)\n", encoding="utf-8")
    calls: list[list[str]] = []

    def fake(name: str, repro: Path, versions: list[str], **kw: Any) -> BisectResult:
        calls.append(list(versions))
        r = BisectResult(name, str(repro), list(versions))
        r.runs = {v: Run(v, "present" if v != versions[0] else "absent", 1, "") for v in versions}
        r.transitions = [(versions[0], versions[1], "introduced")]
        return r

    monkeypatch.setattr(bisect_module, "bisect", fake)
    defect = {"id": "D1", "repro": "releases/0.2.9/repro/D1.py"}
    b = Bisector("xgrammar", "xgrammar", tmp_path, budget_s=100.0)
    first = b(defect, "0.1.17", "0.2.9", ["0.1.18"])
    again = Bisector("xgrammar", "xgrammar", tmp_path, budget_s=100.0)
    assert again(defect, "0.1.17", "0.2.9", ["0.1.18"]) == first and first is not None
    assert first["first_showing"] == "0.1.18" and len(calls) == 1
    assert again.summary()["reused"] == 1 and again.summary()["bisected"] == 0
    # Another reproducer is another bisection; past the budget none runs, and the summary says why.
    script.write_text("raise SystemExit(0)\n", encoding="utf-8")
    spent = Bisector("xgrammar", "xgrammar", tmp_path, budget_s=0.0)
    assert spent(defect, "0.1.17", "0.2.9", ["0.1.18"]) is None
    assert spent.summary()["not_bisected"] == {"bisect budget spent": 1}
    assert spent({"id": "D2"}, "0.1.17", "0.2.9", []) is None
    assert spent.summary()["not_bisected"]["no reproducer"] == 1


def test_a_reproducer_that_still_shows_the_defect_moves_the_bound(hist: tuple[Path, dict[str, Any]]) -> None:
    """The matrices do not show 0.1.19's defects in 0.2.9, but a bisection over the unsampled 0.2.0 runs
    their reproducer and finds them still there: not fixed, and counted in the newest release."""
    out, _ = hist
    runs = [
        ReleaseRun(v, out / "releases" / v, load_matrix(out / "releases" / v), True)
        for v in ("0.1.17", "0.1.19", "0.2.9")
    ]
    span = ["0.1.17", "0.1.18", "0.1.19", "0.2.0", "0.2.9"]

    def bisector(defect: Any, lo: str, hi: str, between: Any) -> dict[str, Any]:
        vs = [lo, *between, hi]
        return {
            "first_showing": lo,
            "first_fixing": None,
            "transitions": [],
            "runs": [{"version": v, "verdict": "present"} for v in vs],
        }

    h = build_history("xgrammar", "xgrammar", None, span, runs, out, bisector=bisector)
    unsound = [d for d in h.data["defects"] if d["invariant"] == "soundness"]
    assert unsound
    for d in unsound:
        assert d["first_fixed"] is None and d["in_newest"] and "0.2.9" in d["reproduced"]
        # and the reproducer showed it in 0.1.17 too, where the matrix did not: older than it said
        assert d["first_bad"] == "0.1.17" and "0.1.17" in d["reproduced"]
