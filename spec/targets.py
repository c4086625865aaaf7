"""The two stores of a memory root, their files, headers and default limits.

``MEMORY.md`` and ``USER.md`` with limits 2,200 and 1,375 (FORMAT-1); the titles of their
snapshot headers (SNAP-5).
"""

from __future__ import annotations

from typing import Final, Literal

Target = Literal["memory", "user"]

TARGETS: Final[tuple[Target, ...]] = ("memory", "user")
FILENAMES: Final[dict[str, str]] = {"memory": "MEMORY.md", "user": "USER.md"}
DEFAULT_LIMITS: Final[dict[str, int]] = {"memory": 2200, "user": 1375}
HEADERS: Final[dict[str, str]] = {
    "memory": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
}


def is_target(value: object) -> bool:
    """Returns whether ``value`` names one of the two stores."""
    return isinstance(value, str) and value in FILENAMES
