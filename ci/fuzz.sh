#!/usr/bin/env bash
# A bounded nightly fuzzing campaign: the reference self-check, then each installed backend's
# invariants, a few minutes each; findings go to $OUT (default fuzz-nightly/) and the script exits
# non-zero when any target found something (or could not run). See docs/campaigns.md.
#   MASKCERT_FUZZ_BUDGET   per-target budget (default 3m)
#   MASKCERT_FUZZ_WORKERS  local worker processes per target (default 2)
#   MASKCERT_FUZZ_DB       example database shared by every target (default $OUT/hypothesis-db)
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[dev,backends]' || exit 2
OUT="${1:-fuzz-nightly}"
BUDGET="${MASKCERT_FUZZ_BUDGET:-3m}"
WORKERS="${MASKCERT_FUZZ_WORKERS:-2}"
DB="${MASKCERT_FUZZ_DB:-$OUT/hypothesis-db}"
status=0
run() {  # run NAME ARGS...: one campaign into $OUT/NAME, sharing the database
    local name="$1"; shift
    echo "== maskcert fuzz $name ($BUDGET)"
    python3 -m maskcert.cli fuzz "$@" --budget "$BUDGET" --workers "$WORKERS" --db "$DB" --out "$OUT/$name"
    local rc=$?
    if [ "$rc" -ne 0 ]; then echo "== $name: exit $rc"; status=1; fi
}
run reference --target reference
for backend in $(python3 -c "from props.backends import ENGINES; print(*ENGINES)"); do
    if python3 -c "from props.backends import load_backend; load_backend('$backend')" 2>/dev/null; then
        run "invariants-$backend" --target invariants --backend "$backend"
    else
        echo "== $backend: not installed, skipped"
    fi
done
exit "$status"
