"""What a backend author fixes next: the failing clauses, grouped by the level each one blocks
(``safe``, then ``core``, then ``full``), one entry per clause with the check that failed it,
the reason, and the rule to make true. The terminal summary of ``memspec certify`` and the top
of ``report.md`` are this one list.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from memspec.conformance.verdict.records import CheckRecord
from memspec.conformance.verdict.standing import (
    LEVELS,
    Level,
    Standing,
    clause_verdict,
    failure_reason,
)
from memspec.spec.clauses import Clause
from memspec.spec.document import Spec, installed_spec

SHOULD = "should"
"""The group of a failing SHOULD clause: it holds no level back."""
RULE_WIDTH = 110
REASON_WIDTH = 150
READ_MORE = "memspec spec --clause ID"
SHOWN_PENDING = 12
NOT_RUN = "no check of this run judged it (a -k selection leaves it out)"
_FIRST_SENTENCE = re.compile(r"(.+?[.;:])(?:\s|$)")


@dataclass(frozen=True)
class FailingClause:
    """A FailingClause is one clause a backend fails: ``blocks`` the level it holds back
    (``safe``, ``core``, ``full``, or ``should``), ``check`` the check that failed it, ``reason``
    one line of what went wrong, ``rule`` the clause's first sentence, what to make true."""

    clause: str
    blocks: str
    check: str
    reason: str
    rule: str


def blocked_level(clause: Clause) -> str:
    """Returns the level a failure of ``clause`` holds back (SPEC.md, "Conformance levels")."""
    if clause.level != "MUST":
        return SHOULD
    if clause.protects_data:
        return "safe"
    return "core" if clause.feature is None else "full"


def rule_of(clause: Clause) -> str:
    """Returns the first sentence of ``clause``, shortened: the rule a fix makes true."""
    text = " ".join(clause.text.split())
    found = _FIRST_SENTENCE.match(text)
    return _clip(found.group(1).rstrip(";:") if found else text, RULE_WIDTH)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def failing_clauses(
    records: Iterable[CheckRecord],
    claimed: Collection[str] | None = None,
    spec: Spec | None = None,
) -> list[FailingClause]:
    """Returns every clause of ``spec`` (the installed SPEC.md by default) the records fail (an
    expected failure excepted), ``safe``'s first, then ``core``'s, ``full``'s and the SHOULD
    clauses', each group in the order of SPEC.md."""
    checks = list(records)
    found = []
    for clause in (spec or installed_spec()).clauses:
        verdict = clause_verdict(clause, checks, claimed)
        if verdict.status != "fail" or verdict.expected:
            continue
        check = next(c for c in checks if c.id == verdict.checks[0])
        reason = failure_reason(check, clause.id)
        reason = _clip(re.sub(r"^example [\w-]+: ", "", reason), REASON_WIDTH)
        found.append(
            FailingClause(
                clause.id,
                blocked_level(clause),
                check.id.split("/", 1)[-1],
                reason,
                rule_of(clause),
            )
        )
    order = (*LEVELS[1:], SHOULD)
    return sorted(found, key=lambda item: order.index(item.blocks))


def not_verified(
    level: Level,
    records: Iterable[CheckRecord],
    claimed: Collection[str] | None = None,
    spec: Spec | None = None,
) -> list[tuple[str, str]]:
    """Returns the clauses holding ``level`` back that no check could judge (their checks
    stopped on another clause, needed a feature, or were cut short), each with why."""
    checks = list(records)
    pending = [b.clause for b in level.blocked_by if b.standing != Standing.FAILS]
    return [
        (clause, clause_verdict(clause, checks, claimed, spec).reason or NOT_RUN)
        for clause in pending
    ]


def adapter_gaps(records: Iterable[CheckRecord]) -> list[tuple[str, str]]:
    """Returns the checks an adapter gap stopped (memspec's adapter of a store written elsewhere
    met an answer it cannot map), each with the answer: its clauses read "not verified", and
    the adapter, not the store, needs the fix."""
    return [(record.id, record.reason) for record in records if record.adapter_gap]


def _heading(group: str, count: int) -> str:
    plural = "clause fails" if count == 1 else "clauses fail"
    return {
        "safe": f"safe: {count} {plural} (they protect data already stored: fix these first)",
        "core": f"core: {count} {plural} (rules every backend keeps)",
        "full": f"full: {count} {plural} (rules of the features it claims)",
        SHOULD: f"advice: {count} SHOULD {plural} (no level depends on them)",
    }[group]


def render(
    failing: Sequence[FailingClause],
    pending: Sequence[tuple[str, str]] = (),
    *,
    gaps: Sequence[tuple[str, str]] = (),
    markdown: bool = False,
) -> list[str]:
    """Returns the lines of the summary: the adapter gaps first (``gaps``: check and answer),
    a heading per group, then per clause one line with the clause, the reason and the check, and
    under it the rule; then the clauses the next level needs that no check could judge
    (``pending``), each with why; then where to read more. Markdown makes each clause a list
    item."""
    lines: list[str] = []
    if gaps:
        heading = (
            f"adapter gaps: {len(gaps)} check(s) stopped on an answer memspec's adapter cannot "
            "map (a rule to add, not a defect of the store):"
        )
        lines += [("### " if markdown else "") + heading, *([""] if markdown else [])]
        for check, why in gaps[:SHOWN_PENDING]:
            why = _clip(why, REASON_WIDTH)
            lines.append(f"- `{check}` {why}" if markdown else f"  {why}  [{check}]")
        lines.append("")
    groups = dict.fromkeys(item.blocks for item in failing)
    for group in groups:
        members = [item for item in failing if item.blocks == group]
        lines.append(("### " if markdown else "") + _heading(group, len(members)))
        if markdown:
            lines.append("")
        for item in members:
            if markdown:
                reason = item.reason.replace("|", "\\|")
                lines.append(f"- **{item.clause}** {reason} (`{item.check}`)  ")
                lines.append(f"  rule: {item.rule}")
            else:
                lines.append(f"  {item.clause:<11}{item.reason}  [{item.check}]")
                lines.append(f"  {'':<11}rule: {item.rule}")
        lines.append("")
    if pending:
        heading = f"not verified, and needed for the next level ({len(pending)}):"
        lines.append(("### " if markdown else "") + heading)
        if markdown:
            lines.append("")
        for clause, why in pending[:SHOWN_PENDING]:
            why = _clip(why, REASON_WIDTH)
            lines.append(f"- **{clause}** {why}" if markdown else f"  {clause:<11}{why}")
        if len(pending) > SHOWN_PENDING:
            lines.append(f"  and {len(pending) - SHOWN_PENDING} more (report.md lists them)")
        lines.append("")
    if failing or pending or gaps:
        lines.append(
            f"read a clause, its examples and its checks: {READ_MORE}; every check's whole "
            "message: certify -v, or report.md"
        )
    return lines


def failing_summary(
    records: Iterable[CheckRecord],
    level: Level,
    claimed: Collection[str] | None = None,
    spec: Spec | None = None,
) -> list[str]:
    """Returns :func:`render` of the records' failing and pending clauses, for the terminal."""
    checks = list(records)
    failing = failing_clauses(checks, claimed, spec)
    pending = not_verified(level, checks, claimed, spec)
    return render(failing, pending, gaps=adapter_gaps(checks))
