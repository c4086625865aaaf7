"""Chosen interleavings of concurrent sessions: run, judge, explore, render (LOCK-2, LOCK-3).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memspec.conformance.core.registry import CheckContext
from memspec.conformance.core.waits import RUN_LINEARIZABILITY_TIMEOUT
from memspec.conformance.history.checkers import CheckerFinding, judge_history
from memspec.conformance.history.history import Event
from memspec.conformance.processes.workers import Job, history
from memspec.conformance.schedule.schedule import (
    Chooser,
    ScheduledRun,
    follow,
    keep_running,
    run_scheduled,
)
from memspec.conformance.tamper.calls import describe_call
from memspec.conformance.tamper.capability import Tampering
from memspec.conformance.transport.backend import Backend
from memspec.conformance.transport.wire import Request
from memspec.spec.codec import decode, parse_text
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS


@dataclass(frozen=True)
class Program:
    """A Program is a scheduled run's input: files before it, limits, sessions' operations.

    ``files`` maps a target to the bytes its file holds before the run (absent: no file);
    ``sessions`` pairs each session's name with its protocol request dicts.
    """

    sessions: tuple[tuple[str, tuple[Request, ...]], ...]
    limits: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    files: Mapping[str, bytes | None] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """The session names, in order."""
        return tuple(name for name, _ in self.sessions)


@dataclass
class Execution:
    """An Execution is one scheduled run of a program and its verdict (``finding`` or None)."""

    program: Program
    run: ScheduledRun
    events: list[Event]
    finding: CheckerFinding | None
    undecided: str = ""
    seconds: float = 0.0

    @property
    def schedule(self) -> list[str]:
        """The choices of the run: replaying them repeats it."""
        return self.run.schedule


def _sample(root: Path) -> dict[str, Any]:
    """Reads each data file as an outside reader would: entries, or unreadable."""
    seen: dict[str, Any] = {}
    for target in TARGETS:
        try:
            data = (root / FILENAMES[target]).read_bytes()
        except FileNotFoundError:
            seen[target] = {"entries": []}
            continue
        except OSError:
            seen[target] = {"unreadable": True}
            continue
        text = decode(data)
        seen[target] = {"unreadable": True} if text is None else {"entries": parse_text(text)}
    return seen


def prepare_root(root: Path, program: Program) -> None:
    """Writes the program's starting files into ``root`` (an empty directory)."""
    for target, data in program.files.items():
        if data is not None:
            (root / FILENAMES[target]).write_bytes(data)


def execute(
    backend: Backend, root: Path, program: Program, choose: Chooser, tamper: Tampering
) -> Execution:
    """Runs ``program`` on ``root`` (prepared here) as ``choose`` decides, its sessions stopped
    at their calls by ``tamper`` (the check's ``ctx.tampering``), and judges it."""
    prepare_root(root, program)
    jobs = [
        Job(backend, root, operations_, dict(program.limits), name=name)
        for name, operations_ in program.sessions
    ]
    started = time.monotonic()
    run = run_scheduled(jobs, choose, tamper, sample=lambda: _sample(root))
    for result in run.results:
        result.expect_done()
    events = history_of(run, len(jobs))
    finding, undecided = judge(program, events)
    return Execution(program, run, events, finding, undecided, time.monotonic() - started)


def history_of(run: ScheduledRun, reader: int) -> list[Event]:
    """Returns the run's mutations and the harness's samples as one history (the samples of
    each target as reader process ``reader``, ``reader + 1``...)."""
    events = [Event.from_record(record) for record in history(run.results)]
    for start, end, seen in run.samples:
        for offset, target in enumerate(TARGETS):
            if target not in seen:
                continue
            request: Request = {"op": "read", "target": target}
            events.append(Event("invoke", reader + offset, request, start))
            events.append(Event("ok", reader + offset, request, end, seen[target]))
    return sorted(events, key=lambda e: (e.time, e.type != "invoke"))


def judge(program: Program, events: Sequence[Event]) -> tuple[CheckerFinding | None, str]:
    """Returns the first finding of the checkers
    (:func:`~memspec.conformance.history.checkers.judge_history`) against the run's history, and why
    the verdict is undecided if it is."""
    findings = judge_history(
        events, program.limits, start=program.files, timeout=RUN_LINEARIZABILITY_TIMEOUT
    )
    decided = [finding for finding in findings if not finding.undecided]
    if decided:
        return decided[0], ""
    return None, findings[0].message if findings else ""


# -- exploring ------------------------------------------------------------------------------


def preemptions(schedule: Sequence[str], enabled: Sequence[tuple[str, ...]]) -> int:
    """Counts the switches away from a session that could have gone on."""
    return sum(
        1
        for number in range(1, len(schedule))
        if schedule[number] != schedule[number - 1] and schedule[number - 1] in enabled[number]
    )


@dataclass
class Exploration:
    """What :func:`explore` did: how many schedules it ran and whether it covered them all."""

    runs: int = 0
    complete: bool = False
    seconds: float = 0.0


def explore(
    run_one: Callable[[Chooser], Execution],
    bound: int,
    budget: int,
    summary: Exploration | None = None,
) -> Iterator[Execution]:
    """Yields executions of every schedule with at most ``bound`` preemptions (module docs),
    depth first, up to ``budget`` runs. ``run_one(chooser)`` runs the program once.
    ``summary`` (optional) is filled in with the count and whether the space was exhausted."""
    summary = summary if summary is not None else Exploration()
    started = time.monotonic()
    frontier: list[list[str]] = [[]]
    tried: set[tuple[str, ...]] = set()
    while frontier and summary.runs < budget:
        prefix = frontier.pop()
        execution = run_one(follow(prefix, then=keep_running))
        summary.runs += 1
        yield execution
        schedule, enabled = execution.run.schedule, execution.run.enabled
        private = private_calls(execution.run)
        branches = []
        for number in range(len(prefix), len(schedule)):
            if number in private:
                continue
            for other in enabled[number]:
                if other == schedule[number]:
                    continue
                candidate = [*schedule[:number], other]
                key = tuple(candidate)
                if key in tried or preemptions(candidate, enabled[: number + 1]) > bound:
                    continue
                tried.add(key)
                branches.append(candidate)
        frontier.extend(reversed(branches))
    summary.complete = not frontier
    summary.seconds = time.monotonic() - started


def private_calls(run: ScheduledRun) -> set[int]:
    """Returns the decisions whose granted call no other session can observe: calls on the
    directory's own descriptor (open, fsync, close) and on a file no other session touched in
    the run (a session's own temp file). Running such a call before or after another session's
    calls gives the same states, so the exploration does not switch away in front of it."""
    users: dict[str, set[str]] = {}
    for step in run.steps:
        users.setdefault(step.call.path, set()).add(step.process)
    return {
        number
        for number, step in enumerate(run.steps)
        if (step.call.kind == "dir" and step.call.name != "rename")
        or (
            step.call.kind == "temp"
            and len(users.get(step.call.path, ())) == 1
            and step.call.name not in ("rename", "replace", "unlink")
        )
    }


@contextmanager
def fresh_root(ctx: CheckContext) -> Iterator[Path]:
    """Yields a new empty root directory under the check's scratch directory, removed after."""
    root = Path(tempfile.mkdtemp(prefix="root-", dir=ctx.scratch))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- rendering ------------------------------------------------------------------------------


def _describe_request(request: Mapping[str, Any]) -> str:
    op = request.get("op")
    if op == "load":
        return "load"
    shown = [str(request.get("target", ""))]
    for key in ("old_text", "content", "new_content"):
        if key in request:
            text = str(request[key])
            shown.append(repr(text if len(text) <= 24 else text[:21] + "..."))
    if op == "batch":
        shown.append(f"[{len(request.get('operations') or [])} items]")
    return " ".join([str(op), *shown])


def _entries_label(seen: Mapping[str, Any]) -> str:
    memory = seen.get("memory", {})
    if memory.get("unreadable"):
        return "MEMORY.md unreadable"
    entries = memory.get("entries", [])
    return f"MEMORY.md: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"


def render_interleaving(execution: Execution, width: int = 34) -> str:
    """Returns the run as a timeline: one column per session, one row per call, with each
    operation's start (``>``) and answer (``<``) and what the file held after each step."""
    names = execution.program.names
    rows: list[tuple[float, int, str, str]] = []
    for column, result in enumerate(execution.run.results):
        for op in result.ops:
            rows.append((op.invoke, column, "", "> " + _describe_request(op.request)))
            if op.complete is not None and op.answer is not None:
                answer = op.answer.get("code", "?")
                rows.append((op.complete, column, "", f"< {answer}"))
            elif op.type == "info":
                rows.append((float("inf"), column, "", "< (no answer)"))
    by_name = {name: column for column, name in enumerate(names)}
    for step in execution.run.steps:
        label = describe_call(step.call) + (" (failed)" if step.failed else "")
        after = _entries_label(step.sample) if isinstance(step.sample, Mapping) else ""
        column = by_name.get(step.process, 0)
        rows.append((step.time, column, str(step.number), label + "\t" + after))
    rows.sort(key=lambda row: row[0])
    header = "step  " + "".join(name.ljust(width) for name in names) + "files after the step"
    lines = [header, "-" * len(header)]
    for _, column, number, text in rows:
        label, _, after = text.partition("\t")
        if len(label) > width - 2:
            label = label[: width - 5] + "..."
        cells = [""] * len(names)
        cells[column] = label
        lines.append(number.rjust(4) + "  " + "".join(cell.ljust(width) for cell in cells) + after)
    return "\n".join(lines)
