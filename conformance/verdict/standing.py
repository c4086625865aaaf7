"""How a clause stands for one backend, from the records of the checks that cite it: the one
judgement behind the report's clause table, the certify summary, the matrix and the level.

:func:`weigh` sorts a clause's records into the checks that failed it, verified it, stopped
before judging it, or were skipped (for a feature, for the transport, unverified);
:func:`clause_verdict` renders that as the table's verdict (pass, fail, skip, n/a, with the
reason) and :func:`conformance_level` as the level (SPEC.md, "Conformance levels"). A clause
passes only where a check judged it: a check that stopped before its judgment (on another
clause, an undecided search, a failed precondition) leaves it "not verified", which holds every
level back.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from memspec.conformance.verdict.findings import DEFECT_CLAUSE, Kind, shorten
from memspec.conformance.verdict.records import CheckRecord, Status
from memspec.spec.clauses import Clause
from memspec.spec.document import Spec, installed_spec


def blamed_clauses(check: CheckRecord) -> tuple[str, ...]:
    """Returns the clauses a check's record blames: those of its ``failures`` when it went on
    after one, else its ``blamed`` clause — CONTRACT-6 for a backend defect, and every clause
    the check cites when the failure names none."""
    named = [f.clause for f in check.failures] or [check.blamed]
    if check.kind == Kind.DEFECT and named == [""]:
        named = [DEFECT_CLAUSE]
    if "" in named:
        return check.clauses
    return tuple(dict.fromkeys(named))


def fails_clause(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record is a failure of the backend on ``clause``: it failed (or failed
    as listed), blaming that clause or none in particular; never a harness error, nor a listed
    failure that passed (``stale``). The one rule the reports, the matrix and the sweep share."""
    return (
        check.status in ("failed", "xfailed")
        and check.kind not in (Kind.HARNESS_ERROR, Kind.STALE)
        and clause in blamed_clauses(check)
    )


def bears_on(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record counts in ``clause``'s verdict: the check cites the clause, or
    its failure blames it (an example whose mutation was acknowledged but not written fails
    ATOMIC-5, which it does not cite)."""
    return clause in check.clauses or fails_clause(check, clause)


def verifies_clause(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record shows ``clause`` held: the check passed (or is a listed failure
    that passed), or it ran to its end, finding other clauses broken but not this one."""
    if check.status == "passed" or check.kind == Kind.STALE:
        return True
    return (
        check.completed
        and check.status in ("failed", "xfailed")
        and not fails_clause(check, clause)
    )


LEVELS = ("none", "safe", "core", "full")
"""The conformance levels, lowest first (SPEC.md, "Conformance levels")."""
SHOWN_BLOCKERS = 5
CLAUSE_STATUSES = ("pass", "fail", "skip", "n/a")


def scope_skip(clause: Clause, claimed: Collection[str]) -> str | None:
    """Returns why ``clause`` is not judged for a backend that claims ``claimed`` — it binds only
    a backend claiming a feature this one does not claim (SPEC.md, "Scope") — or ``None``."""
    if clause.feature is not None and clause.feature not in claimed:
        return f"binds only a backend that claims {clause.feature}, not claimed"
    return None


class Standing(StrEnum):
    """How a clause stands for a level (:meth:`Weighed.standing`)."""

    FAILS = "fails"
    NEEDS_FEATURE = "needs a feature"
    PASSES = "passes"
    NOT_VERIFIABLE = "not verifiable"
    NOT_VERIFIED = "not verified"


HELD = (Standing.PASSES, Standing.NOT_VERIFIABLE)
"""The standings that hold no level back: a clause that passed, or that only a check for
another transport could verify."""


def _feature_skip(check: CheckRecord) -> bool:
    return check.status == Status.SKIPPED and bool(check.missing_features)


@dataclass(frozen=True)
class Weighed:
    """A Weighed clause is a clause with the records of the checks that bear on it, sorted by
    what each shows of it: ``failing`` (failed on it, the one that blames it alone and cites the
    fewest clauses first), ``verifying`` (judged it and found it held), ``stopped`` (failed or
    stopped on another clause before judging it), ``feature_skipped`` (skipped for a feature the
    backend does not claim) and ``skipped`` (any other skip: not applicable over this transport,
    or unverified)."""

    clause: Clause
    cited: tuple[CheckRecord, ...]
    failing: tuple[CheckRecord, ...]
    verifying: tuple[CheckRecord, ...]
    stopped: tuple[CheckRecord, ...]
    feature_skipped: tuple[CheckRecord, ...]
    skipped: tuple[CheckRecord, ...]

    def standing(self, *, strict: bool = False) -> Standing:
        """Returns how the clause stands for a level: it ``fails`` when a check failed on it;
        with ``strict`` (the level ``full``) it ``needs a feature`` when a citing check was
        skipped for one; it ``passes`` when a check judged it and found it held, or when no
        check cites it and memspec's own tests verify it (``Checked by:``); it is ``not
        verifiable`` when every citing check that counts was skipped as not applicable over this
        transport; else it is ``not verified`` — a check skipped for a feature counts for
        nothing toward ``safe`` and ``core``."""
        if self.failing:
            return Standing.FAILS
        if strict and self.feature_skipped:
            return Standing.NEEDS_FEATURE
        if self.verifying or (not self.cited and self.clause.checked_by):
            return Standing.PASSES
        counted = [c for c in self.cited if not _feature_skip(c)]
        if counted and all(_not_applicable(c) for c in counted):
            return Standing.NOT_VERIFIABLE
        return Standing.NOT_VERIFIED


def _not_applicable(check: CheckRecord) -> bool:
    """Whether a record is a check that does not apply over this transport (skipped, neither
    for a feature nor unverified)."""
    return (
        check.status == Status.SKIPPED
        and check.kind == Kind.UNSUPPORTED
        and not check.missing_features
    )


def weigh(clause: Clause, checks: Iterable[CheckRecord]) -> Weighed:
    """Returns ``clause`` weighed on the records ``checks``: the one judgement of a clause that
    the table (:func:`clause_verdict`) and the level (:func:`conformance_level`) both render."""
    cited = tuple(check for check in checks if bears_on(check, clause.id))
    failing = tuple(
        sorted(
            (check for check in cited if fails_clause(check, clause.id)),
            key=lambda check: (blamed_clauses(check) != (clause.id,), len(check.clauses)),
        )
    )
    verifying = tuple(check for check in cited if verifies_clause(check, clause.id))
    stopped = tuple(
        check
        for check in cited
        if check.status in (Status.FAILED, Status.XFAILED)
        and check.kind != Kind.STALE
        and check not in failing
        and check not in verifying
    )
    feature_skipped = tuple(check for check in cited if _feature_skip(check))
    skipped = tuple(
        check for check in cited if check.status == Status.SKIPPED and not _feature_skip(check)
    )
    return Weighed(clause, cited, failing, verifying, stopped, feature_skipped, skipped)


@dataclass(frozen=True)
class Blocker:
    """A Blocker is a MUST clause that holds the next level back, and how it stands."""

    clause: str
    standing: Standing

    def __str__(self) -> str:
        return f"{self.clause} {self.standing}"


@dataclass(frozen=True)
class Level:
    """A Level is the conformance level a certification reached, computed from the clause verdicts,
    never the claims (SPEC.md, "Conformance levels"): ``name``, ``blocked_by`` (the clauses that
    hold the next level back, failures first; empty at ``full``) and ``not_verifiable``."""

    name: str
    blocked_by: tuple[Blocker, ...] = ()
    not_verifiable: tuple[str, ...] = ()

    @property
    def next(self) -> str | None:
        """The level above this one, or ``None`` at ``full``."""
        index = LEVELS.index(self.name)
        return LEVELS[index + 1] if index + 1 < len(LEVELS) else None

    def headline(self) -> str:
        """Returns the level as one line: ``conformance level: core (full needs: ...)``."""
        line = f"conformance level: {self.name}"
        notes = []
        if self.next is not None and self.blocked_by:
            shown = ", ".join(str(blocker) for blocker in self.blocked_by[:SHOWN_BLOCKERS])
            more = len(self.blocked_by) - SHOWN_BLOCKERS
            notes.append(f"{self.next} needs: {shown}" + (f" and {more} more" if more > 0 else ""))
        if self.not_verifiable:
            notes.append("not verifiable over this transport: " + ", ".join(self.not_verifiable))
        return line + (f" ({'; '.join(notes)})" if notes else "")

    def to_json(self) -> dict[str, Any]:
        """Returns the level as the ``level`` object of ``report.json`` (each blocker as its
        clause and standing, ``"BATCH-2 needs a feature"``)."""
        return {
            "name": self.name,
            "next": self.next,
            "blocked_by": [str(blocker) for blocker in self.blocked_by],
            "not_verifiable": list(self.not_verifiable),
        }


def conformance_level(clauses: Iterable[Clause], checks: Iterable[CheckRecord]) -> Level:
    """Returns the conformance level that the check records ``checks`` reach over the MUST clauses
    of ``clauses`` (those of the run's SPEC.md), the one rule for the report, the certify
    summary and the matrix (a backend claiming no ``batch`` is ``core``, blocked by ``BATCH-2
    needs a feature``).

        safe  every data-protecting clause passes (or is not verifiable here)
        core  safe, and every clause that binds every backend passes
        full  core, and every clause of every optional feature passes, no check of any MUST
              clause skipped for a feature the backend lacks
        none  otherwise
    """
    records = list(checks)
    must = [clause for clause in clauses if clause.level == "MUST"]
    weighed = {clause.id: weigh(clause, records) for clause in must}
    groups = {
        "safe": [c for c in must if c.protects_data],
        "core": [c for c in must if c.feature is None],
        "full": must,
    }
    reached = "none"
    unverifiable: tuple[str, ...] = ()
    for name in LEVELS[1:]:
        strict = name == "full"
        standing = {c.id: weighed[c.id].standing(strict=strict) for c in groups[name]}
        # Failures first: they are what a backend author fixes; then what was not shown.
        order = sorted(standing.items(), key=lambda item: item[1] != Standing.FAILS)
        blocked = tuple(Blocker(cid, how) for cid, how in order if how not in HELD)
        if blocked:
            return Level(reached, blocked, unverifiable)
        reached = name
        unverifiable = tuple(cid for cid, how in standing.items() if how == Standing.NOT_VERIFIABLE)
    return Level(reached, (), unverifiable)


@dataclass(frozen=True)
class ClauseVerdict:
    """A ClauseVerdict is a clause's status for one backend, with the reason when it is not a
    pass, and the ids of the checks that decided it. ``expected`` is true for a failure that
    every deciding check was listed as expected to have."""

    status: str
    reason: str = ""
    checks: tuple[str, ...] = ()
    expected: bool = False


def failure_reason(check: CheckRecord, clause: str = "") -> str:
    """Returns one line saying why a check did not pass — on ``clause`` when the check found
    several clauses broken: its recorded reason (the record's verdict,
    :mod:`memspec.conformance.verdict.findings`), or for a report of an older memspec that has
    none, the first line of its message."""
    for failure in check.failures:
        if failure.clause in (clause, ""):
            return failure.reason
    if check.reason:
        return check.reason
    lines = [line.strip() for line in check.message.splitlines() if line.strip()]
    return shorten(lines[0] if lines else "failed")


def _stopped(check: CheckRecord) -> str:
    if check.kind == Kind.HARNESS_ERROR:
        return f"{check.id} stopped on a harness error"
    return f"{check.id} stopped on {', '.join(blamed_clauses(check))}"


def clause_verdict(
    clause: Clause | str,
    checks: Sequence[CheckRecord],
    claimed: Collection[str] | None = None,
    spec: Spec | None = None,
) -> ClauseVerdict:
    """Returns the verdict of ``clause`` (a clause, or an id of ``spec``, the installed SPEC.md
    by default) over the records ``checks``, as :func:`weigh` judges it; ``claimed``, the
    features the backend claims, when given, skips a clause of a feature it does not claim."""
    if isinstance(clause, str):
        stated = (spec or installed_spec()).clause(clause)
        clause = stated if stated is not None else Clause(clause, "MUST", "", 0)
    weighed = weigh(clause, checks)
    if not weighed.cited:
        return ClauseVerdict("n/a")
    unclaimed = scope_skip(clause, claimed) if claimed is not None else None
    if unclaimed is not None:
        return ClauseVerdict("skip", unclaimed, tuple(check.id for check in weighed.cited))
    if weighed.failing:
        own = weighed.failing
        check = own[0]
        expected = all(other.status == Status.XFAILED for other in own)
        note = " (expected)" if check.status == Status.XFAILED else ""
        also = [other.id for other in own[1:]]
        if also:
            note += f" (also failed by {', '.join(also)})"
        reason = f"{check.id}{note}: {failure_reason(check, clause.id)}"
        return ClauseVerdict("fail", reason, (check.id,), expected)
    judged = tuple(
        check.id for check in weighed.cited if check.status in (Status.FAILED, Status.XFAILED)
    )
    stopped = [_stopped(check) for check in weighed.stopped]
    if stopped and not weighed.verifying:
        # the checks that judge it stopped on other clauses: a feature another one needs is
        # not why it is unknown
        return ClauseVerdict("skip", "not verified: " + "; ".join(stopped), judged)
    unjudged = [c for c in weighed.skipped if c.kind == Kind.UNVERIFIED]
    if weighed.feature_skipped and not weighed.verifying and unjudged:
        # nothing judged it, for a reason of its own beside a feature another check needs: that
        # reason is why it is unknown, not the other check's feature (a patch for DRIFT-2)
        first = unjudged[0]
        return ClauseVerdict("skip", failure_reason(first), (first.id,))
    if weighed.feature_skipped:
        check = weighed.feature_skipped[0]
        reason = f"needs feature {', '.join(check.missing_features)}, not claimed"
        return ClauseVerdict("skip", reason, (check.id,))
    if weighed.verifying:
        skips = len(weighed.skipped)
        notes = [f"{skips} of {len(weighed.cited)} checks skipped"] if skips else []
        return ClauseVerdict("pass", "; ".join(notes + stopped), judged)
    first = weighed.skipped[0]
    return ClauseVerdict("skip", failure_reason(first), (first.id,))
