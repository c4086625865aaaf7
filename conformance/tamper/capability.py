"""What the harness can do to a backend's file-system calls, behind one interface: record them, fail
one, kill at one, and stop at each for the scheduler.

:func:`tampering` picks :class:`Interposition` (:mod:`.interpose`) for a backend whose store runs as
Python code and :class:`Strace` (:mod:`.strace`, :mod:`.stops`) for a command, as the transport
declares (:class:`~memspec.conformance.transport.backend.Runs`), and :class:`Unreachable` for any
other. The suite builds it once per run and hands it to every check as ``ctx.tampering``; a check
states a :class:`~memspec.conformance.tamper.interpose.Plan` or
:class:`~memspec.conformance.tamper.interpose.Fault` and never asks which it got.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from memspec.conformance.processes.workers import Job, WorkerResult, run_session
from memspec.conformance.tamper import strace
from memspec.conformance.tamper.calls import CallRecord
from memspec.conformance.tamper.interpose import Fault, Plan
from memspec.conformance.tamper.stops import ParkedWorker, Scheduled, StoppedProcess
from memspec.conformance.tamper.strace import Drive, Killed
from memspec.conformance.transport.backend import Runs
from memspec.conformance.verdict.findings import NotApplicable

Recorded = tuple[list[CallRecord], list[Any]]
"""A session's call records (with the data a crash-state generator replays) and answers."""


class Tampering(Protocol):
    """What can be done to one backend's file-system calls: ``name`` says what records them,
    ``kill_attempts`` how often a kill that landed elsewhere is retried, ``drive`` runs a job in a
    worker to its end, ``directory`` is the check's scratch space."""

    name: str
    kill_attempts: int

    def require(self) -> None:
        """Raises NotApplicable, with the reason, where the calls cannot be reached here."""
        ...

    def run(self, job: Job, directory: Path, drive: Drive) -> WorkerResult:
        """Runs ``job`` with its plan carried out: its calls recorded, and its fault (one at
        most) made; the result's ``calls`` are the plan's call records. Raises NotApplicable
        when the fault cannot be placed."""
        ...

    def kill(self, job: Job, fault: Fault, directory: Path, drive: Drive) -> Killed:
        """Runs ``job`` killed at the step the kill ``fault`` selects."""
        ...

    def record(self, job: Job, timeout: float, directory: Path) -> Recorded:
        """Runs ``job`` (requests only) and returns what it recorded."""
        ...

    def stopped(self, job: Job, directory: Path) -> Scheduled:
        """Returns ``job`` started under the scheduler, stopped at each call it decides at
        (:class:`~memspec.conformance.tamper.stops.ParkedWorker` or
        :class:`~memspec.conformance.tamper.stops.StoppedProcess`)."""
        ...


class Interposition:
    """The calls of a Python backend, interposed in the worker process that runs it: no
    ptrace, no calibration run, and Python's buffered flushes seen."""

    name = "interposition"
    kill_attempts = 1

    def require(self) -> None:
        """Interposition works wherever workers run."""

    def run(self, job: Job, directory: Path, drive: Drive) -> WorkerResult:
        return drive(job)

    def kill(self, job: Job, fault: Fault, directory: Path, drive: Drive) -> Killed:
        return Killed(drive(replace(job, plan=Plan(faults=(fault,), trace=False))))

    def record(self, job: Job, timeout: float, directory: Path) -> Recorded:
        planned = replace(job, plan=Plan(trace=True, data=True))
        result = run_session(planned, timeout).expect_done()
        return result.calls, [result.answer(index) for index in range(len(job.operations))]

    def stopped(self, job: Job, directory: Path) -> ParkedWorker:
        return ParkedWorker(job)


class Strace:
    """The calls of a command backend's process, traced, failed and stopped by strace."""

    name = "strace"
    kill_attempts = 2

    def require(self) -> None:
        strace.require_strace()

    def run(self, job: Job, directory: Path, drive: Drive) -> WorkerResult:
        return strace.run_planned(job, directory, drive)

    def kill(self, job: Job, fault: Fault, directory: Path, drive: Drive) -> Killed:
        return strace.kill_planned(job, fault, directory, drive)

    def record(self, job: Job, timeout: float, directory: Path) -> Recorded:
        return strace.record_session(job, directory)

    def stopped(self, job: Job, directory: Path) -> StoppedProcess:
        return StoppedProcess(job, directory)


class Unreachable:
    """No way to reach a backend's file-system calls here: every use raises NotApplicable with
    ``reason``, so a check that needs the calls does not apply to the backend."""

    name = "nothing"
    kill_attempts = 0

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def require(self) -> None:
        raise NotApplicable(self.reason)

    def run(self, job: Job, directory: Path, drive: Drive) -> WorkerResult:
        raise NotApplicable(self.reason)

    def kill(self, job: Job, fault: Fault, directory: Path, drive: Drive) -> Killed:
        raise NotApplicable(self.reason)

    def record(self, job: Job, timeout: float, directory: Path) -> Recorded:
        raise NotApplicable(self.reason)

    def stopped(self, job: Job, directory: Path) -> Scheduled:
        raise NotApplicable(self.reason)


def tampering(backend: object) -> Tampering:
    """Returns what can be done to ``backend``'s file-system calls, from where its store runs
    (:class:`Unreachable` for a backend that does not say). The suite builds it once and hands
    it to every check as ``CheckContext.tampering``."""
    runs = getattr(backend, "runs", None)
    if runs is Runs.PYTHON:
        return Interposition()
    if runs is Runs.COMMAND:
        return Strace()
    return Unreachable(
        f"memspec reaches the file-system calls of Python and command backends, not {backend!r}"
    )


def run_planned(tamper: Tampering, job: Job, timeout: float, directory: Path) -> WorkerResult:
    """Runs ``job`` in a worker to its end (within ``timeout`` seconds) with its plan carried
    out by ``tamper`` (:meth:`Tampering.run`)."""
    return tamper.run(job, directory, functools.partial(run_session, timeout=timeout))
