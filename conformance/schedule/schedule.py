"""A deterministic scheduler for the file-system calls of concurrent sessions (LOCK-2, LOCK-3).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memspec.conformance.core.waits import START_TIMEOUT, STEP_TIMEOUT
from memspec.conformance.processes.workers import Job, WorkerResult
from memspec.conformance.tamper.calls import CallRecord, Parked, Returned
from memspec.conformance.tamper.capability import Tampering
from memspec.conformance.tamper.stops import Scheduled
from memspec.spec.errors import MemspecError


@dataclass(frozen=True)
class Decision:
    """A Decision is one choice point: who may run now, and who ran last.

    ``enabled`` are the names of the workers whose parked call may be made now, in job order;
    ``calls`` maps each of them to where it is parked; ``last`` ran the previous step.
    """

    number: int
    enabled: tuple[str, ...]
    calls: dict[str, Parked]
    last: str | None


Chooser = Callable[[Decision], str]
"""Picks the worker (a name out of ``decision.enabled``) that makes the next call."""


class ScheduleDiverged(MemspecError):
    """A replayed schedule asked for a worker that is not enabled at that decision."""


@dataclass(frozen=True)
class Step:
    """A Step is one granted call: who made it, the call record, what the reader saw after."""

    number: int
    process: str
    call: CallRecord
    time: float
    failed: bool = False
    errno: int | None = None
    sample: Any = None


@dataclass
class ScheduledRun:
    """A ScheduledRun is a finished run: ``steps[i]`` is the call granted at decision ``i``,
    ``schedule`` the name chosen at each (replaying it repeats the run), ``enabled`` the names
    enabled, ``notes`` where the run was not fully serialised."""

    results: list[WorkerResult]
    steps: list[Step]
    schedule: list[str]
    enabled: list[tuple[str, ...]]
    samples: list[tuple[float, float, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def follow(schedule: Sequence[str], then: Chooser | None = None) -> Chooser:
    """Returns a Chooser that replays ``schedule`` and then defers to ``then`` (raises
    ScheduleDiverged when ``schedule`` runs out without ``then``, or names a worker that is not
    enabled)."""

    def choose(decision: Decision) -> str:
        if decision.number < len(schedule):
            wanted = schedule[decision.number]
            if wanted not in decision.enabled:
                raise ScheduleDiverged(
                    f"decision {decision.number}: the schedule runs {wanted}, but only "
                    f"{', '.join(decision.enabled) or 'nobody'} can run"
                )
            return wanted
        if then is None:
            raise ScheduleDiverged(
                f"decision {decision.number}: the schedule has only {len(schedule)} choices"
            )
        return then(decision)

    return choose


def keep_running(decision: Decision) -> str:
    """The non-preemptive Chooser: the last worker goes on while it can, else the first one."""
    if decision.last in decision.enabled:
        return decision.last
    return decision.enabled[0]


class _Locks:
    """The scheduler's model of flock/lockf locks: who holds which inode, in which mode."""

    def __init__(self) -> None:
        self.holders: dict[int, dict[tuple[str, int | None], str]] = {}

    @staticmethod
    def _key(worker: str, call: CallRecord) -> tuple[str, int | None]:
        # flock locks belong to an open file description, lockf locks to the process.
        return (worker, call.details.fd if call.name == "flock" else None)

    def blocks(self, worker: str, parked: Parked) -> bool:
        """Whether the ``parked`` call would wait for a lock someone else holds (a stopped
        command's call that waited says so itself, ``would_block``)."""
        call = parked.call
        if parked.would_block:
            return True
        if call.name not in ("flock", "lockf") or parked.inode is None:
            return False
        operation = call.details.operation or ""
        if "LOCK_NB" in operation or "LOCK_UN" in operation:
            return False
        key = self._key(worker, call)
        others = {
            mode for holder, mode in self.holders.get(parked.inode, {}).items() if holder != key
        }
        return "LOCK_EX" in others or ("LOCK_EX" in operation and bool(others))

    def returned(self, worker: str, parked: Parked, failed: bool) -> None:
        """Learns from a call that returned."""
        call, inode = parked.call, parked.inode
        if failed or inode is None:
            return
        held = self.holders.setdefault(inode, {})
        if call.name == "close":
            fd = call.details.fd
            for key in [k for k in held if k[0] == worker and k[1] in (None, fd)]:
                del held[key]
            return
        if call.name not in ("flock", "lockf"):
            return
        operation = call.details.operation or ""
        key = self._key(worker, call)
        if "LOCK_UN" in operation:
            held.pop(key, None)
        else:
            held[key] = "LOCK_EX" if "LOCK_EX" in operation else "LOCK_SH"

    def ended(self, worker: str) -> None:
        """Drops every lock of a worker that ended."""
        for held in self.holders.values():
            for key in [k for k in held if k[0] == worker]:
                del held[key]


def _wake_waiters(scheduled: Sequence[Scheduled], chosen: Scheduled) -> None:
    """After ``chosen`` made a step, a stopped command that waited for a lock may go again."""
    for item in scheduled:
        if item is not chosen and item.parked is not None and item.parked.would_block:
            item.parked = replace(item.parked, would_block=False)


def run_scheduled(
    jobs: Sequence[Job],
    choose: Chooser,
    tamper: Tampering,
    *,
    sample: Callable[[], Any] | None = None,
    deadline: float = 120.0,
    step_timeout: float = STEP_TIMEOUT,
) -> ScheduledRun:
    """Runs ``jobs`` in scheduled workers, stopped at their calls by ``tamper``, one call at a
    time as ``choose`` decides (module docs).
    ``sample`` is called before the first step and after every step (``samples`` holds ``(start,
    end, value)``); workers running at ``deadline`` seconds are killed. ScheduleDiverged propagates
    after every worker is reaped."""
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"scheduled jobs need distinct names, got {names}")
    locks = _Locks()
    run = ScheduledRun([], [], [], [])
    end = time.monotonic() + deadline
    scheduled: list[Scheduled] = []
    traces = tempfile.TemporaryDirectory(prefix="memspec-stops-")
    try:
        scheduled = [tamper.stopped(job, Path(traces.name)) for job in jobs]
        for item in scheduled:
            item.settle(locks, START_TIMEOUT)
        _take_sample(run, sample)
        last: str | None = None
        while time.monotonic() < end:
            for item in scheduled:
                if item.blocked:
                    item.worker.pump(0)
                    item.absorb(locks)
                    item.blocked = item.parked is None and not item.gone
            parked = [item for item in scheduled if item.parked is not None]
            if not parked:
                waiting = [item for item in scheduled if item.blocked]
                if not waiting:
                    break
                waiting[0].settle(locks, min(step_timeout, max(0.0, end - time.monotonic())))
                continue
            waits = {item.name: item.parked for item in parked if item.parked is not None}
            enabled = [i for i in parked if not locks.blocks(i.name, waits[i.name])] or parked
            decision = Decision(
                len(run.schedule),
                tuple(item.name for item in enabled),
                {item.name: waits[item.name] for item in enabled},
                last,
            )
            chosen_name = choose(decision)
            chosen = next(item for item in enabled if item.name == chosen_name)
            run.schedule.append(chosen_name)
            run.enabled.append(decision.enabled)
            chosen.granted, chosen.parked = waits[chosen_name], None
            call = waits[chosen_name].call
            granted_at = time.monotonic()
            if not chosen.grant():
                chosen.gone = True
                run.steps.append(Step(len(run.steps) + 1, chosen.name, call, granted_at, True))
                continue
            returns = chosen.settle(locks, step_timeout)
            if chosen.blocked:
                run.notes.append(
                    f"step {len(run.steps) + 1}: {chosen.name}'s {call.name} did not "
                    f"return within {step_timeout:g} s; the others went on meanwhile"
                )
            back = returns[0] if returns else Returned(False)
            _wake_waiters(scheduled, chosen)
            step_sample = _take_sample(run, sample)
            run.steps.append(
                Step(
                    len(run.steps) + 1,
                    chosen.name,
                    back.call or call,
                    granted_at,
                    back.failed,
                    back.errno,
                    step_sample,
                )
            )
            last = chosen.name
    finally:
        for item in scheduled:
            item.stop()
        try:
            run.results = [item.finish() for item in scheduled]
        finally:
            for item in scheduled:
                item.stop()
            traces.cleanup()
    return run


def _take_sample(run: ScheduledRun, sample: Callable[[], Any] | None) -> Any:
    if sample is None:
        return None
    start = time.monotonic()
    value = sample()
    run.samples.append((start, time.monotonic(), value))
    return value
