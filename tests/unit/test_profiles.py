"""Profiles: every size and budget of a check is a field of the profile, never a name lookup."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from memspec.conformance.core.profiles import PROFILES

PROJECT = Path(__file__).resolve().parents[2]
NAMES_THE_PROFILE = {"conformance/core/search.py"}
"""Modules allowed to read a profile's name: the runner prints it in reproduction commands."""


def test_no_check_looks_a_profile_up_by_its_name() -> None:
    sources = [*PROJECT.glob("conformance/**/*.py"), *PROJECT.glob("fuzz/*.py")]
    checks = [p for p in sources if "checks" in p.parts or p.parent.name == "fuzz"]
    offenders = [
        str(path.relative_to(PROJECT))
        for path in checks
        if "profile.name" in path.read_text(encoding="utf-8")
        and str(path.relative_to(PROJECT)) not in NAMES_THE_PROFILE
    ]
    assert offenders == []


def test_profiles_grow_from_smoke_to_thorough() -> None:
    smoke, ci, thorough = PROFILES["smoke"], PROFILES["ci"], PROFILES["thorough"]
    for field in fields(smoke):
        value = getattr(smoke, field.name)
        if isinstance(value, int | tuple) and not isinstance(value, bool):
            values = [getattr(profile, field.name) for profile in (smoke, ci, thorough)]
            assert values == sorted(values), f"{field.name} shrinks: {values}"
    assert thorough.every_crash_state and not ci.every_crash_state
