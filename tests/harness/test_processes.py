"""The process machinery of the checks: worker processes, file-system interposition and fault
plans (``conformance/processes/``), and the judge of concurrent adds.

Each session runs in a worker process that records every operation with monotonic times; a
plan traces the store's calls on its root, injects an error or kills the worker at a chosen
call. The checks built on it are proven to fail in ``tests/power/test_process_checks.py``.
"""

from __future__ import annotations

import errno
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.checks.locking import _judge_adds
from memspec.conformance.processes.workers import (
    Job,
    OpRecord,
    Worker,
    history,
    run_session,
    run_together,
    start_process_server,
)
from memspec.conformance.tamper.interpose import Fault, Match, Plan
from memspec.conformance.transport.backend import BackendDefect, InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import HarnessError
from memspec.reference_impl import open_store

REFERENCE = "memspec.reference_impl:open_store"
PROCS = "tests.backends.procs"
HANGS = "tests.backends.wrappers:hangs_on_add"


def _adds(*contents: str) -> tuple[dict[str, object], ...]:
    return ({"op": "load"}, *({"op": "add", "target": "memory", "content": c} for c in contents))


def test_backends_pickle_by_name() -> None:
    """An in-process backend travels to a worker by its MODULE:FACTORY name."""
    backend = pickle.loads(pickle.dumps(InProcessBackend(REFERENCE, timeout=3.0)))
    assert backend.spec == REFERENCE and backend.timeout == 3.0 and callable(backend.factory)
    command = pickle.loads(pickle.dumps(CommandBackend("memspec serve --backend x:y", 4.0)))
    assert command.command == "memspec serve --backend x:y"


def test_a_worker_takes_an_unknown_version_with_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend with no version travels with ``""`` as its version, and the worker's sessions do
    not look it up again: that lookup imports ``importlib.metadata`` and scans every installed
    package, once in every worker (about 60 ms each, most of a scheduled run's start)."""
    unversioned = "tests.backends.procs:open_no_lock"
    backend = pickle.loads(pickle.dumps(InProcessBackend(unversioned)))
    looked_up: list[str] = []
    monkeypatch.setattr(
        "memspec.conformance.transport.backend._module_version",
        lambda spec: looked_up.append(spec) or "",
    )
    with backend.open(tmp_path) as session:
        assert session.version == ""
    assert looked_up == []


def open_after_a_temporary_file(root: Path, **limits: int) -> Any:
    """The reference store, opened after leaving a file in the temporary directory."""
    (Path(tempfile.gettempdir()) / "left-by-the-session").touch()
    return open_store(root, **limits)


def test_a_worker_keeps_temporary_files_in_the_temporary_directory_of_its_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker comes from the fork server, which keeps the environment it started in (it
    outlives runs); the session still writes its temporary files to the directory of the run
    that started it, which the run removes (a killed Hermes session's home was left in the
    system's temporary directory)."""
    start_process_server()
    temp, root = tmp_path / "temp", tmp_path / "root"
    temp.mkdir()
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    backend = InProcessBackend(f"{__name__}:open_after_a_temporary_file")
    result = run_session(Job(backend, root, ({"op": "load"},)))
    assert result.status == "done", result.message
    assert [path.name for path in temp.iterdir()] == ["left-by-the-session"]


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


def test_a_worker_keeps_the_clause_of_a_defect(tmp_path: Path) -> None:
    """An answer of the wrong shape read in a worker is CONTRACT-2's there too, not the
    CONTRACT-6 of a backend that raised or hung (a zoo member whose entries are a tuple failed
    CONTRACT-6 in the fault checks)."""
    ops = (*_adds("User prefers tabs"), {"op": "entries", "target": "memory"})
    result = run_session(
        Job(InProcessBackend("tests.backends.naive_broken:TupleEntries"), tmp_path, ops)
    )
    with pytest.raises(BackendDefect) as defect:
        result.expect_done()
    assert defect.value.clause == "CONTRACT-2", defect.value


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
    result = run_session(Job(InProcessBackend(HANGS), tmp_path, _adds("x")), 3.0)
    assert time.monotonic() - started < 15
    assert result.status == "timeout"
    # the add hangs (at a load average of 9 the load before it can take a second: the deadline
    # leaves it room, and the op recorded as info is the one in flight, whichever it is)
    hung = result.ops[-1]
    assert hung.type == "info" and "3 s" in hung.message, result.ops
    assert all(op.type == "ok" for op in result.ops[:-1])


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
    names = {(call.name, call.kind) for call in result.calls}
    assert {("flock", "lock"), ("write", "temp"), ("replace", "data"), ("fsync", "dir")} <= names
    effects = [call for call in result.calls if call.effect]
    assert len(effects) == 1 and effects[0].effect == "ENOSPC" and effects[0].op == 2
    assert os.path.basename(effects[0].path).startswith(".MEMORY.md.tmp.")


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
    temp = [call for call in calls if call.kind == "temp"]
    assert [call.name for call in temp] == ["open", "write", "fsync", "close"]
    assert temp[1].details.via == "file" and temp[1].details.buffered


def test_interposition_needs_a_python_backend(tmp_path: Path) -> None:
    """A plan with a command backend is a harness error, not a backend failure."""
    backend = CommandBackend(f"memspec serve --backend {REFERENCE}")
    result = run_session(Job(backend, tmp_path, _adds("x"), plan=Plan()))
    assert result.status == "error" and "Python backend" in result.message
    with pytest.raises(HarnessError, match="BUG IN MEMSPEC"):
        result.expect_done()


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
