"""Verdicts as data: how a check that did not pass ended, taken from the exception it raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis.errors import FlakyFailure

from memspec.conformance.backend import BackendDefect
from memspec.conformance.findings import (
    Mismatch,
    Verdict,
    Violation,
    leading_clause,
    verdict_of,
)
from memspec.conformance.registry import HarnessError, NotApplicable

pytest_plugins = ["pytester"]
PROJECT = str(Path(__file__).resolve().parents[2])


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (AssertionError("LOCK-3: an acknowledged write was lost\nmore"),
         Verdict("violation", "LOCK-3", "LOCK-3: an acknowledged write was lost")),
        (AssertionError("no clause named here"), Verdict("violation", "", "no clause named here")),
        (AssertionError("LOCK-3 is not followed by a colon"),
         Verdict("violation", "", "LOCK-3 is not followed by a colon")),
        (Violation("DRIFT-3", "no backup"), Verdict("violation", "DRIFT-3", "DRIFT-3: no backup")),
        (Mismatch("example x (READ-1)\n  step: load", "example x: load → differs"),
         Verdict("violation", "", "example x: load → differs")),
        (BackendDefect("add raised RuntimeError: boom"),
         Verdict("defect", "CONTRACT-6", "backend defect: add raised RuntimeError: boom")),
        (HarnessError("BUG IN CHECK: no answer"),
         Verdict("harness-error", "", "BUG IN CHECK: no answer")),
        (TypeError("'NoneType' object is not subscriptable"),
         Verdict("harness-error", "", "TypeError: 'NoneType' object is not subscriptable")),
        (NotApplicable("needs a Python backend"),
         Verdict("unsupported", "", "needs a Python backend")),
    ],
)  # fmt: skip
def test_the_verdict_follows_the_exception(error: BaseException, verdict: Verdict) -> None:
    assert verdict_of(error) == verdict


def test_a_group_of_failures_is_judged_by_its_first_finding() -> None:
    group = FlakyFailure("two bugs", [ValueError("x"), AssertionError("SNAP-6: 28%")])
    assert verdict_of(group) == Verdict("violation", "SNAP-6", "SNAP-6: 28%")


def test_verdicts_round_trip_as_properties() -> None:
    verdict = Verdict("unsupported", "", "needs feature batch", ("batch",))
    _, value = verdict.to_property()
    assert Verdict.from_property(value) == verdict and json.loads(value)["kind"] == "unsupported"
    assert Verdict.from_property(None) is None
    assert leading_clause("CONTRACT-10: x") == "CONTRACT-10" and leading_clause("E: x") == ""


BOOM = """
from dataclasses import replace
from memspec.conformance import registry

registry.all_checks()
CHECK = "files.rewrite_keeps_the_mode"

def boom(ctx):
    raise TypeError("a bug in the check, not in the backend")

registry.CHECKS[CHECK] = replace(registry.CHECKS[CHECK], function=boom)
"""


def test_a_bug_in_a_check_is_a_harness_error_never_a_backend_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", PROJECT)
    pytester.makeconftest(BOOM)
    report = pytester.path / "report"
    pytester.runpytest_subprocess(
        "--pyargs", "memspec.conformance.suite", "-p", "no:cacheprovider",
        "--memspec-backend", "tests.backends.wrappers:core_only",
        "-k", "rewrite_keeps_the_mode or batch-applies-items", f"--memspec-report={report}",
        timeout=300,
    )  # fmt: skip
    payload = json.loads((report / "report.json").read_text(encoding="utf-8"))
    by_id = {check["id"]: check for check in payload["checks"]}
    boom = by_id["FILES/files.rewrite_keeps_the_mode"]
    assert boom["status"] == "failed" and boom["kind"] == "harness-error"
    assert boom["reason"] == "TypeError: a bug in the check, not in the backend"
    assert payload["summary"]["errors"] == 1 and payload["summary"]["failed"] == 0
    assert {row["clause"]: row["status"] for row in payload["clauses"]}["FILES-2"] != "fail"
    # A check that needs a feature the backend does not claim carries the feature as data.
    skipped = [check for check in payload["checks"] if check["status"] == "skipped"]
    assert skipped and all(check["missing_features"] == ["batch"] for check in skipped)


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
            raise AssertionError(f"CONTRACT-2: add did not answer: {caught}") from caught
    except AssertionError as error:
        verdict = verdict_of(error)
    assert verdict.blamed == "CONTRACT-2"
    assert verdict.reason.endswith("(AttributeError: 'int' object has no attribute 'strip')")


def test_the_report_and_the_matrix_read_a_clause_the_same_way() -> None:
    """One verdict per clause: a pass of one check does not hide a skip for a missing feature,
    in the report's clause table as in the matrix (CONTRACT-20)."""
    from dataclasses import asdict

    from memspec.conformance.records import CheckRecord, clause_matrix
    from memspec.conformance.verdicts import clause_verdict
    from memspec.spec.clauses import parse_clauses
    from memspec.spec.examples import spec_text

    records = [
        CheckRecord("drift.a", ("DRIFT-3",), ("core",), "passed", "", 0.1),
        CheckRecord(
            "drift.b", ("DRIFT-3", "DRIFT-4"), ("drift-guard",), "skipped", "", 0.0,
            kind="unsupported", reason="needs drift-guard", missing_features=("drift-guard",),
        ),
        CheckRecord("read.c", ("READ-1",), ("core",), "xfailed", "READ-1: glued", 0.1,
                    kind="violation", blamed="READ-1", reason="READ-1: glued"),
    ]  # fmt: skip
    rows = {row["clause"]: row for row in clause_matrix(parse_clauses(spec_text()), records)}
    checks = [asdict(record) for record in records]
    assert rows["DRIFT-3"]["status"] == clause_verdict("DRIFT-3", checks).status == "skip"
    assert rows["DRIFT-3"]["why"] == ["needs feature drift-guard, not claimed"]
    assert rows["READ-1"]["status"] == "expected fail"
    assert clause_verdict("READ-1", checks).status == "fail"
    assert rows["FENCE-6"]["status"] == "n/a" and rows["FORMAT-1"]["status"] == "unchecked"
