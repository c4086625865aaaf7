"""The checks that need the process machinery can fail: locking, crash, durability and faults.

Each check of locking, crash, durability and faults runs directly (``check.run(CheckContext
(...))``, no pytest plugin) at the ``ci`` profile: the reference store passes it, and each store
of ``tests/backends/procs.py`` — one defect each — fails it with an ``AssertionError`` that opens
with the clause id the defect breaks. Racy defects get a few attempts (their catch rates over 20
runs are measured separately and stated in the closing note); deterministic ones get one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.checks import crash
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import ClauseFailures, verdict_of
from tests.budgeted import run_in_budget

REFERENCE = "memspec.reference_impl:open_store"
PROCS = "tests.backends.procs"
MODULES = ("locking", "crash", "durability", "faults")
OURS = sorted(name for name in CHECKS if name.split(".")[0] in MODULES)
RACY_ATTEMPTS = 3

CAUGHT = [
    # (factory in tests/backends/procs.py, check, clause the message opens with, racy)
    ("open_no_lock", "locking.concurrent_adds_are_all_kept", "LOCK-3", True),
    ("open_data_file_lock", "locking.concurrent_adds_are_all_kept", "LOCK-3", True),
    ("open_read_before_lock", "locking.concurrent_adds_are_all_kept", "LOCK-3", True),
    ("open_no_lock", "locking.lock_spans_read_to_rename", "LOCK-1", False),
    ("open_data_file_lock", "locking.lock_spans_read_to_rename", "LOCK-1", False),
    ("open_read_before_lock", "locking.lock_spans_read_to_rename", "LOCK-2", False),
    ("open_in_place", "crash.kill_at_random_moments", "CRASH-1", True),
    ("open_keeps_temps", "crash.kill_at_random_moments", "CRASH-2", True),
    ("open_marker_lock", "crash.kill_at_random_moments", "CRASH-3", True),
    ("open_in_place", "crash.kill_at_each_write_step", "CRASH-1", False),
    ("open_keeps_temps", "crash.kill_at_each_write_step", "CRASH-2", False),
    ("open_marker_lock", "crash.kill_at_each_write_step", "CRASH-3", False),
    ("open_no_temp_fsync", "durability.write_protocol_is_durable", "ATOMIC-1", False),
    ("open_unflushed_fsync", "durability.write_protocol_is_durable", "ATOMIC-1", False),
    ("open_no_dir_fsync", "durability.write_protocol_is_durable", "ATOMIC-3", False),
    ("open_fixed_temp", "durability.write_protocol_is_durable", "ATOMIC-1", False),
    ("open_in_place", "durability.write_protocol_is_durable", "ATOMIC-1", False),
    ("open_eio_as_empty", "faults.read_errors_are_not_empty", "READ-7", False),
    ("open_ok_on_write_error", "faults.failed_write_keeps_old_file", "ATOMIC-4", False),
    ("open_keeps_failed_temp", "faults.failed_write_keeps_old_file", "ATOMIC-4", False),
    ("open_in_place", "faults.failed_write_keeps_old_file", "ATOMIC-4", False),
    ("open_dir_sync_error_is_io", "faults.failed_dir_sync_is_acknowledged", "ATOMIC-3", False),
    ("open_backup_sync_error_is_io", "faults.failed_dir_sync_is_acknowledged", "ATOMIC-3", False),
]


@pytest.fixture(autouse=True)
def quick_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stuck probe is reported after 1 s instead of 5 (only the marker-lock store sticks)."""
    monkeypatch.setattr(crash, "PROBE_TIMEOUT", 1.0)


def _context(tmp_path: Path, backend: object, attempt: int = 0) -> CheckContext:
    root, scratch = tmp_path / f"root{attempt}", tmp_path / f"scratch{attempt}"
    root.mkdir()
    scratch.mkdir()
    return CheckContext(backend, root, scratch, PROFILES["ci"])


def test_the_checks_exist() -> None:
    """Every module of this family registers its checks."""
    assert {name.split(".")[0] for name in OURS} == set(MODULES)
    assert {name for _, name, _, _ in CAUGHT} == set(OURS)


@pytest.mark.parametrize("name", OURS)
def test_reference_passes(name: str, tmp_path: Path) -> None:
    """The reference store passes every check of the family, within the check's budget (how
    fast is the benchmarks' business, not a test's: a loaded machine must not fail it)."""
    run_in_budget(CHECKS[name], _context(tmp_path, InProcessBackend(REFERENCE, timeout=10)))


@pytest.mark.parametrize("name", ["locking.concurrent_adds_are_all_kept"])
def test_reference_passes_through_serve(name: str, tmp_path: Path) -> None:
    """The concurrent check passes the reference served over JSON Lines (one process each)."""
    backend = CommandBackend(f"memspec serve --backend {REFERENCE}")
    run_in_budget(CHECKS[name], _context(tmp_path, backend))


@pytest.mark.parametrize(
    ("factory", "name", "clause", "racy"),
    CAUGHT,
    ids=[f"{factory}-{name}" for factory, name, _, _ in CAUGHT],
)
def test_broken_store_is_caught(
    factory: str, name: str, clause: str, racy: bool, tmp_path: Path
) -> None:
    """The store with one defect fails the check, citing the clause it breaks."""
    backend = InProcessBackend(f"{PROCS}:{factory}")
    messages = []
    for attempt in range(RACY_ATTEMPTS if racy else 1):
        try:
            run_in_budget(CHECKS[name], _context(tmp_path, backend, attempt))
        except AssertionError as failure:
            assert str(failure).startswith(clause), str(failure)
            return
        messages.append(f"attempt {attempt}: passed")
    pytest.fail(f"{factory} passed {name}: {messages}")


def test_a_store_that_raises_on_a_failed_write_is_still_judged_on_its_file(
    tmp_path: Path,
) -> None:
    """A store that raises out of the add when the write fails (hermes-agent on ENOSPC) is a
    defect and fails ATOMIC-4, which asks for E_IO, and the check goes on to judge what ATOMIC-4
    protects: the old file kept, no temp left, the next session finds every entry."""
    backend = InProcessBackend(f"{PROCS}:open_raises_on_write_error")
    with pytest.raises(ClauseFailures) as failure:
        run_in_budget(CHECKS["faults.failed_write_keeps_old_file"], _context(tmp_path, backend))
    clauses = {f.clause for f in failure.value.failures}
    assert clauses == {"CONTRACT-6", "ATOMIC-4"}, failure.value
    assert failure.value.completed, failure.value
    atomic = [f.reason for f in failure.value.failures if f.clause == "ATOMIC-4"]
    assert all("raised or died" in reason for reason in atomic), atomic


def test_a_torn_file_that_is_not_utf8_is_not_a_lock(tmp_path: Path) -> None:
    """A store writing in place that a kill leaves with half a character refuses the next add
    with E_UNREADABLE, as READ-6 asks of an undecodable file: that torn file is CRASH-1's, not a
    lock left behind (CRASH-3 was failed this way)."""
    backend = InProcessBackend("tests.backends.naive_broken:SlowInPlaceWriter")
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS["crash.kill_at_each_write_step"], _context(tmp_path, backend))
    assert {f.clause for f in verdict_of(failure.value).failures} == {"CRASH-1"}, failure.value


def test_a_last_session_stuck_on_a_crash_is_not_also_a_hang(tmp_path: Path) -> None:
    """The last clean session of the crash check, stuck on the marker a kill left and killed by
    the harness for it, is CRASH-3's; the kill is not a backend that hung besides (CONTRACT-6)."""
    backend = InProcessBackend(f"{PROCS}:open_marker_lock")
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS["crash.kill_at_each_write_step"], _context(tmp_path, backend))
    clauses = {f.clause for f in verdict_of(failure.value).failures}
    assert "CRASH-3" in clauses and "CONTRACT-6" not in clauses, failure.value
