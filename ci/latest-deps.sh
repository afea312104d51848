#!/usr/bin/env bash
# Nightly job (not part of .ci/run): install the NEWEST release of every dependency, ignoring the caps
# in pyproject.toml, and run `maskcert doctor --strict` and the tests. An upstream release that breaks
# maskcert is seen the day it ships; a cap whose known incompatibility no longer applies is reported
# by doctor ("the probe passes: the cap may be lifted").
#
# Runs in a fresh virtual environment (default: a temporary directory; MASKCERT_LATEST_VENV=DIR
# keeps it). torch stays pinned by ci/constraints.txt: on maskcert's machines any other torch is a
# multi-GB CUDA download. Exit status: doctor's, else the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${MASKCERT_LATEST_VENV:-$(mktemp -d)/venv}"
python3 -m venv "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip
# maskcert itself without its pins, then every requirement by name alone, newest release.
"${pip[@]}" --no-deps -e .
mapfile -t names < <("$py" - <<'PY'
import re, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))["project"]
reqs = list(meta["dependencies"])
for extra in ("dev", "backends"):
    reqs += meta["optional-dependencies"][extra]
for r in reqs:
    print(re.match(r"[A-Za-z0-9._-]+", r).group(0))
PY
)
"${pip[@]}" -c ci/constraints.txt --upgrade --upgrade-strategy eager "${names[@]}" \
    || { echo "latest-deps: installing the newest releases failed" >&2; exit 1; }
"$py" -m pip list --disable-pip-version-check --format=freeze | sed 's/^/  /'
status=0
"$venv/bin/maskcert" doctor --strict || status=$?
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
"$py" -m pytest -q -n "${MASKCERT_TEST_WORKERS:-2}" -m "not full" tests "$@" || status=$?
exit "$status"
