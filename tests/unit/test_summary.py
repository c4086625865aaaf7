"""The author's summary: failing clauses grouped by the level they block, one line each."""

from __future__ import annotations

from memspec.conformance.verdict.findings import Kind
from memspec.conformance.verdict.records import CheckRecord, Status
from memspec.conformance.verdict.report import level_of
from memspec.conformance.verdict.summary import failing_clauses, failing_summary, rule_of
from memspec.spec.clauses import parse_clauses
from memspec.spec.document import installed_spec


def _failed(check: str, clause: str, reason: str) -> CheckRecord:
    return CheckRecord(
        check, (clause,), ("core",), Status.FAILED, reason, 0.1, {}, Kind.VIOLATION, clause, reason
    )


def test_failures_are_grouped_by_the_level_they_block_safe_first() -> None:
    records = [
        _failed("ENTRY/entry-normalised", "ENTRY-1", "example entry-normalised: entries differ"),
        _failed("ATOMIC/atomic.write_replaces_by_rename", "ATOMIC-2", "ATOMIC-2: written in place"),
    ]
    found = failing_clauses(records)
    assert [(f.clause, f.blocks, f.check) for f in found] == [
        ("ATOMIC-2", "safe", "atomic.write_replaces_by_rename"),
        ("ENTRY-1", "core", "entry-normalised"),
    ]
    assert found[1].reason == "entries differ"  # the example's name is the check's, not repeated
    lines = failing_summary(records, level_of(records))
    assert lines[0].startswith("safe: 1 clause fails") and lines[1].startswith("  ATOMIC-2   ")
    assert lines[2].strip().startswith("rule: The data file is never truncated")
    core = lines.index(next(line for line in lines if line.startswith("core: ")))
    assert lines[core + 1].startswith("  ENTRY-1    entries differ")
    # the clauses no check judged are listed with their own reason, not as "failures above"
    pending = lines.index(next(line for line in lines if line.startswith("not verified")))
    assert all(line.startswith("  ") for line in lines[pending + 1 : pending + 3])


def test_a_rule_is_the_clause_first_sentence_shortened() -> None:
    clauses = {clause.id: clause for clause in parse_clauses(installed_spec().text)}
    assert (
        rule_of(clauses["LIMIT-2"]) == "A mutation whose result uses exactly the limit is accepted"
    )
    assert len(rule_of(clauses["DRIFT-2"])) <= 110
