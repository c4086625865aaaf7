"""Certification profiles: how hard the harness pushes (``--profile`` / ``--memspec-profile``).

``smoke`` is a quick look, ``ci`` the deterministic default, ``thorough`` bug hunting. A profile
is resolved once into a frozen value that every check reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from memspec.conformance.backend import UsageError


@dataclass(frozen=True)
class Profile:
    """A Profile sizes every randomised or repeated check.

    ``examples`` is Hypothesis' ``max_examples``; ``processes`` x ``operations`` sizes the
    concurrent-writer checks; ``trials`` counts repetitions of fault and crash checks.
    """

    name: str
    examples: int
    processes: int
    operations: int
    trials: int
    derandomize: bool


PROFILES: dict[str, Profile] = {
    "smoke": Profile("smoke", examples=10, processes=2, operations=10, trials=2, derandomize=True),
    "ci": Profile("ci", examples=50, processes=4, operations=25, trials=5, derandomize=True),
    "thorough": Profile(
        "thorough", examples=1000, processes=8, operations=200, trials=50, derandomize=False
    ),
}
DEFAULT_PROFILE = "ci"


def resolve_profile(name: str | None) -> Profile:
    """Returns the profile called ``name`` (``ci`` when ``None``; raises UsageError)."""
    key = name or DEFAULT_PROFILE
    if key not in PROFILES:
        raise UsageError(f"unknown profile {key!r}; choose one of {', '.join(PROFILES)}")
    return PROFILES[key]
