"""Concurrent sessions checked for linearizability against the spec model (LOCK-3, ATOMIC-2).

``processes`` worker processes, each with its own session on one root, start together at a
barrier and run a mix of adds and removes of their own entries, while a reader thread in the
harness samples ``MEMORY.md`` continuously. The operations and the samples form one Jepsen-style
history (:mod:`memspec.fuzz.history`), which must be linearizable: some order of the mutations,
consistent with real time, explains every answer and every sample. The samples also make the
search fast, since each pins the state at its moment.

A lost update, a torn or empty file seen by the reader, or a refusal no order explains makes the
history illegal; the failure shows the longest legal prefix, the model state after it, the
operations that could not come next and a timeline of the processes. A search that runs out of
time is reported as undecided (skipped), never as a pass.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from memspec.conformance.registry import CheckContext, NotApplicable, check
from memspec.conformance.workers import Job, history, run_together
from memspec.fuzz.history import Event, memory_model, operations, timeline
from memspec.fuzz.linearizability import check_history
from memspec.spec.codec import decode, parse_text

LIMIT = 1_000_000
"""The memory limit of the check: far above what its entries use, so no add is refused."""
SAMPLE_PAUSE = 0.002
"""Seconds between two samples of the reader."""
CHECK_TIMEOUT = 60.0
"""Longest linearizability search before the verdict is "undecided"."""


def _program(process: int, operations: int) -> tuple[dict[str, Any], ...]:
    """Adds of unique entries; every fourth step removes the process's previous entry."""
    steps: list[dict[str, Any]] = [{"op": "load"}]
    for index in range(operations):
        if index % 4 == 3:
            steps.append(
                {"op": "remove", "target": "memory", "old_text": f"p{process}-{index - 1}."}
            )
        else:
            steps.append({"op": "add", "target": "memory", "content": f"p{process}-{index}."})
    return tuple(steps)


def _sample(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {"entries": []}
    except OSError:
        return {"unreadable": True}
    text = decode(data)
    return {"unreadable": True} if text is None else {"entries": parse_text(text)}


class _Reader:
    """Samples a file in a thread until stopped; each sample is a read in the history."""

    def __init__(self, path: Path, process: int) -> None:
        self.path, self.process = path, process
        self.events: list[Event] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="memspec-reader")

    def _run(self) -> None:
        while not self.stop.is_set():
            self.read_once()
            time.sleep(SAMPLE_PAUSE)

    def read_once(self) -> None:
        request = {"op": "read", "target": "memory"}
        start = time.monotonic()
        value = _sample(self.path)
        self.events.append(Event("invoke", self.process, request, start))
        self.events.append(Event("ok", self.process, request, time.monotonic(), value))


@check("LOCK-3", "LOCK-2", "ATOMIC-2", features=("multi-process",))
def history_is_linearizable(ctx: CheckContext) -> None:
    """Concurrent sessions and a reader form a history the spec model can explain (LOCK-3)."""
    processes, count = ctx.profile.processes, ctx.profile.operations
    limits = {"memory": LIMIT}
    jobs = [
        Job(ctx.backend, ctx.root, _program(p, count), limits, name=f"p{p}")
        for p in range(processes)
    ]
    reader = _Reader(ctx.root / "MEMORY.md", processes)
    reader.thread.start()
    try:
        results = run_together(jobs, timeout=30 + processes * count * 0.5)
    finally:
        reader.stop.set()
        reader.thread.join(timeout=5)
    reader.read_once()  # the final state, after every worker ended
    for result in results:
        result.expect_done()
    events = [
        Event(e["type"], e["process"], e["op"], e["time"], e.get("value")) for e in history(results)
    ]
    events = sorted([*events, *reader.events], key=lambda e: (e.time, e.type != "invoke"))
    verdict = check_history(memory_model(LIMIT), operations(events), timeout=CHECK_TIMEOUT)
    scale = f"{processes} sessions x {count} operations and {len(reader.events) // 2} samples"
    if verdict.verdict == "unknown":
        raise NotApplicable(
            f"LOCK-3: undecided: the linearizability search of {scale} ran out "
            f"of time after {verdict.states_explored} states"
        )
    # LOCK-3: some real-time order of the mutations explains every answer and every sample.
    assert verdict.verdict == "ok", (
        f"LOCK-3: the history of {scale} is not linearizable: no order of the mutations that "
        "respects real time explains what the sessions were answered and what the reader saw "
        "(a lost update, or a file seen torn or empty).\n"
        + (verdict.explanation.render() if verdict.explanation else "")
        + "\n\ntimeline (mutations):\n"
        + timeline([e for e in events if e.op["op"] != "read"])
    )
