"""The process machinery (workers, interposition) and the checks that need it can fail.

Each check of locking, crash, durability and faults runs directly (``check.run(CheckContext
(...))``, no pytest plugin) at the ``ci`` profile: the reference store passes it, and each store
of ``tests/backends/procs.py`` — one defect each — fails it with an ``AssertionError`` that opens
with the clause id the defect breaks. Racy defects get a few attempts (their catch rates over 20
runs are measured separately and stated in the closing note); deterministic ones get one.
"""

from __future__ import annotations

import errno
import os
import pickle
import time
from pathlib import Path

import pytest

from memspec.conformance.backend import InProcessBackend
from memspec.conformance.checks import crash
from memspec.conformance.checks.locking import _judge_adds
from memspec.conformance.jsonlines import CommandBackend
from memspec.conformance.processes.interpose import Fault, Match, Plan
from memspec.conformance.processes.workers import (
    Job,
    OpRecord,
    Worker,
    history,
    run_session,
    run_together,
)
from memspec.conformance.profiles import PROFILES
from memspec.conformance.registry import CHECKS, CheckContext, NotApplicable

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
    """The reference store passes every check of the family, in well under 10 s."""
    started = time.monotonic()
    CHECKS[name].run(_context(tmp_path, InProcessBackend(REFERENCE, timeout=10)))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("name", ["locking.concurrent_adds_are_all_kept"])
def test_reference_passes_through_serve(name: str, tmp_path: Path) -> None:
    """The concurrent check passes the reference served over JSON Lines (one process each)."""
    backend = CommandBackend(f"memspec serve --backend {REFERENCE}")
    CHECKS[name].run(_context(tmp_path, backend))


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
            CHECKS[name].run(_context(tmp_path, backend, attempt))
        except AssertionError as failure:
            assert str(failure).startswith(clause), str(failure)
            return
        messages.append(f"attempt {attempt}: passed")
    pytest.fail(f"{factory} passed {name}: {messages}")


# -- the machinery ----------------------------------------------------------------------------


def _adds(*contents: str) -> tuple[dict[str, object], ...]:
    return ({"op": "load"}, *({"op": "add", "target": "memory", "content": c} for c in contents))


def test_backends_pickle_by_name() -> None:
    """An in-process backend travels to a worker by its MODULE:FACTORY name."""
    backend = pickle.loads(pickle.dumps(InProcessBackend(REFERENCE, timeout=3.0)))
    assert backend.spec == REFERENCE and backend.timeout == 3.0 and callable(backend.factory)
    command = pickle.loads(pickle.dumps(CommandBackend("memspec serve --backend x:y", 4.0)))
    assert command.command == "memspec serve --backend x:y"


def test_worker_records_every_operation(tmp_path: Path) -> None:
    """Each operation gets invoke and ok/fail records with monotonic times, in order."""
    ops = (*_adds("User prefers tabs"), {"op": "add", "target": "notes", "content": "x"})
    result = run_session(Job(InProcessBackend(REFERENCE), tmp_path, ops))
    assert result.status == "done"
    assert [op.type for op in result.ops] == ["ok", "ok", "fail"]
    assert result.ops[2].answer["code"] == "E_TARGET"
    assert all(op.invoke <= op.complete for op in result.ops)
    events = history([result])
    assert [event["type"] for event in events] == ["invoke", "ok", "invoke", "fail"]
    assert events[1]["value"]["code"] == "OK" and events[1]["process"] == 0
    assert len(history([result], ops=None)) == 6


def test_killed_worker_leaves_its_operation_info(tmp_path: Path) -> None:
    """A worker killed by the harness ends ``killed``; the operation in flight is ``info``."""
    ops = _adds(*(f"entry {n}" for n in range(500)))
    with Worker(Job(InProcessBackend(REFERENCE), tmp_path, ops)) as worker:
        assert worker.wait_until(lambda w: w.invoked(5), 10)
        worker.kill()
        result = worker.finish(5)
    assert result.status == "killed"
    assert result.ops[-1].type == "info" and result.in_flight is result.ops[-1]
    assert all(op.type == "ok" for op in result.ops[:-1])
    assert result.exitcode == -9


def test_hung_backend_times_out(tmp_path: Path) -> None:
    """A mutation that never returns is killed at the deadline and recorded as ``info``."""
    started = time.monotonic()
    result = run_session(Job(InProcessBackend(f"{PROCS}:open_hangs"), tmp_path, _adds("x")), 1.0)
    assert time.monotonic() - started < 8
    assert result.status == "timeout"
    assert result.ops[1].type == "info" and "1 s" in result.ops[1].message


def test_workers_start_together(tmp_path: Path) -> None:
    """run_together releases the sessions at a barrier: every one opens before any adds."""
    jobs = [
        Job(InProcessBackend(REFERENCE), tmp_path, _adds(f"p{n}"), name=f"p{n}") for n in range(3)
    ]
    results = run_together(jobs, timeout=30)
    assert [result.status for result in results] == ["done"] * 3
    first_add = min(result.ops[1].invoke for result in results)
    assert all(result.ops[0].invoke <= first_add + 1 for result in results)


def test_plan_traces_resolves_and_injects(tmp_path: Path) -> None:
    """A plan traces the calls of the root (descriptors resolved to paths) and raises an
    injected error at the chosen call, once."""
    fault = Fault(Match.of("write", kinds=("temp",), op=2), errno=errno.ENOSPC)
    ops = _adds("User prefers tabs", "Project uses Go", "Editor: vim")
    result = run_session(Job(InProcessBackend(REFERENCE), tmp_path, ops, plan=Plan((fault,))))
    codes = [op.answer["code"] for op in result.ops]
    assert codes == ["OK", "OK", "E_IO", "OK"]
    names = {(call["name"], call["kind"]) for call in result.calls}
    assert {("flock", "lock"), ("write", "temp"), ("replace", "data"), ("fsync", "dir")} <= names
    effects = [call for call in result.calls if call["effect"]]
    assert len(effects) == 1 and effects[0]["effect"] == "ENOSPC" and effects[0]["op"] == 2
    assert os.path.basename(effects[0]["path"]).startswith(".MEMORY.md.tmp.")


def test_plan_kills_after_a_call(tmp_path: Path) -> None:
    """kill-after ends the worker right after the call: the rename happened, the answer
    never came, and the worker says where it died."""
    fault = Fault(Match.of("replace", op=1), action="kill-after")
    job = Job(
        InProcessBackend(REFERENCE), tmp_path, _adds("User prefers tabs"), plan=Plan((fault,))
    )
    result = run_session(job)
    assert result.status == "died" and result.exitcode == -9
    assert result.ops[1].type == "info" and "killed after replace" in result.ops[1].message
    assert (tmp_path / "MEMORY.md").read_bytes() == b"User prefers tabs"


def test_file_objects_are_reported(tmp_path: Path) -> None:
    """Writes through open() are reported with the file object's buffering, flush and close."""
    job = Job(InProcessBackend(f"{PROCS}:open_unflushed_fsync"), tmp_path, _adds("a"), plan=Plan())
    calls = run_session(job).expect_done().calls_during(1)
    temp = [call for call in calls if call["kind"] == "temp"]
    assert [call["name"] for call in temp] == ["open", "write", "fsync", "close"]
    assert temp[1]["details"]["via"] == "file" and temp[1]["details"]["buffered"]


def test_interposition_needs_a_python_backend(tmp_path: Path) -> None:
    """A plan with a command backend is a harness error, not a backend failure."""
    backend = CommandBackend(f"memspec serve --backend {REFERENCE}")
    result = run_session(Job(backend, tmp_path, _adds("x"), plan=Plan()))
    assert result.status == "error" and "Python backend" in result.message
    with pytest.raises(RuntimeError, match="BUG IN HARNESS"):
        result.expect_done()
    interposed = [name for name in OURS if CHECKS[name].python_only]
    for name in interposed:
        with pytest.raises(NotApplicable, match="needs a Python backend"):
            CHECKS[name].run(_context(tmp_path, backend, attempt=interposed.index(name)))


def test_bad_plans_are_refused() -> None:
    """Plans are validated when made."""
    with pytest.raises(ValueError, match="unknown call names"):
        Match.of("wirte")
    with pytest.raises(ValueError, match="action"):
        Fault(Match(), action="explode")


def test_order_must_follow_the_history() -> None:
    """An add acknowledged before another was invoked must come first in the file (LOCK-3)."""

    def add(process: str, content: str, invoke: float, complete: float) -> OpRecord:
        request = {"op": "add", "target": "memory", "content": content}
        return OpRecord(process, 1, request, "ok", invoke, complete, {"ok": True, "code": "OK"})

    early, late = add("p0", "p0 add 000", 1.0, 2.0), add("p1", "p1 add 000", 3.0, 4.0)
    _judge_adds([early, late], ["p0 add 000", "p1 add 000"], 2, 1)
    with pytest.raises(AssertionError, match=r"LOCK-3: .* not linearizable"):
        _judge_adds([early, late], ["p1 add 000", "p0 add 000"], 2, 1)
    overlapping = add("p1", "p1 add 000", 1.5, 4.0)
    _judge_adds([early, overlapping], ["p1 add 000", "p0 add 000"], 2, 1)
    with pytest.raises(AssertionError, match=r"LOCK-3: .* more than once"):
        _judge_adds([early, late], ["p0 add 000", "p1 add 000", "p1 add 000"], 2, 1)
    with pytest.raises(AssertionError, match=r"LOCK-3: .* no session added"):
        _judge_adds([early, late], ["p0 add 000", "p1 add 000", "stray"], 2, 1)
