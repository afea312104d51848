#!/usr/bin/env bash
# Every benchmark, as CI runs them: `maskcert bench all` (masks, compile, sampler, serving, with ratios
# against the third-party engines measured in the same run) into one JSON and one Markdown report, then
# the pytest-benchmark files (tests/bench_*.py, which `pytest tests` does not collect).
#
#   bash ci/bench.sh                    # small default sizes: a few minutes on two cores
#   bash ci/bench.sh --limit 50         # extra arguments go to `maskcert bench all`
#
# Outputs in $MASKCERT_BENCH_OUT (default bench-results/): bench.json, bench.md, pytest-benchmark.json.
# MASKCERT_BENCH_PYTEST=0 skips the pytest-benchmark files. No timed assertion fails this script: it
# exits non-zero only when a benchmark part crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[dev,backends]'
out="${MASKCERT_BENCH_OUT:-bench-results}"
mkdir -p "$out"
python3 -m maskcert.cli bench all --json "$out/bench.json" --md "$out/bench.md" "$@"
if [ "${MASKCERT_BENCH_PYTEST:-1}" != "0" ]; then
    python3 -m pytest -q tests/bench_*.py --benchmark-only --benchmark-json "$out/pytest-benchmark.json"
fi
echo "ci/bench.sh: reports in $out/ (bench.md, bench.json, pytest-benchmark.json)"
