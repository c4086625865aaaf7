"""The verdict of one clause for one backend, from the records of the checks that cite it.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memspec.conformance.core.findings import (
    Kind,
    bears_on,
    blamed_clauses,
    fails_clause,
    scope_skip,
    shorten,
    verifies_clause,
)
from memspec.spec.clauses import Clause, parse_clauses
from memspec.spec.examples import spec_text

if TYPE_CHECKING:
    from memspec.conformance.core.records import CheckRecord

CLAUSE_STATUSES = ("pass", "fail", "skip", "n/a")


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
    :mod:`memspec.conformance.core.findings`), or for a report of an older memspec that has none,
    the first line of its message."""
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


@functools.cache
def _clauses_by_id() -> dict[str, Clause]:
    return {clause.id: clause for clause in parse_clauses(spec_text())}


def clause_verdict(
    clause: str, checks: Sequence[CheckRecord], claimed: Collection[str] | None = None
) -> ClauseVerdict:
    """Returns the verdict of ``clause`` over the records ``checks`` (rules in the module
    docstring); ``claimed``, the features the backend claims, when given, skips a clause of a
    feature it does not claim."""
    cited = [check for check in checks if bears_on(check, clause)]
    if not cited:
        return ClauseVerdict("n/a")
    stated = _clauses_by_id().get(clause)
    unclaimed = scope_skip(stated, claimed) if stated and claimed is not None else None
    if unclaimed is not None:
        return ClauseVerdict("skip", unclaimed, tuple(check.id for check in cited))
    own = sorted(
        (check for check in cited if fails_clause(check, clause)),
        key=lambda check: (blamed_clauses(check) != (clause,), len(check.clauses)),
    )
    if own:
        check = own[0]
        expected = all(other.status == "xfailed" for other in own)
        note = " (expected)" if check.status == "xfailed" else ""
        also = [other.id for other in own[1:]]
        if also:
            note += f" (also failed by {', '.join(also)})"
        reason = f"{check.id}{note}: {failure_reason(check, clause)}"
        return ClauseVerdict("fail", reason, (check.id,), expected)
    skipped = [check for check in cited if check.status == "skipped"]
    others = [check for check in cited if check.status in ("failed", "xfailed")]
    stopped = [
        _stopped(check)
        for check in others
        if check.kind != Kind.STALE and not verifies_clause(check, clause)
    ]
    ids = tuple(check.id for check in others)
    verified = any(verifies_clause(check, clause) for check in cited)
    if stopped and not verified:
        # the checks that judge it stopped on other clauses: a feature another one needs is
        # not why it is unknown
        return ClauseVerdict("skip", "not verified: " + "; ".join(stopped), ids)
    for check in skipped:
        if check.missing_features:
            reason = f"needs feature {', '.join(check.missing_features)}, not claimed"
            return ClauseVerdict("skip", reason, (check.id,))
    if verified:
        notes = [f"{len(skipped)} of {len(cited)} checks skipped"] if skipped else []
        return ClauseVerdict("pass", "; ".join(notes + stopped), ids)
    return ClauseVerdict("skip", failure_reason(skipped[0]), (skipped[0].id,))
