"""A bug in memspec is never a failure of the backend: wherever it is raised — in a check, in a
strategy, in a worker process — certification reports it as a harness error, counts it apart,
blames no clause, and exits with status 3 (pytest's internal error) instead of 1.

Each test breaks one part of memspec on purpose, certifies the reference (which fails nothing
on its own) with only the check that reaches the broken part, and reads the verdict.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import strategies as st

import memspec
from memspec.conformance.checks import faults, read
from memspec.fuzz import properties

REFERENCE = "memspec.reference_impl:open_store"


def _certify_one(check_id: str) -> memspec.CertifyResult:
    result = memspec.certify(REFERENCE, profile="smoke", select=check_id.split("/")[-1])
    assert [record.id for record in result.records] == [check_id], result.output
    return result


def _judged_as_a_harness_error(result: memspec.CertifyResult, text: str) -> None:
    (record,) = result.records
    assert (record.status, record.kind, record.blamed) == ("failed", "harness-error", ""), record
    assert text in record.message, record.message
    assert result.counts["failed"] == 0 and result.counts["errors"] == 1, result.counts
    assert result.status == 3, result.summary


def test_a_bug_in_a_check_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check's own code breaks: startswith() of something that is not a prefix.
    monkeypatch.setattr(read, "UNREADABLE_PREFIX", None)
    _judged_as_a_harness_error(_certify_one("READ/read.unreadable_file_is_not_empty"), "TypeError")


def test_a_bug_in_a_strategy_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_requests(**_: Any) -> st.SearchStrategy[dict[str, Any]]:
        return st.integers().map(lambda n: {"op": "add"}["target" if n >= 0 else "op"])

    monkeypatch.setattr(properties, "requests", broken_requests)
    _judged_as_a_harness_error(_certify_one("LIMIT/properties.limits_hold"), "KeyError")


def test_a_bug_in_a_worker_is_a_harness_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A harness step the worker process does not know how to carry out: the worker's own code
    # fails there, in its process, and its record says so.
    monkeypatch.setattr(faults, "_add", lambda content, target="memory": {"op": "put"})
    _judged_as_a_harness_error(
        _certify_one("ATOMIC/faults.failed_write_keeps_old_file"), "BUG IN MEMSPEC: worker"
    )


def test_the_same_check_failing_on_the_backend_is_a_violation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The check expects an answer the reference does not give: a violation of READ-7, exit 1.
    monkeypatch.setattr(read, "codes", SimpleNamespace(E_UNREADABLE="E_NOT_A_CODE"))
    result = _certify_one("READ/read.unreadable_file_is_not_empty")
    record = result.records[0]
    assert (record.kind, record.blamed) == ("violation", "READ-7"), record.message
    assert result.counts["errors"] == 0 and result.status == 1
