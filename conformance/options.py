"""The settings of a certification, declared once for ``memspec certify`` and the pytest plugin.

Each :class:`Option` is one setting with its value type and help; the CLI adds it as
``--NAME`` and the plugin as ``--memspec-NAME``, so that the two never drift apart. The value
types raise ``argparse.ArgumentTypeError`` with a message naming what was given and what is
expected; both argument parsers turn it into a one-line usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memspec.conformance.jsonlines import DEFAULT_TIMEOUT
from memspec.conformance.profiles import DEFAULT_PROFILE, PROFILES


def positive_seconds(value: str) -> float:
    """Returns ``value`` as a positive number of seconds."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be positive seconds, got {value!r}")
    return number


def positive_int(value: str) -> int:
    """Returns ``value`` as a positive integer."""
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")


def workers(value: str) -> str:
    """Returns ``value`` as a pytest-xdist worker count: a positive integer or ``auto``."""
    if value == "auto" or (value.isdigit() and int(value) >= 1):
        return value
    raise argparse.ArgumentTypeError(f"expected a positive int or 'auto', got {value!r}")


def profile_name(value: str) -> str:
    """Returns ``value`` if it names a profile."""
    if value not in PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {value!r}; choose one of {', '.join(PROFILES)}"
        )
    return value


@dataclass(frozen=True)
class Option:
    """An Option is one setting: its name (``backend-cmd``), what its value looks like, its
    help, and the type that checks and converts the value."""

    name: str
    metavar: str
    help: str
    type: Callable[[str], Any] = str


BACKEND = Option("backend", "MODULE:FACTORY", "certify the Python backend this factory opens")
BACKEND_CMD = Option(
    "backend-cmd", "CMD", "certify the backend this command serves over JSON Lines"
)
PROFILE = Option(
    "profile",
    "NAME",
    f"smoke (a quick look), ci (deterministic) or thorough (bug hunting); default "
    f"{DEFAULT_PROFILE}",
    profile_name,
)
TIMEOUT = Option(
    "timeout",
    "SECONDS",
    f"longest wait for one backend call (default {DEFAULT_TIMEOUT:g})",
    positive_seconds,
)
SEED = Option("seed", "N", "seed of the randomised checks (default: derandomised by profile)", int)
REPORT = Option(
    "report", "DIR", "write report.json and report.md (memspec certify: and junit.xml) to DIR"
)
EXPECTED_FAILURES = Option(
    "expected-failures",
    "FILE",
    "check or clause ids known to fail, one per line; a listed one that passes fails the run",
)
HYPOTHESIS_DB = Option(
    "hypothesis-db",
    "URL",
    "example database of the randomized property checks: a directory or redis://host:port/db "
    "shared by every machine of a campaign (needs memspec[campaign]; default with a randomized "
    "profile and a report directory: REPORT/hypothesis)",
)
WHICH_BACKEND = (BACKEND, BACKEND_CMD)
"""The two ways to name the backend: exactly one is given."""
SETTINGS = (PROFILE, TIMEOUT, SEED, REPORT, EXPECTED_FAILURES, HYPOTHESIS_DB)
"""The other settings both the CLI and the plugin take."""


def add_options(add: Callable[..., Any], options: Iterable[Option], prefix: str = "--") -> None:
    """Adds each option with ``add`` (``ArgumentParser.add_argument`` or pytest's
    ``OptionGroup.addoption``) as ``PREFIX + name``, with no default: unset means the
    default of the code that reads it."""
    for option in options:
        add(prefix + option.name, metavar=option.metavar, help=option.help, type=option.type)
