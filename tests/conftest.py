"""Shared test configuration: Hypothesis profiles (docs/style.md §15) and fixtures.

Profiles: ``ci`` (derandomized, bounded, no deadline), ``dev`` (random, a bit more), ``fuzz`` (long).
Select with ``HYPOTHESIS_PROFILE``; CI exports ``HYPOTHESIS_PROFILE=ci``.
"""

from __future__ import annotations

import os

from hypothesis import settings

from props.checks.hypothesis_profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# pytest-xdist runs this many test processes at once, each driving backend workers: when the cores
# cannot give both sides of every worker pair a core, workers must not spin (props.backends.worker).
# The environment carries the decision to the subprocesses the tests start (the CLI's runs).
if 2 * int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > (os.cpu_count() or 1):
    os.environ.setdefault("MASKCERT_WORKER_SPIN_US", "0")
