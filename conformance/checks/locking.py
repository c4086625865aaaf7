"""Checks of the LOCK clauses: concurrent sessions in several processes lose nothing.

``concurrent_adds_are_all_kept`` is the black-box check (any backend): several worker processes
released together by a barrier each add unique entries to one root, and a fresh session must
find every acknowledged add exactly once, nothing unacknowledged, in an order consistent with
the history (LOCK-1, LOCK-3; the MCP memory server kept 10 of 20 acknowledged writes).

``lock_spans_read_to_rename`` looks inside one add (interposed calls of a Python backend, strace
for a command backend) and requires the exclusive ``flock`` to be on ``MEMORY.md.lock``, taken
before the re-read and held until the new file is in place (LOCK-1, LOCK-2, LOCK-3): it pins
the protocol step at fault, where the concurrent check only sees the lost entries.

``concurrency.history_is_linearizable`` runs generated programs of concurrent sessions while a
reader process samples the files, and judges the history (below).
``interleavings.preemption_bounded_schedules`` runs, for a Python backend, every schedule of two
adding sessions up to a bound of preemptions under the deterministic scheduler (below). Their ids
keep the names of the modules they were first written in.

Concurrent sessions and a file-sampling reader, judged by the checkers (LOCK-3, ATOMIC-2).

``processes`` sessions — worker processes for a Python backend, one backend process each for a
command — open one root, start together at a barrier and run generated programs
(:mod:`memspec.conformance.history.programs`: adds of unique entries, replaces, removes, batches
when the backend claims them, loads) on both targets, while a reader process
(:mod:`memspec.conformance.processes.reader`) samples ``MEMORY.md`` and ``USER.md`` continuously.
``memory`` has room for everything; ``user`` fills half way through, so refusals for the limit
happen too.

The operations and the samples form one Jepsen-style history, which
:func:`~memspec.conformance.history.checkers.judge_history` judges cheapest first: acknowledged
writes survive and nothing unwritten appears, every sample is a state the store could have been in,
no limit is exceeded, and the whole history is linearizable against the spec model. A failure names
the checker and the clause, shows what was observed against what the model allows, with a timeline
of the sessions, and saves the history as JSON Lines among the check's artifacts (the report
directory's ``artifacts`` with ``--report``, else its scratch directory), named in the message.

The programs come from the seed (``--seed``; under the deterministic ``ci`` profile a fixed one,
so the same programs run every time; under ``thorough`` a drawn one, named in a failure); the
interleaving is the operating system's. The check reports its figures (samples, seconds of the
run and of each checker) with its result.
A search that runs out of time is reported as undecided (skipped), never as a pass.

``preemption_bounded_schedules`` explores, systematically, every schedule of two sessions adding
to a store that already holds an entry, with at most one switch between sessions at a moment the
running one could have gone on (two under the ``thorough`` profile). The lost update of a store
that reads before it locks, locks a file that a rename replaces, or writes a list it loaded
earlier, needs exactly one such switch. A failure saves a repro file and names the command that
replays it, ``memspec repro FILE``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from memspec.conformance.core.registry import CheckContext, NotApplicable, check
from memspec.conformance.history.checkers import Finding, judge_history
from memspec.conformance.history.history import Event, write_history
from memspec.conformance.history.programs import generate_program, limits_for
from memspec.conformance.processes.reader import Reader
from memspec.conformance.processes.workers import (
    Job,
    OpRecord,
    history,
    run_session,
    run_together,
)
from memspec.conformance.schedule.exploration import (
    Execution,
    Exploration,
    Program,
    execute,
    explore,
    fresh_root,
)
from memspec.conformance.schedule.repro import fail_with_repro
from memspec.conformance.schedule.schedule import Chooser
from memspec.conformance.tamper.capability import run_planned, tampering
from memspec.conformance.tamper.interpose import (
    Plan,
    describe_call,
    opens_for_writing,
    render_trace,
)
from memspec.conformance.tamper.stops import LOCK_CALLS
from memspec.spec.root_files import file_kind
from memspec.spec.targets import TARGETS

LOCK_LIMIT = 1_000_000
"""The memory limit of the concurrent check: far above what its adds use, so none is refused."""
ENTRY_WIDTH = 400
"""Code points per entry: long enough that a read-modify-write takes a while, widening the
window in which an unlocked session can lose another's add."""
LISTED = 8


def _entry(process: int, index: int, width: int) -> str:
    head = f"p{process} add {index:03d} "
    return head + "x" * max(0, width - len(head))


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
    answer = run_session(reader, timeout=30).expect_done().answer(1)
    assert answer is not None
    return list(answer["entries"])


@check("LOCK-1", "LOCK-3", id="locking.concurrent_adds_are_all_kept")
def concurrent_adds_are_all_kept(ctx: CheckContext) -> None:
    """``processes`` sessions in as many processes each add ``operations`` unique entries at
    once; afterwards every acknowledged add is present exactly once, nothing else is, and an add
    acknowledged before another started comes first in the file (LOCK-1, LOCK-3)."""
    processes, operations = ctx.profile.processes, ctx.profile.operations
    width = min(ENTRY_WIDTH, LOCK_LIMIT // (2 * processes * operations))
    limits = {"memory": LOCK_LIMIT}
    jobs = [
        Job(
            ctx.backend,
            ctx.root,
            (
                {"op": "load"},
                *(
                    {"op": "add", "target": "memory", "content": _entry(p, i, width)}
                    for i in range(operations)
                ),
            ),
            limits,
            name=f"p{p}",
        )
        for p in range(processes)
    ]
    results = run_together(jobs, timeout=30 + processes * operations * 0.5)
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
    assert not refused, (
        f"LOCK-3: {scale}: {len(refused)} adds were refused while other sessions wrote, "
        f"e.g. {_label(refused[0].request['content'])} answered {refused[0].answer}; "
        "the spec model accepts every one of them in any order"
    )
    sent = {op.request["content"] for op in adds}
    counts: dict[str, int] = {}
    for entry in found:
        counts[entry] = counts.get(entry, 0) + 1
    lost = [op.request["content"] for op in acknowledged if op.request["content"] not in counts]
    # LOCK-1, LOCK-3: every acknowledged add survives the others (no lost update).
    assert not lost, (
        f"LOCK-3: {scale}: {len(acknowledged)} adds were acknowledged but a fresh session finds "
        f"{len(acknowledged) - len(lost)} of them: {len(lost)} acknowledged adds were lost: "
        f"{_labels(lost)}. Each mutation must hold an exclusive flock on MEMORY.md.lock from "
        "its re-read of the file until the new file is in place (LOCK-1, LOCK-3)"
    )
    duplicated = [entry for entry, count in counts.items() if count > 1]
    # LOCK-3: an add takes effect once.
    assert not duplicated, f"LOCK-3: {scale}: entries appear more than once: {_labels(duplicated)}"
    unknown = [entry for entry in counts if entry not in sent]
    # LOCK-3: nothing appears that no session added.
    assert not unknown, (
        f"LOCK-3: {scale}: the file holds entries no session added: {_labels(unknown)}"
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
        assert latest is None or latest.invoke <= op.complete, (
            f"LOCK-3: {scale}: {_label(entry)} was acknowledged "
            f"{latest.invoke - op.complete:.6f} s before {_label(latest.request['content'])} "
            "was even invoked, yet the file has it after that entry: the history is not "
            "linearizable"
        )
        if latest is None or op.invoke > latest.invoke:
            latest = op


# -- the traced check ------------------------------------------------------------------------


def _is_memory_lock(call: dict[str, Any]) -> bool:
    """Whether ``call`` takes a lock LOCK-1 accepts for MEMORY.md: a ``flock`` on
    MEMORY.md.lock, or — for a backend without flock (LOCK-1 allows another inter-process lock
    the kernel releases when its holder dies) — a Unix socket bound in the abstract namespace
    under a name that holds MEMORY.md (seen through strace, as ``bind``)."""
    if call["name"] == "flock":
        return file_kind(Path(call["path"]).name, "MEMORY.md") == "lock"
    return call["name"] == "bind" and call["path"].startswith("@") and "MEMORY.md" in call["path"]


def _step(calls: list[dict[str, Any]], call: dict[str, Any]) -> int:
    return calls.index(call) + 1


def trace_of_add(ctx: CheckContext, index: int = 2) -> list[dict[str, Any]]:
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
    return run_planned(job, 60, ctx.scratch).expect_done().calls_during(index)


@check("LOCK-1", "LOCK-2", "LOCK-3", id="locking.lock_spans_read_to_rename")
def lock_spans_read_to_rename(ctx: CheckContext) -> None:
    """One add, traced: an exclusive flock on MEMORY.md.lock (or another lock the kernel
    releases, :func:`_is_memory_lock`) is taken before MEMORY.md is read and released only
    after the new file is in place (LOCK-1, LOCK-2, LOCK-3)."""
    calls = trace_of_add(ctx)
    trace = f"trace of the add: {render_trace(calls)}"
    locks = [c for c in calls if c["name"] in LOCK_CALLS and not c.get("error")]
    exclusive = [c for c in locks if "LOCK_EX" in c["details"].get("operation", "")]
    on_data = [c for c in exclusive if c["kind"] == "data"]
    # LOCK-1: never lock the data file itself.
    assert not on_data, (
        f"LOCK-1: the add took {on_data[0]['name']} LOCK_EX on MEMORY.md itself at step "
        f"{_step(calls, on_data[0])}: "
        "the rename gives MEMORY.md a new inode, so sessions that open it afterwards lock "
        f"another file; lock MEMORY.md.lock instead ({trace})"
    )
    flocks = [c for c in exclusive if _is_memory_lock(c)]
    # LOCK-1: an exclusive flock on MEMORY.md.lock.
    assert flocks, (
        "LOCK-1: the add took no exclusive flock on MEMORY.md.lock"
        + (
            f" (it used {describe_call(exclusive[0])}; lockf/fcntl locks do not exclude two "
            "sessions of one process)"
            if exclusive
            else ""
        )
        + f" ({trace})"
    )
    taken = flocks[0]
    start = _step(calls, taken)
    fd = taken["details"].get("fd")
    released = next(
        (
            c
            for c in calls[start:]
            if c["path"] == taken["path"]
            and (
                (c["name"] == "flock" and "LOCK_UN" in c["details"].get("operation", ""))
                or (c["name"] == "close" and c["details"].get("fd") == fd)
            )
        ),
        None,
    )
    end = _step(calls, released) if released is not None else len(calls) + 1
    reads = [
        c
        for c in calls
        if c["path"].endswith("/MEMORY.md")
        and (c["name"] == "read" or (c["name"] == "open" and not opens_for_writing(c)))
    ]
    # LOCK-2: the file is re-read while the lock is held.
    assert any(start < _step(calls, c) < end for c in reads), (
        f"LOCK-2: the add did not read MEMORY.md while holding the lock (steps {start}-{end}); "
        + (
            f"it read it at step {_step(calls, reads[0])}, before taking the lock; "
            if reads
            else ""
        )
        + f"re-read the file under the lock and decide on what it says ({trace})"
    )
    puts = [
        c
        for c in calls
        if c["path"].endswith("/MEMORY.md")
        and (c["name"] in ("replace", "rename") or c["name"] in ("write", "pwrite", "flush"))
    ]
    # LOCK-3: the lock is held until the new file is in place.
    assert not puts or _step(calls, puts[-1]) < end, (
        f"LOCK-3: the lock was released at step {end}, before the new file was put in place "
        f"at step {_step(calls, puts[-1])} ({trace})"
    )


# -- concurrent sessions and a reader, judged as a history ------------------------------

SEED = 20240605
"""The seed of the programs when the run names none (profile ``ci``: the same every run)."""
CHECK_TIMEOUT = 60.0
"""Longest linearizability search before the verdict is "undecided"."""
HISTORY_FILE = "concurrency-history.jsonl"


def run_history(
    ctx: CheckContext, seed: int
) -> tuple[list[Event], dict[str, int], dict[str, float]]:
    """Runs the sessions and the reader on ``ctx.root``; returns the history, the limits and
    timings (seconds: ``run``)."""
    processes, count = ctx.profile.processes, ctx.profile.operations
    batch = "batch" in ctx.claimed_features()
    rng = random.Random(seed)
    programs = [generate_program(p, rng, count, TARGETS, batch=batch) for p in range(processes)]
    limits = limits_for(programs)
    jobs = [
        Job(ctx.backend, ctx.root, program, limits, name=f"p{p}")
        for p, program in enumerate(programs)
    ]
    started = time.monotonic()
    with Reader(ctx.root, TARGETS, process=processes) as reader:
        results = run_together(jobs, timeout=30 + processes * count * 0.5)
        samples = [Event.from_record(record) for record in reader.stop()]
    seconds = time.monotonic() - started
    for result in results:
        result.expect_done()
    events = [Event.from_record(record) for record in history(results)]
    ordered = sorted([*events, *samples], key=lambda e: (e.time, e.type != "invoke"))
    return ordered, limits, {"run": seconds, "samples": len(samples) / 2}


def _save(ctx: CheckContext, events: list[Event]) -> Path:
    folder = ctx.artifacts or ctx.scratch
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / HISTORY_FILE
    write_history(path, events)
    return path


def _seed(ctx: CheckContext) -> int:
    """The seed of the programs: ``--seed``; else fixed for a derandomized profile (``ci``),
    drawn for one that is not (``thorough``) and named in any failure."""
    if ctx.seed is not None:
        return ctx.seed
    return SEED if ctx.profile.derandomize else random.SystemRandom().randrange(2**32)


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    "ATOMIC-5",
    "LIMIT-2",
    "BATCH-2",
    id="concurrency.history_is_linearizable",
)
def history_is_linearizable(ctx: CheckContext) -> None:
    """Concurrent sessions and a reader form a history every checker accepts (LOCK-3)."""
    seed = _seed(ctx)
    events, limits, extra = run_history(ctx, seed)
    seconds: dict[str, float] = {}
    findings = judge_history(events, limits, start={}, timeout=CHECK_TIMEOUT, seconds=seconds)
    ctx.figures.update(
        {
            "sessions": ctx.profile.processes,
            "operations per session": ctx.profile.operations,
            "samples": int(extra["samples"]),
            "seed": seed,
            "run seconds": round(extra["run"], 2),
            **{f"{name} seconds": round(value, 3) for name, value in seconds.items()},
        }
    )
    if not findings:
        return
    saved = _save(ctx, events)
    violations = [f for f in findings if not f.undecided]
    scale = (
        f"{ctx.profile.processes} sessions x {ctx.profile.operations} operations, "
        f"{int(extra['samples'])} samples, seed {seed}"
    )
    if not violations:
        raise NotApplicable(f"{findings[0].message} ({scale}; history saved to {saved})")
    first: Finding = violations[0]
    others = "".join(f"\nalso: {f.clause} ({f.checker})" for f in violations[1:])
    # LOCK-3 and the clause of the checker at fault: every checker accepts the history.
    raise AssertionError(
        f"{first.clause}: the {first.checker} checker rejects the history of {scale} "
        f"(saved to {saved}; limits {limits}; repeat the programs with --seed {seed}):\n"
        f"{first.message}{others}"
    )


# -- every schedule of two adders up to a bound of preemptions --------------------

NOTES = ("Project uses Go 1.22", "Editor: helix")
SEED_ENTRY = b"User prefers tabs over spaces"


def _adds(*per_session: int) -> Program:
    """Sessions that load and then add ``per_session[i]`` entries each, to a store holding one."""
    sessions = tuple(
        (
            f"p{index}",
            (
                {"op": "load"},
                *(
                    {"op": "add", "target": "memory", "content": f"Note {index}.{n}: {NOTES[n]}"}
                    for n in range(count)
                ),
            ),
        )
        for index, count in enumerate(per_session)
    )
    return Program(sessions, files={"memory": SEED_ENTRY})


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    id="interleavings.preemption_bounded_schedules",
)
def preemption_bounded_schedules(ctx: CheckContext) -> None:
    """Every schedule of two adders with few switches keeps both adds (LOCK-2, LOCK-3)."""
    tampering(ctx.backend).require()
    profile = ctx.profile
    bound, budget = profile.preemption_bound, profile.schedule_budget
    adds = profile.adds_per_session
    program = _adds(*adds)
    summary = Exploration()
    started = time.monotonic()

    def run_one(choose: Chooser) -> Execution:
        with fresh_root(ctx) as root:
            return execute(ctx.backend, root, program, choose)

    undecided = []
    for execution in explore(run_one, bound, budget, summary):
        ctx.figures.update(
            {
                "schedules run": summary.runs,
                "preemption bound": bound,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        if execution.finding is not None:
            fail_with_repro(ctx, execution)
        if execution.undecided:
            undecided.append(execution.undecided)
    ctx.figures["every schedule within the bound run"] = summary.complete
    if undecided:
        raise NotApplicable(f"LOCK-3: undecided: {undecided[0]}")
