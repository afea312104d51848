#!/usr/bin/env bash
# Install maskcert with its test tools and run the checks CI runs: ruff (lint and format), mypy, the layer contracts
# (import-linter, see docs/architecture.md), pytest (CI profile).
# The README's test command and .ci/run both call this script, so they cannot drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian packages for the tests that use real servers and browsers: redis-server (tests/test_redis.py) and
# chromium (tests/test_browser.py). Quiet, and tolerant of failure: without apt (or without root, or
# offline) those tests skip with their reason. Measured here: apt-get update ~7 s, redis-server ~25 s,
# chromium ~45 s; skipped when both are already installed. MASKCERT_NO_APT=1 turns this off.
if [ -z "${MASKCERT_NO_APT:-}" ] && command -v apt-get >/dev/null 2>&1 \
    && ! { command -v redis-server >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1; }; then
    sudo_=""
    [ "$(id -u)" = 0 ] || sudo_="sudo -n"
    { $sudo_ apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq \
        --no-install-recommends redis-server chromium; } >/dev/null 2>&1 \
        || echo "ci/test.sh: apt-get could not install redis-server/chromium; their tests will skip" >&2
fi
python3 -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[dev,backends,redis]'
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy
python3 -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
# pytest exits 5 when it collects no test: with `set -e` that fails the run, as it should.
python3 -m pytest -q -n "${MASKCERT_TEST_WORKERS:-2}" -m "not slow and not full" tests "$@"
