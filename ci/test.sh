#!/usr/bin/env bash
# Install maskcert with its test tools and run the checks CI runs: ruff (lint and format), mypy, the layer contracts
# (import-linter, see docs/architecture.md), pytest (CI profile).
# The README's test command and .ci/run both call this script, so they cannot drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[dev,backends]'
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy
python3 -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
# pytest exits 5 when it collects no test: with `set -e` that fails the run, as it should.
python3 -m pytest -q -n "${MASKCERT_TEST_WORKERS:-2}" -m "not slow and not full" tests "$@"
