"""Checks of the LOCK clauses: concurrent sessions in several processes lose nothing.

``concurrent_adds_are_all_kept`` (any backend): workers released by a barrier add unique entries and
a fresh session must find every acknowledged add once, nothing else, in an order consistent with the
history (LOCK-1, LOCK-3). ``lock_spans_read_to_rename`` requires the exclusive ``flock`` on
``MEMORY.md.lock`` from before the re-read until the new file is in place (LOCK-1, LOCK-2, LOCK-3),
pinning the step at fault.
"""

from __future__ import annotations

from pathlib import Path

from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.waits import SECONDS_PER_OPERATION, SESSION_TIMEOUT
from memspec.conformance.processes.workers import (
    Job,
    OpRecord,
    run_session,
    run_together,
)
from memspec.conformance.tamper.calls import (
    CallRecord,
    describe_call,
    opens_for_writing,
    render_trace,
)
from memspec.conformance.tamper.capability import run_planned
from memspec.conformance.tamper.interpose import Plan
from memspec.conformance.tamper.stops import LOCK_CALLS
from memspec.conformance.transport.wire import Request
from memspec.conformance.verdict.findings import Violation
from memspec.spec.root_files import file_kind

LOCK_LIMIT = 1_000_000
"""The memory limit of the concurrent check: far above what its adds use, so none is refused."""
ENTRY_WIDTH = 400
"""Code points per entry: long enough that a read-modify-write takes a while, widening the
window in which an unlocked session can lose another's add."""
LISTED = 8


def _entry(process: int, index: int, width: int) -> str:
    head = f"p{process} add {index:03d} "
    return head + "x" * max(0, width - len(head))


def _load_then_add(process: int, operations: int, width: int) -> tuple[Request, ...]:
    """Returns the requests of process ``process``: a load, then ``operations`` adds of its
    entries."""
    adds: list[Request] = [
        {"op": "add", "target": "memory", "content": _entry(process, i, width)}
        for i in range(operations)
    ]
    return ({"op": "load"}, *adds)


def _label(entry: str) -> str:
    return entry.split(" x", 1)[0] if entry.startswith("p") else repr(entry[:40])


def _labels(entries: list[str]) -> str:
    shown = ", ".join(_label(entry) for entry in entries[:LISTED])
    return shown + (f" and {len(entries) - LISTED} more" if len(entries) > LISTED else "")


def _fresh_entries(ctx: CheckContext, limits: dict[str, int]) -> list[str]:
    """Returns what a fresh session finds in MEMORY.md after load."""
    reader = Job(
        ctx.backend,
        ctx.root,
        ({"op": "load"}, {"op": "entries", "target": "memory"}),
        limits,
        name="reader",
    )
    answer = run_session(reader, timeout=SESSION_TIMEOUT).expect_done().answer(1)
    assert answer is not None
    return list(answer["entries"])


@check("LOCK-1", "LOCK-3", id="locking.concurrent_adds_are_all_kept")
def concurrent_adds_are_all_kept(ctx: CheckContext) -> None:
    """``processes`` sessions in as many processes each add ``operations`` unique entries at
    once; afterwards every acknowledged add is present exactly once, nothing else is, and an add
    acknowledged before another started comes first in the file (LOCK-1, LOCK-3)."""
    confirm_plain_run(ctx, "concurrent processes")
    processes, operations = ctx.profile.processes, ctx.profile.operations
    width = min(ENTRY_WIDTH, LOCK_LIMIT // (2 * processes * operations))
    limits = {"memory": LOCK_LIMIT}
    jobs = [
        Job(
            ctx.backend,
            ctx.root,
            _load_then_add(p, operations, width),
            limits,
            name=f"p{p}",
        )
        for p in range(processes)
    ]
    timeout = SESSION_TIMEOUT + processes * operations * SECONDS_PER_OPERATION
    results = run_together(jobs, timeout=timeout)
    for result in results:
        result.expect_done()
    adds = [op for result in results for op in result.ops if op.request["op"] == "add"]
    found = _fresh_entries(ctx, limits)
    _judge_adds(adds, found, processes, operations)


def _judge_adds(adds: list[OpRecord], found: list[str], processes: int, operations: int) -> None:
    acknowledged = [op for op in adds if op.type == "ok"]
    refused = [op for op in adds if op.type == "fail"]
    scale = f"{processes} processes x {operations} adds"
    # LOCK-3: a unique add under the limit succeeds whatever other sessions do.
    if refused:
        raise Violation(
            "LOCK-3",
            f"{scale}: {len(refused)} adds were refused while other sessions wrote, "
            f"e.g. {_label(refused[0].request['content'])} answered {refused[0].answer}; "
            "the spec model accepts every one of them in any order",
        )
    sent = {op.request["content"] for op in adds}
    counts: dict[str, int] = {}
    for entry in found:
        counts[entry] = counts.get(entry, 0) + 1
    lost = [op.request["content"] for op in acknowledged if op.request["content"] not in counts]
    # LOCK-1, LOCK-3: every acknowledged add survives the others (no lost update).
    if lost:
        raise Violation(
            "LOCK-3",
            f"{scale}: {len(acknowledged)} adds were acknowledged but a fresh session finds "
            f"{len(acknowledged) - len(lost)} of them: {len(lost)} acknowledged adds were lost: "
            f"{_labels(lost)}. Each mutation must hold an exclusive flock on MEMORY.md.lock from "
            "its re-read of the file until the new file is in place (LOCK-1, LOCK-3)",
        )
    duplicated = [entry for entry, count in counts.items() if count > 1]
    # LOCK-3: an add takes effect once.
    if duplicated:
        raise Violation("LOCK-3", f"{scale}: entries appear more than once: {_labels(duplicated)}")
    unknown = [entry for entry in counts if entry not in sent]
    # LOCK-3: nothing appears that no session added.
    if unknown:
        raise Violation(
            "LOCK-3", f"{scale}: the file holds entries no session added: {_labels(unknown)}"
        )
    _judge_order(acknowledged, found, scale)


def _judge_order(acknowledged: list[OpRecord], found: list[str], scale: str) -> None:
    """An add acknowledged before another was invoked must come first (appends linearize in
    real-time order; LOCK-3). Checked in one pass: walking the file in order, no earlier entry
    may have been invoked after the current one was acknowledged."""
    by_content = {op.request["content"]: op for op in acknowledged}
    latest: OpRecord | None = None
    for entry in found:
        op = by_content.get(entry)
        if op is None or op.complete is None:
            continue
        # LOCK-3: the file order is a linearization of the history.
        if not (latest is None or latest.invoke <= op.complete):
            raise Violation(
                "LOCK-3",
                f"{scale}: {_label(entry)} was acknowledged "
                f"{latest.invoke - op.complete:.6f} s before {_label(latest.request['content'])} "
                "was even invoked, yet the file has it after that entry: the history is not "
                "linearizable",
            )
        if latest is None or op.invoke > latest.invoke:
            latest = op


# -- the traced check ------------------------------------------------------------------------


def _is_memory_lock(call: CallRecord) -> bool:
    """Whether ``call`` takes a lock LOCK-1 accepts for MEMORY.md: a ``flock`` on
    MEMORY.md.lock, or — for a backend without flock (LOCK-1 allows another inter-process lock
    the kernel releases when its holder dies) — a Unix socket bound in the abstract namespace
    under a name that holds MEMORY.md (seen through strace, as ``bind``)."""
    if call.name == "flock":
        return file_kind(Path(call.path).name, "MEMORY.md") == "lock"
    return call.name == "bind" and call.path.startswith("@") and "MEMORY.md" in call.path


def _step(calls: list[CallRecord], call: CallRecord) -> int:
    return calls.index(call) + 1


def trace_of_add(ctx: CheckContext, index: int = 2) -> list[CallRecord]:
    """Runs load, add, add in a worker under a tracing plan; returns the calls of the add at
    ``index`` (the second, on an existing file, by default)."""
    job = Job(
        ctx.backend,
        ctx.root,
        (
            {"op": "load"},
            {"op": "add", "target": "memory", "content": "User prefers tabs"},
            {"op": "add", "target": "memory", "content": "Project uses Go"},
        ),
        plan=Plan(trace=True),
        name="traced",
    )
    return run_planned(ctx.tampering, job, 60, ctx.scratch).expect_done().calls_during(index)


@check("LOCK-1", "LOCK-2", "LOCK-3", id="locking.lock_spans_read_to_rename")
def lock_spans_read_to_rename(ctx: CheckContext) -> None:
    """One add, traced: an exclusive flock on MEMORY.md.lock (or another lock the kernel
    releases, :func:`_is_memory_lock`) is taken before MEMORY.md is read and released only
    after the new file is in place (LOCK-1, LOCK-2, LOCK-3)."""
    calls = trace_of_add(ctx)
    trace = f"trace of the add: {render_trace(calls)}"
    locks = [c for c in calls if c.name in LOCK_CALLS and not c.error]
    exclusive = [c for c in locks if "LOCK_EX" in (c.details.operation or "")]
    on_data = [c for c in exclusive if c.kind == "data"]
    # LOCK-1: never lock the data file itself.
    if on_data:
        raise Violation(
            "LOCK-1",
            f"the add took {on_data[0].name} LOCK_EX on MEMORY.md itself at step "
            f"{_step(calls, on_data[0])}: "
            "the rename gives MEMORY.md a new inode, so sessions that open it afterwards lock "
            f"another file; lock MEMORY.md.lock instead ({trace})",
        )
    flocks = [c for c in exclusive if _is_memory_lock(c)]
    # LOCK-1: an exclusive flock on MEMORY.md.lock.
    if not flocks:
        raise Violation(
            "LOCK-1",
            "the add took no exclusive flock on MEMORY.md.lock"
            + (
                f" (it used {describe_call(exclusive[0])}; lockf/fcntl locks do not exclude two "
                "sessions of one process)"
                if exclusive
                else ""
            )
            + f" ({trace})",
        )
    taken = flocks[0]
    start = _step(calls, taken)
    fd = taken.details.fd
    released = next(
        (
            c
            for c in calls[start:]
            if c.path == taken.path
            and (
                (c.name == "flock" and "LOCK_UN" in (c.details.operation or ""))
                or (c.name == "close" and c.details.fd == fd)
            )
        ),
        None,
    )
    end = _step(calls, released) if released is not None else len(calls) + 1
    reads = [
        c
        for c in calls
        if c.path.endswith("/MEMORY.md")
        and (c.name == "read" or (c.name == "open" and not opens_for_writing(c)))
    ]
    # LOCK-2: the file is re-read while the lock is held.
    if not any(start < _step(calls, c) < end for c in reads):
        raise Violation(
            "LOCK-2",
            f"the add did not read MEMORY.md while holding the lock (steps {start}-{end}); "
            + (
                f"it read it at step {_step(calls, reads[0])}, before taking the lock; "
                if reads
                else ""
            )
            + f"re-read the file under the lock and decide on what it says ({trace})",
        )
    puts = [
        c
        for c in calls
        if c.path.endswith("/MEMORY.md")
        and (c.name in ("replace", "rename") or c.name in ("write", "pwrite", "flush"))
    ]
    # LOCK-3: the lock is held until the new file is in place.
    if not (not puts or _step(calls, puts[-1]) < end):
        raise Violation(
            "LOCK-3",
            f"the lock was released at step {end}, before the new file was put in place "
            f"at step {_step(calls, puts[-1])} ({trace})",
        )
