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
