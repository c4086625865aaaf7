"""The registry of named conformance checks and the clause ids each verifies.

A check is a plain function over a :class:`CheckContext` (the backend, a fresh root, the
profile); it raises ``AssertionError`` (whose message cites its clause ids) when the backend
violates them, and needs no pytest. The decorator records the clause ids and the features the
check needs, so that ``memspec spec --check`` can tell which MUST clauses no check covers, and so
that a check needing a feature the backend does not claim is skipped with that feature named
(CONTRACT features). A check that cannot apply to a backend at all (a JSON Lines protocol check
run against a Python backend) raises :class:`NotApplicable`, which the suite reports as skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memspec.conformance.core.findings import (
    ClauseFailures,
    Finding,
    HarnessError,
    Kind,
    Unverified,
)
from memspec.spec.clauses import CLAUSE_ID

if TYPE_CHECKING:
    from memspec.conformance.core.budgets import Allowance


Figure = bool | int | float | str
"""One figure a check reports (``CheckContext.figures``): a count, seconds, a flag, a name."""


@dataclass(frozen=True)
class CheckContext:
    """A CheckContext is what one check runs with: the backend, a fresh empty root directory
    the backend owns, a scratch directory outside it, the profile and the seed.

    ``database`` is where randomized property checks keep their Hypothesis example database: a
    directory path or ``redis://host:port/db`` (``None``: no database). ``artifacts`` is where a
    failing check leaves files for the user, such as repro files (``None``: the scratch
    directory; certify with ``--report DIR`` uses ``DIR/artifacts``). A check may put figures
    (counts, seconds) in ``figures``; they are reported with its result. ``check_id`` is the id
    of the check running, set by :meth:`Check.run`; ``failures`` holds the failed assertions a
    check went on after (:meth:`keep_going`). ``allowance`` is its budget while it runs
    (``core/budgets.py``; ``None``: unbounded, as when a test calls it directly).
    ``features`` are the features the backend claims, when the caller has read them already.
    """

    backend: Any
    root: Path
    scratch: Path
    profile: Any
    seed: int | None = None
    database: str | None = None
    artifacts: Path | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    check_id: str = ""
    failures: list[BaseException] = field(default_factory=list)
    allowance: Allowance | None = None
    features: frozenset[str] | None = None

    @contextmanager
    def keep_going(self) -> Iterator[None]:
        """Runs the block; when an assertion in it fails, or the backend breaks the contract
        (a defect, CONTRACT-6), records that and lets the check go on with its next assertion,
        which must not depend on this one. :meth:`Check.run` then ends the check in one
        :class:`~memspec.conformance.core.findings.ClauseFailures` naming every clause found broken,
        so that one defect never masks another (a frame note that differs from the spec's must
        not hide a live closing tag; a store that raises on a failed write is still judged on
        whether it kept the old file)."""
        try:
            yield
        except (AssertionError, Finding) as error:
            if getattr(error, "kind", "") != "defect" and not isinstance(error, AssertionError):
                raise
            self.failures.append(error)

    def claimed_features(self) -> frozenset[str]:
        """Returns the features the backend claims: ``features`` when the suite already read
        them (every session of a command backend is a process to start), else from one session
        opened on the root."""
        if self.features is not None:
            return self.features
        session = self.backend.open(self.root)
        try:
            return frozenset(session.features)
        finally:
            session.close()


CheckFunction = Callable[[CheckContext], None]


class NotApplicable(Finding):
    """The check does not apply to this backend; the suite reports it as skipped with the reason."""

    kind = Kind.UNSUPPORTED


@dataclass(frozen=True)
class Check:
    """A Check is a named conformance check with the clauses it verifies."""

    id: str
    clauses: tuple[str, ...]
    features: tuple[str, ...]
    function: CheckFunction

    def run(self, ctx: CheckContext) -> None:
        """Runs the check under ``ctx``, telling it its own id (``ctx.check_id``), which keys
        its example database and its reproduce command. Failures the check went on after
        (:meth:`CheckContext.keep_going`) end it in one ``ClauseFailures``, with what stopped
        it, if anything, last: a failed assertion or a backend defect (a harness error is
        raised as it is: memspec's bug, not the backend's)."""
        ctx = replace(ctx, check_id=self.id, failures=[])
        try:
            self.function(ctx)
        except (AssertionError, Finding) as error:
            if not ctx.failures or getattr(error, "kind", "") == "harness-error":
                raise
            stopped = [] if isinstance(error, NotApplicable | Unverified) else [error]
            raise ClauseFailures([*ctx.failures, *stopped], completed=False) from error
        if ctx.failures:
            raise ClauseFailures(ctx.failures, completed=True)


CHECKS: dict[str, Check] = {}

RETIRED_IDS: dict[str, str] = {"fence.arbitrary_recalled_text": "properties.fence_escape"}
"""A retired check id and the check that does its work now: an expected-failures file that
names the old id still applies to the new one."""


CHECK_ID = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*")
"""A check id: ``group.name``, e.g. ``concurrency.history_is_linearizable``."""


def check(
    *clauses: str, id: str, features: Iterable[str] = ("core",)
) -> Callable[[CheckFunction], CheckFunction]:
    """Registers the decorated function as the check ``id`` of ``clauses`` (validated when
    defined).

    The id is given, not derived from where the function lives: users name it in
    expected-failures files and ``-k``, and it keys the Hypothesis example database and the
    repro commands, so moving a check to another module must not change it.
    """
    for clause in clauses:
        if not CLAUSE_ID.fullmatch(clause):
            raise ValueError(f"clause ids look like AREA-N, got {clause!r}")
    if not clauses:
        raise ValueError("a check must name the clause ids it verifies")
    if not CHECK_ID.fullmatch(id):
        raise ValueError(f"check ids look like group.name, got {id!r}")

    def register(function: CheckFunction) -> CheckFunction:
        if id in CHECKS:
            raise ValueError(f"check {id} is registered twice")
        CHECKS[id] = Check(id, tuple(clauses), tuple(features), function)
        return function

    return register


CHECK_MODULES = "memspec.checks"
"""The entry-point group that names the modules registering checks (``pyproject.toml``)."""
HOME_MODULE = "memspec.conformance.checks"
"""The check module every installation of memspec names in :data:`CHECK_MODULES`."""


def check_modules() -> list[metadata.EntryPoint]:
    """Returns the entry points of :data:`CHECK_MODULES`, one per module, in the order of the
    installed metadata (raises HarnessError when memspec's own are missing)."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=CHECK_MODULES):
        found.setdefault(entry.value, entry)
    if HOME_MODULE not in found:
        raise HarnessError(
            f"the installed metadata of memspec names no {CHECK_MODULES!r} entry point for "
            f"{HOME_MODULE} (found {sorted(found) or 'none'}): memspec is installed from an older "
            "checkout; reinstall it (pip install -e . from a checkout)"
        )
    return list(found.values())


def all_checks() -> dict[str, Check]:
    """Returns every registered check, importing the check modules first.

    The modules are those the ``memspec.checks`` entry points name: the conformance checks
    (:mod:`memspec.conformance.checks`) and the property checks of :mod:`memspec.fuzz`, which
    register themselves with the same decorator, so certify runs them like any other check. The
    harness never imports :mod:`memspec.fuzz` by name; a module that fails to import is a
    :class:`HarnessError` naming it, never a silent drop of its checks.
    """
    for entry in check_modules():
        try:
            entry.load()
        except Exception as error:
            raise HarnessError(
                f"the check module {entry.value} (entry point {entry.name!r} of "
                f"{CHECK_MODULES!r}) failed to import: {type(error).__name__}: {error}"
            ) from error
    return dict(CHECKS)


def clauses_with_checks() -> dict[str, list[str]]:
    """Returns, for each clause id, the names of the checks that cite it."""
    cited: dict[str, list[str]] = {}
    for item in all_checks().values():
        for clause in item.clauses:
            cited.setdefault(clause, []).append(item.id)
    return cited
