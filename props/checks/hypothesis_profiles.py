"""Hypothesis profiles (docs/style.md §15), in the package so that tests and ``maskcert fuzz`` share them.

``ci``: derandomized, bounded, no database (CI runs are reproducible and leave nothing behind);
``dev``: random, a bit more; ``fuzz``: long campaigns (``maskcert fuzz`` derives its per-run settings
from it, adding the campaign's database, phases and seeds). Select one in tests with
``HYPOTHESIS_PROFILE``; CI exports ``HYPOTHESIS_PROFILE=ci``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "register_profiles", "fuzz_settings"]

PROFILES: dict[str, dict[str, Any]] = {
    "ci": {
        "derandomize": True,
        "max_examples": 25,
        "deadline": None,
        "print_blob": True,
        "database": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    },
    "dev": {
        "max_examples": 60,
        "deadline": None,
        "print_blob": True,
        "suppress_health_check": [HealthCheck.too_slow],
    },
    "fuzz": {
        "max_examples": 20_000,
        "deadline": None,
        "print_blob": True,
        "suppress_health_check": list(HealthCheck),
    },
}


def register_profiles() -> None:
    """Register every profile of :data:`PROFILES` with Hypothesis (idempotent)."""
    for name, values in PROFILES.items():
        settings.register_profile(name, **values)


def fuzz_settings() -> settings:
    """The registered ``fuzz`` profile (registering the profiles first if needed)."""
    register_profiles()
    return settings.get_profile("fuzz")
