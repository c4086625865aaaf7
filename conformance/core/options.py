"""The options of a certification, declared once for every command and the pytest plugin.

Each :class:`Option` is added as ``--NAME`` by ``memspec certify``, ``hermes``, ``matrix`` and
``sweep`` and as ``--memspec-NAME`` by the plugin, so they never drift apart. Its value type raises
``argparse.ArgumentTypeError`` naming what was given and what is expected. An option's name, with
``_`` for ``-`` (:attr:`Option.dest`), is the keyword of ``make_settings`` that takes its value
(``conformance/core/settings.py``), so every caller builds the one settings value the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memspec.conformance.core.profiles import DEFAULT_PROFILE, PROFILES
from memspec.conformance.core.waits import CALL_TIMEOUT


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
    short: str = ""
    """A one-letter spelling the commands also accept (``-n``); the plugin never adds it."""
    switch: bool = False
    """True for an on/off flag that takes no value."""

    @property
    def dest(self) -> str:
        """The option's name as a keyword: ``backend_cmd``."""
        return self.name.replace("-", "_")


BACKEND = Option("backend", "MODULE:FACTORY", "certify the Python backend this factory opens")
BACKEND_CMD = Option(
    "backend-cmd", "CMD", "certify the backend this command serves over JSON Lines"
)
PROFILE = Option(
    "profile",
    "NAME",
    "smoke (a quick look), ci (deterministic) or thorough (bug hunting); default "
    + DEFAULT_PROFILE,
    profile_name,
)
TIMEOUT = Option(
    "timeout",
    "SECONDS",
    f"longest wait for one backend call; default {CALL_TIMEOUT:g}",
    positive_seconds,
)
SEED = Option("seed", "N", "seed of the randomised checks (default: derandomised by profile)", int)
REPORT = Option(
    "report",
    "DIR",
    "write report.json, report.md and report.html (memspec certify: and junit.xml) to DIR",
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
SPEC = Option(
    "spec",
    "FILE",
    "certify against this SPEC.md instead of the installed one: its examples run, its clauses "
    "judge, its version is the report's",
)
WORKERS = Option(
    "workers", "N", "run checks in N parallel processes (pytest-xdist), or 'auto'", workers, "-n"
)
SELECT = Option(
    "select",
    "EXPR",
    "run only the checks whose id matches this pytest -k expression, e.g. 'DRIFT or SNAP'",
    short="-k",
)
QUIET = Option(
    "quiet", "", "print no progress: only the failing clauses, the level and the counts",
    short="-q", switch=True,
)  # fmt: skip
WHICH_BACKEND = (BACKEND, BACKEND_CMD)
"""The two ways to name the backend: exactly one is given."""
SETTINGS = (PROFILE, TIMEOUT, SEED, REPORT, EXPECTED_FAILURES, HYPOTHESIS_DB, SPEC)
"""The other settings both the CLI and the plugin take."""


def add_options(
    add: Callable[..., Any],
    options: Iterable[Option],
    prefix: str = "--",
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Adds each option with ``add`` (``ArgumentParser.add_argument`` or pytest's
    ``OptionGroup.addoption``) as ``PREFIX + name``. Unset means the default of the code that reads
    it, unless ``defaults`` gives one (as ``sweep --profile smoke``); the help then names it."""
    chosen = defaults or {}
    for option in options:
        flags = [prefix + option.name] + ([option.short] if option.short and prefix == "--" else [])
        dest = option.dest
        if prefix != "--":
            dest = prefix.lstrip("-").replace("-", "_") + dest
        if option.switch:
            add(*flags, dest=dest, action="store_true", help=option.help)
            continue
        helped = option.help
        if option.name in chosen:
            helped = helped.split("; default ")[0] + f"; default {chosen[option.name]}"
        add(
            *flags,
            dest=dest,
            metavar=option.metavar,
            help=helped,
            type=option.type,
            default=chosen.get(option.name),
        )
