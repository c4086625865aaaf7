"""The registry of named conformance checks and the clause ids each verifies.

A check is a plain function over a :class:`CheckContext`; it raises a ``Violation`` of the clause
the backend broke (``memspec.conformance.verdict.findings``), never a bare assertion. The
decorator records the clauses and the features the check needs (CONTRACT features), so ``memspec
spec --check`` finds uncovered MUST clauses and a check needing an unclaimed feature is skipped;
a check that cannot apply to a backend over its transport raises ``NotApplicable``, one that
could not judge ``Unverified``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from memspec.conformance.core.budgets import Allowance, enforced, start_allowance
from memspec.conformance.core.profiles import Profile
from memspec.conformance.transport.backend import Backend, Session
from memspec.conformance.verdict.findings import (
    ClauseFailures,
    Finding,
    HarnessError,
    Kind,
    NotApplicable,
    Refusal,
    Unverified,
)
from memspec.conformance.verdict.records import Figure
from memspec.spec.clauses import CLAUSE_ID

if TYPE_CHECKING:  # the worker machinery it names is imported where a context builds one
    from memspec.conformance.tamper.capability import Tampering


@dataclass(frozen=True)
class CheckContext:
    """A CheckContext is what one check runs with: the backend, a fresh empty root directory the
    backend owns, a scratch directory outside it, the profile and the seed.

    A check opens its sessions on the root through the context, each closed when its block
    ends: ``with ctx.session(limits) as session:``, ``with ctx.sessions(2) as (a, b):``.
    ``tampering`` is what can be done to the backend's file-system calls
    (:mod:`memspec.conformance.tamper.capability`): the suite builds it once from the backend's
    transport and hands it to every check (left out, it is built here from ``backend``); a check
    that cannot reach the calls learns it from :meth:`Tampering.require` (NotApplicable), never
    by asking which backend it got.

    ``database`` is the Hypothesis example database (a path or ``redis://host:port/db``; ``None``:
    none). ``artifacts`` is where a failing check leaves files for the user (``None``: the scratch
    directory). ``figures`` are reported with the result; ``check_id`` is set by :meth:`Check.run`;
    ``failures`` holds what a check went on after (:meth:`keep_going`); ``allowance`` is its budget
    (``None``: unbounded); ``features`` the backend's claims, when already read.
    """

    backend: Backend
    root: Path
    scratch: Path
    profile: Profile
    seed: int | None = None
    database: str | None = None
    artifacts: Path | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    check_id: str = ""
    failures: list[BaseException] = field(default_factory=list)
    allowance: Allowance | None = None
    features: frozenset[str] | None = None
    tampering: Tampering = None  # type: ignore[assignment]  # None: built by __post_init__

    def __post_init__(self) -> None:
        if self.tampering is None:
            from memspec.conformance.tamper.capability import tampering

            object.__setattr__(self, "tampering", tampering(self.backend))

    def session(
        self, limits: Mapping[str, int] | None = None, *, root: Path | None = None
    ) -> Session:
        """Returns a new session on the check's root (or on ``root``, another directory of the
        check's) with ``limits`` (the defaults for a target they leave out); used as ``with
        ctx.session(limits) as session:``, it is closed when the block ends. Raises
        BackendDefect when it cannot be opened."""
        return self.backend.open(self.root if root is None else root, limits)

    @contextmanager
    def sessions(
        self, count: int, limits: Mapping[str, int] | None = None, *, root: Path | None = None
    ) -> Iterator[tuple[Session, ...]]:
        """Yields ``count`` new sessions on the check's root (or on ``root``), opened in order
        with ``limits``: ``with ctx.sessions(2) as (a, b):``. Every one opened is closed when the
        block ends, also when a later one fails to open."""
        with ExitStack() as opened:
            yield tuple(opened.enter_context(self.session(limits, root=root)) for _ in range(count))

    @contextmanager
    def keep_going(self) -> Iterator[None]:
        """Runs the block; a violation or a backend defect (CONTRACT-6) in it is recorded and
        the check goes on with its next, independent assertion, so that one defect never masks
        another; :meth:`Check.run` then ends the check in one
        :class:`~memspec.conformance.verdict.findings.ClauseFailures`."""
        try:
            yield
        except Finding as error:
            # a refused core action stops the check: nothing after it can be driven
            if error.kind not in (Kind.VIOLATION, Kind.DEFECT) or isinstance(error, Refusal):
                raise
            self.failures.append(error)

    def claimed_features(self) -> frozenset[str]:
        """Returns the features the backend claims: ``features`` when the suite already read
        them (every session of a command backend is a process to start), else from one session
        opened on the root."""
        if self.features is not None:
            return self.features
        with self.session() as session:
            return frozenset(session.features)


CheckFunction = Callable[[CheckContext], None]


@dataclass(frozen=True)
class Check:
    """A Check is a named conformance check with the clauses it verifies."""

    id: str
    clauses: tuple[str, ...]
    features: tuple[str, ...]
    function: CheckFunction

    def run(self, ctx: CheckContext) -> None:
        """Runs the check under ``ctx`` with ``ctx.check_id`` set. Failures it went on after end it
        in one ``ClauseFailures``, with what stopped it, if anything, last (a harness error is
        raised as it is)."""
        ctx = replace(ctx, check_id=self.id, failures=[])
        try:
            self.function(ctx)
        except Finding as error:
            if not ctx.failures or error.kind == Kind.HARNESS_ERROR:
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
    """Registers the decorated function as the check ``id`` of ``clauses`` (validated when defined).
    The id is given, not derived from the module, since expected-failures files, ``-k``, the example
    database and repro commands name it."""
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
    """Returns every registered check, importing first the modules the ``memspec.checks`` entry
    points name (:mod:`memspec.fuzz` is never imported by name); one that fails to import is a
    :class:`HarnessError` naming it."""
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


def run_within_budget(check: Check, context: CheckContext) -> None:
    """Runs ``check`` as certification does: under its budget for ``context.profile``, which
    its searches read from ``context.allowance`` and :func:`enforced` holds it to. The figures
    it reports go into ``context.figures``; a cut ends in :class:`BudgetSpent`."""
    allowance = start_allowance(check.id, context.profile)
    with enforced(allowance, context.figures):
        check.run(replace(context, allowance=allowance))
