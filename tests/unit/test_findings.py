"""Verdicts as data: how a check that did not pass ended, taken from the exception it raised.

That a bug in a check reaches the report as a harness error, through the plugin, is checked in
``tests/harness/test_plugin.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis.errors import FlakyFailure

from memspec.conformance.core.registry import Check, CheckContext
from memspec.conformance.transport.backend import BackendDefect
from memspec.conformance.verdict.findings import (
    AdapterGap,
    ClauseFailure,
    ClauseFailures,
    HarnessError,
    Kind,
    Mismatch,
    NotApplicable,
    Refusal,
    Verdict,
    Violation,
    verdict_of,
)
from memspec.conformance.verdict.records import CheckRecord, Status
from memspec.conformance.verdict.standing import (
    ClauseVerdict,
    bears_on,
    blamed_clauses,
    clause_verdict,
    conformance_level,
    fails_clause,
    verifies_clause,
)


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (Violation("LOCK-3", "an acknowledged write was lost\nmore"),
         Verdict("violation", "LOCK-3", "LOCK-3: an acknowledged write was lost")),
        # a bare assertion is memspec's own invariant, never a verdict read out of its text
        (AssertionError("LOCK-3: an acknowledged write was lost"),
         Verdict("harness-error", "", "AssertionError: LOCK-3: an acknowledged write was lost")),
        (AssertionError(), Verdict("harness-error", "", "AssertionError: AssertionError")),
        (Violation("DRIFT-3", "no backup"), Verdict("violation", "DRIFT-3", "DRIFT-3: no backup")),
        (Mismatch("example x (READ-1)\n  step: load", "example x: load → differs"),
         Verdict("violation", "", "example x: load → differs")),
        (BackendDefect("add raised RuntimeError: boom"),
         Verdict("defect", "CONTRACT-6", "backend defect: add raised RuntimeError: boom")),
        (HarnessError("no answer"),
         Verdict("harness-error", "", "BUG IN MEMSPEC: no answer")),
        (TypeError("'NoneType' object is not subscriptable"),
         Verdict("harness-error", "", "TypeError: 'NoneType' object is not subscriptable")),
        (NotApplicable("needs a Python backend"),
         Verdict("unsupported", "", "needs a Python backend")),
    ],
)  # fmt: skip
def test_the_verdict_follows_the_exception(error: BaseException, verdict: Verdict) -> None:
    assert verdict_of(error) == verdict


def test_a_group_of_failures_is_judged_by_its_first_finding() -> None:
    group = FlakyFailure("two bugs", [ValueError("x"), Violation("SNAP-6", "28%")])
    assert verdict_of(group) == Verdict("violation", "SNAP-6", "SNAP-6: 28%")


def _round_trip(verdict: Verdict) -> CheckRecord:
    record = CheckRecord("x", ("A-1",), ("core",), Status.FAILED, "m", 0, {"n": 1}, **vars(verdict))
    return CheckRecord.from_json(json.loads(json.dumps(record.to_json())))


def test_records_round_trip_as_json() -> None:
    verdict = Verdict(Kind.UNSUPPORTED, "", "needs feature batch", ("batch",))
    assert vars(_round_trip(verdict)).items() >= vars(verdict).items()
    assert _round_trip(verdict).to_json()["kind"] == "unsupported"
    gap = Verdict(Kind.UNVERIFIED, "", "ADAPTER GAP: unrecognised answer", adapter_gap=True)
    assert _round_trip(gap).adapter_gap


def test_a_violation_names_a_clause_id() -> None:
    with pytest.raises(HarnessError, match="names the clause 'lost'"):
        Violation("lost", "an acknowledged write")
    assert verdict_of(AdapterGap("ADAPTER GAP: x")).adapter_gap


def test_the_reason_carries_the_backends_last_words() -> None:
    last_words = "AttributeError: 'int' object has no attribute 'strip'"
    defect = BackendDefect("the backend exited with status 1\n--- stderr ---\nTraceback", None,
                           None, last_words)  # fmt: skip
    assert verdict_of(defect).reason == (
        "backend defect: the backend exited with status 1 "
        "(AttributeError: 'int' object has no attribute 'strip')"
    )
    try:
        try:
            raise defect
        except BackendDefect as caught:
            raise Violation("CONTRACT-2", f"add did not answer: {caught}") from caught
    except Violation as error:
        verdict = verdict_of(error)
    assert verdict.blamed == "CONTRACT-2"
    assert verdict.reason.endswith("(AttributeError: 'int' object has no attribute 'strip')")


def test_the_report_and_the_matrix_read_a_clause_the_same_way() -> None:
    """One verdict per clause: a pass of one check does not hide a skip for a missing feature,
    in the report's clause table as in the matrix (CONTRACT-20)."""

    from memspec.conformance.verdict.records import CheckRecord
    from memspec.conformance.verdict.report import clause_matrix
    from memspec.conformance.verdict.standing import clause_verdict
    from memspec.spec.clauses import parse_clauses
    from memspec.spec.document import installed_spec

    records = [
        CheckRecord("drift.a", ("DRIFT-3",), ("core",), "passed", "", 0.1),
        CheckRecord(
            "drift.b", ("DRIFT-3", "DRIFT-4"), ("drift-guard",), "skipped", "", 0.0,
            kind="unsupported", reason="needs drift-guard", missing_features=("drift-guard",),
        ),
        CheckRecord("read.c", ("READ-1",), ("core",), "xfailed", "READ-1: glued", 0.1,
                    kind="violation", blamed="READ-1", reason="READ-1: glued"),
    ]  # fmt: skip
    rows = {row.clause: row for row in clause_matrix(parse_clauses(installed_spec().text), records)}
    checks = records
    assert rows["DRIFT-3"].status == clause_verdict("DRIFT-3", checks).status == "skip"
    assert rows["DRIFT-3"].why == ("needs feature drift-guard, not claimed",)
    assert rows["READ-1"].status == "expected fail"
    assert clause_verdict("READ-1", checks).status == "fail"
    assert rows["CONTRACT-15"].status == "n/a" and rows["FORMAT-1"].status == "unchecked"


def _run_check(function: Callable[[CheckContext], None]) -> None:
    ctx = CheckContext(backend=None, root=Path("."), scratch=Path("."), profile=None)
    Check("group.name", ("FENCE-1", "FENCE-2", "FENCE-3"), ("core",), function).run(ctx)


def test_a_check_that_keeps_going_names_every_clause_it_found_broken() -> None:
    def body(ctx: CheckContext) -> None:
        for clause in ("FENCE-1", "FENCE-2", "FENCE-1"):
            with ctx.keep_going():
                raise Violation(clause, "broken")

    with pytest.raises(ClauseFailures) as failure:
        _run_check(body)
    assert failure.value.failures == (
        ClauseFailure("FENCE-1", "FENCE-1: broken (and 1 more failure(s) of this clause)"),
        ClauseFailure("FENCE-2", "FENCE-2: broken"),
    )
    assert failure.value.completed
    assert str(failure.value).startswith("FENCE-1: broken")
    verdict = verdict_of(failure.value)
    assert (verdict.blamed, verdict.completed) == ("FENCE-1", True)
    assert vars(_round_trip(verdict)).items() >= vars(verdict).items()


@pytest.mark.parametrize(
    ("stop", "clause"),
    [
        (Violation("FENCE-2", "stopped here"), "FENCE-2"),
        (BackendDefect("session final: the harness killed the worker"), "CONTRACT-6"),
    ],
)
def test_what_stops_a_check_after_a_kept_failure_joins_it(stop: Exception, clause: str) -> None:
    # A failed assertion or a backend defect that stops the check is its last failure, and the
    # check did not run to its end.
    def body(ctx: CheckContext) -> None:
        with ctx.keep_going():
            raise Violation("FENCE-1", "broken")
        raise stop

    with pytest.raises(ClauseFailures) as failure:
        _run_check(body)
    assert [f.clause for f in failure.value.failures] == ["FENCE-1", clause]
    assert not failure.value.completed


def test_a_refused_core_action_stops_the_check_and_blames_its_own_clauses() -> None:
    # keep_going lets a Refusal through: nothing after it was driven, so the check did not run
    # to its end, and it counts against CONTRACT-2 and REPLACE-1, shown once.
    refusal = Refusal("replace", ("CONTRACT-2", "REPLACE-1"), "replace answered E_UNSUPPORTED")

    def body(ctx: CheckContext) -> None:
        with ctx.keep_going():
            raise Violation("FENCE-1", "broken")
        with ctx.keep_going():
            raise refusal
        raise Violation("FENCE-2", "never reached")

    with pytest.raises(ClauseFailures) as failure:
        _run_check(body)
    assert [f.clause for f in failure.value.failures] == ["FENCE-1", "CONTRACT-2", "REPLACE-1"]
    assert not failure.value.completed
    assert str(failure.value).count("E_UNSUPPORTED") == 1
    alone = verdict_of(refusal)
    assert (alone.blamed, alone.completed) == ("CONTRACT-2", False)
    record = CheckRecord.from_json(
        {"id": "x", "status": "failed", "kind": "violation", "clauses": ["MATCH-1", "REPLACE-1"],
         "failures": [asdict(f) for f in alone.failures], "completed": False}
    )  # fmt: skip
    assert fails_clause(record, "REPLACE-1") and not fails_clause(record, "MATCH-1")
    assert not verifies_clause(record, "MATCH-1")


def test_a_check_with_one_plain_failure_raises_it_unchanged() -> None:
    def body(ctx: CheckContext) -> None:
        raise Violation("FENCE-2", "stopped here")

    with pytest.raises(Violation) as failure:
        _run_check(body)
    assert not isinstance(failure.value, ClauseFailures)


def _record(completed: bool, *clauses: str) -> CheckRecord:
    failures = [{"clause": clause, "reason": f"{clause}: broken"} for clause in clauses]
    return CheckRecord.from_json({
        "id": "FENCE/group.name",
        "clauses": ["FENCE-1", "FENCE-2", "FENCE-3"],
        "status": "failed",
        "kind": "violation",
        "blamed": clauses[0],
        "reason": f"{clauses[0]}: broken",
        "failures": failures,
        "completed": completed,
    })  # fmt: skip


def test_a_completed_check_verifies_the_clauses_it_did_not_find_broken() -> None:
    # One defect never masks another: FENCE-3 passes by a check that ran to its end, and reads
    # "not verified" by one that stopped.
    done = [_record(True, "FENCE-1", "FENCE-2")]
    assert clause_verdict("FENCE-2", done) == ClauseVerdict(
        "fail", "FENCE/group.name: FENCE-2: broken", ("FENCE/group.name",)
    )
    assert clause_verdict("FENCE-3", done).status == "pass"
    stopped = [_record(False, "FENCE-1", "FENCE-2")]
    assert clause_verdict("FENCE-3", stopped) == ClauseVerdict(
        "skip",
        "not verified: FENCE/group.name stopped on FENCE-1, FENCE-2",
        ("FENCE/group.name",),
    )
    assert blamed_clauses(done[0]) == ("FENCE-1", "FENCE-2")
    assert fails_clause(done[0], "FENCE-1") and not fails_clause(done[0], "FENCE-3")
    assert verifies_clause(done[0], "FENCE-3") and not verifies_clause(stopped[0], "FENCE-3")


def test_a_harness_error_after_a_kept_failure_is_raised_as_it_is() -> None:
    def bug(ctx: CheckContext) -> None:
        with ctx.keep_going():
            raise Violation("CRASH-3", "the target stayed locked")
        raise HarnessError("BUG IN CHECK: no answer")

    with pytest.raises(HarnessError):
        _run_check(bug)


def test_a_clause_failed_by_several_checks_names_them_all() -> None:
    # READ-7 of Hermes: a file that is a directory, and a transient EIO that wipes the file,
    # are two findings; the verdict names both checks, the second before any shortening.
    read_7 = replace(_record(True, "READ-7"), clauses=("READ-7",))
    directory = replace(read_7, id="READ/read.unreadable_file_is_not_empty")
    transient = replace(read_7, id="READ/faults.read_errors_are_not_empty")
    verdict = clause_verdict("READ-7", [directory, transient])
    assert verdict == ClauseVerdict(
        "fail",
        "READ/read.unreadable_file_is_not_empty (also failed by "
        "READ/faults.read_errors_are_not_empty): READ-7: broken",
        ("READ/read.unreadable_file_is_not_empty",),
    )
    assert clause_verdict("READ-7", [transient]).reason == (
        "READ/faults.read_errors_are_not_empty: READ-7: broken"
    )


def test_an_unverified_check_leaves_its_clauses_not_verified_never_failed() -> None:
    """A check whose precondition failed (Unverified) neither fails its clauses nor lets them
    read "not verifiable", which holds no level back: they are "not verified"."""
    from memspec.conformance.verdict.findings import Unverified
    from memspec.conformance.verdict.standing import Standing, weigh
    from memspec.spec.clauses import parse_clauses
    from memspec.spec.document import installed_spec

    verdict = verdict_of(Unverified("replace answered E_NOMATCH; cannot judge"))
    assert (verdict.kind, verdict.blamed) == (Kind.UNVERIFIED, "")
    clause = next(c for c in parse_clauses(installed_spec().text) if c.id == "CRASH-4")

    def skipped(kind: str) -> CheckRecord:
        return CheckRecord.from_json({
            "id": "CRASH/crashstates.crash_states_are_old_or_new",
            "clauses": ["CRASH-1", "CRASH-4"], "status": "skipped", "kind": kind,
            "reason": "cannot judge",
        })  # fmt: skip

    assert not fails_clause(skipped("unverified"), "CRASH-4")
    assert weigh(clause, [skipped("unverified")]).standing() == Standing.NOT_VERIFIED
    assert weigh(clause, [skipped("unsupported")]).standing() == Standing.NOT_VERIFIABLE


def test_a_failure_counts_against_a_clause_it_blames_but_does_not_cite() -> None:
    # an example of REMOVE-1 on a store that never wrote the add it acknowledged fails ATOMIC-5
    # alone: ATOMIC-5 fails (and blocks the level), REMOVE-1 is not verified by it
    unwritten = CheckRecord.from_json({
        "id": "REMOVE/remove-deletes-one-entry",
        "clauses": ["REMOVE-1"],
        "status": "failed",
        "kind": "violation",
        "blamed": "ATOMIC-5",
        "reason": "add memory answered OK, but MEMORY.md then still held what it held before",
        "failures": [{"clause": "ATOMIC-5", "reason": "…"}],
        "completed": False,
    })  # fmt: skip
    assert bears_on(unwritten, "ATOMIC-5") and bears_on(unwritten, "REMOVE-1")
    assert clause_verdict("ATOMIC-5", [unwritten]).status == "fail"
    assert clause_verdict("REMOVE-1", [unwritten]).status == "skip"
    from memspec.spec.document import installed_spec

    level = conformance_level(installed_spec().clauses, [unwritten])
    assert "ATOMIC-5 fails" in map(str, level.blocked_by)


def test_a_report_quoting_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    # a backend's message quoting "\ud800" once ended report writing in UnicodeEncodeError
    from memspec.conformance.verdict.records import RunInfo
    from memspec.conformance.verdict.report import write_reports

    verdict = verdict_of(Violation("TOOL-7", "the tool answered '\ud800'"))
    record = CheckRecord(
        "x", ("TOOL-7",), ("tool",), Status.FAILED, "'\ud800'", 0, {}, **vars(verdict)
    )
    info = RunInfo("b", "b", "1", ("core",), "ci", None, "linux", "3.11", "ext4", "0", "2.1")
    write_reports(tmp_path, info, [record])
    assert "\\ud800" in (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "\\ud800" in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.json", "report.md"]


def test_a_clause_whose_checks_stopped_is_not_verified_whatever_another_needs() -> None:
    # agent-os' DRIFT-3: the example of the backup stopped on DRIFT-2, and a fault check that
    # cites it needs `durable`, which the store does not claim: the clause is unknown because
    # its own checks stopped, not because of a feature
    from memspec.conformance.verdict.records import CheckRecord
    from memspec.conformance.verdict.standing import clause_verdict

    stopped = replace(_record(False, "DRIFT-2"), clauses=("DRIFT-3",))
    records = [
        replace(stopped, id="DRIFT/drift-backup-byte-exact"),
        CheckRecord(
            "faults.dir_sync", ("ATOMIC-3", "DRIFT-3"), ("durable",), "skipped", "", 0.0,
            kind="unsupported", reason="needs durable", missing_features=("durable",),
        ),
    ]  # fmt: skip
    verdict = clause_verdict("DRIFT-3", records)
    assert verdict.status == "skip"
    assert verdict.reason == "not verified: DRIFT/drift-backup-byte-exact stopped on DRIFT-2"


def test_a_clause_nothing_judged_says_its_own_reason_before_another_checks_feature() -> None:
    # DRIFT-2's examples were unverified, and one check citing it needs patch: the clause is
    # unknown because of the former, not because patch is not claimed
    records = [
        CheckRecord.from_json({
            "id": "DRIFT/drift-foreign-file-refused", "clauses": ["DRIFT-2"], "status": "skipped",
            "kind": "unverified", "reason": "the given add did not set up the foreign file",
        }),
        CheckRecord.from_json({
            "id": "PATCH/patch-on-foreign", "clauses": ["DRIFT-2", "PATCH-8"],
            "status": "skipped", "kind": "unsupported", "reason": "needs feature patch",
            "missing_features": ["patch"],
        }),
    ]  # fmt: skip
    verdict = clause_verdict("DRIFT-2", records)
    assert verdict.status == "skip" and "did not set up" in verdict.reason, verdict


def test_a_worker_failure_is_recorded_without_the_worker_header() -> None:
    # pytest-xdist opens a worker's failure with its interpreter's path: report.json carried it
    # as the first line of every failed check's message.
    longrepr = type("Longrepr", (), {"reprcrash": None})()
    report = type("Report", (), {
        "nodeid": "test_conformance.py::test_check[DRIFT/drift.x]", "failed": True,
        "skipped": False, "longrepr": longrepr, "duration": 0.1,
        "longreprtext": "[gw1] linux -- Python 3.11.7 /home/u/venv/bin/python3\nDRIFT-5: lost",
    })()  # fmt: skip
    record = CheckRecord.from_report(report, ("DRIFT-5",), ("core",), None, {})
    assert record.message == "DRIFT-5: lost"
