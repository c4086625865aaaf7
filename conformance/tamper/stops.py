"""Sessions under the scheduler (LOCK-2, LOCK-3, ATOMIC-2; ``interleavings.*`` checks): a
``--backend-cmd`` backend's process, which strace stops after every file-system call on the
root and the scheduler resumes when it is its turn (:class:`StoppedProcess`), and a Python
backend's worker (:class:`ParkedWorker`).

How a command's session is stopped at each call, locks off the root, and why stops and not
delays: docs/architecture.md ("Stopped processes").
"""

from __future__ import annotations

import contextlib
import errno as errno_module
import functools
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from memspec.conformance.core.waits import REAP_TIMEOUT, SESSION_TIMEOUT, STRACE_POLL
from memspec.conformance.processes.workers import (
    Job,
    Worker,
    WorkerResult,
    WorkerStatus,
    run_session,
)
from memspec.conformance.tamper.calls import CallRecord, Parked, Returned
from memspec.conformance.tamper.fstrace import FAULT_CALLS, STRACE_CALLS, StraceFollower
from memspec.conformance.tamper.strace import (
    end_process_group,
    finish_traced,
    run_traced,
    traced,
)
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.transport.wire import Request
from memspec.spec.targets import FILENAMES

STORE_NAMES = (*FILENAMES.values(), *(f"{name}.lock" for name in FILENAMES.values()))
"""The names in the root whose calls are scheduling points (besides the root itself)."""
RESTARTED = "ERESTARTSYS"

_SIGNALLED = re.compile(r"^(\d+)\s+--- SIGSTOP \{si_signo=SIGSTOP, si_code=SI_KERNEL\b")
_CALL = re.compile(r"^\d+\s+(?P<name>\w+)\((?:[^<,]*<(?P<path>[^>]*)>)?")
_STOPPED = re.compile(r"^(\d+)\s+--- stopped by SIGSTOP ---")


LOCK_CALLS = ("flock", "lockf", "bind")
"""The call records (:mod:`memspec.conformance.tamper.fstrace`) that take an inter-process lock."""


def unschedulable_locks(records: Sequence[CallRecord]) -> list[str]:
    """Returns the paths of the locks in ``records`` (one session's calls) that are not
    scheduling points: not a name of :data:`STORE_NAMES` in the root (an abstract socket, a
    lock file of another name). A session waiting for one makes no call strace stops at, so
    the scheduler could tell it is blocked only by a timeout, and a schedule would not replay."""
    held = {
        record.path.rstrip("\x00 ")
        for record in records
        if record.name in LOCK_CALLS and not record.error
    }
    return sorted(
        path for path in held if path.startswith("@") or os.path.basename(path) not in STORE_NAMES
    )


def off_root_locks(backend: CommandBackend) -> tuple[str, ...]:
    """Returns the locks ``backend`` takes that are not scheduling points under ``-P``
    (:func:`unschedulable_locks`), found from one add recorded under strace on a scratch root,
    once per command and directory."""
    return _off_root_locks(backend.command, backend.cwd, backend.timeout)


@functools.cache
def _off_root_locks(command: str, cwd: str, timeout: float) -> tuple[str, ...]:
    backend = CommandBackend(command, timeout, cwd=cwd, prestart=False)
    ops: tuple[Request, ...] = (
        {"op": "load"},
        {"op": "add", "target": "memory", "content": "Lock probe entry"},
    )
    with tempfile.TemporaryDirectory(prefix="memspec-locks-") as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        job = Job(backend, root, ops, name="lock-probe")
        run = functools.partial(run_session, timeout=SESSION_TIMEOUT)
        result, _ = run_traced(job, Path(scratch), run)
    return tuple(unschedulable_locks(result.calls))


STOP_CALLS = f"{STRACE_CALLS},flock,fcntl,bind"
"""What a process whose lock is off the root is stopped at (module docs): every traced call
but the reads."""


def stop_options(root: Path, everywhere: bool = False) -> tuple[str, ...]:
    """Returns the strace options that stop a process after each call on ``root`` (module
    docs), for the root as given and as resolved (``-P`` compares the path strings); or, with
    ``everywhere``, after each call of :data:`STOP_CALLS` wherever it is."""
    if everywhere:
        return ("-e", "signal=SIGSTOP", "-e", f"inject={STOP_CALLS}:signal=SIGSTOP")
    roots = dict.fromkeys([str(root), os.path.realpath(root)])
    paths = [path for base in roots for path in (base, *(f"{base}/{n}" for n in STORE_NAMES))]
    filters = [option for path in paths for option in ("-P", path)]
    return ("-e", "signal=SIGSTOP", *filters, "-e", f"inject={FAULT_CALLS}:signal=SIGSTOP")


def stops_in(lines: list[str], signalled: set[int]) -> list[tuple[int, int]]:
    """Returns the stops in complete strace ``lines``: (thread, index of the line) for each
    ``stopped by SIGSTOP`` of a thread that strace sent ``SIGSTOP`` at a call (``signalled``,
    updated: group-stop lines of the process's other threads are not stops)."""
    stops = []
    for index, line in enumerate(lines):
        sent = _SIGNALLED.match(line)
        if sent is not None:
            signalled.add(int(sent.group(1)))
            continue
        stopped = _STOPPED.match(line)
        if stopped is not None and int(stopped.group(1)) in signalled:
            signalled.discard(int(stopped.group(1)))
            stops.append((int(stopped.group(1)), index))
    return stops


def unrecorded_call(latest_first: Iterable[str]) -> CallRecord:
    """Returns a record of the first call in strace lines given latest first that the parser
    keeps no record of (an ``lseek``, a ``dup``): its system call and the path strace
    decorated it with."""
    for line in latest_first:
        call = _CALL.match(line)
        if call is not None:
            return CallRecord(call.group("name"), call.group("path") or "")
    return CallRecord("call", "")


LOCK_TAKEN = frozenset({"EAGAIN", "EWOULDBLOCK", "EACCES", "EADDRINUSE"})
"""The errors of a lock attempt that found the lock taken (a lock call that waited)."""


def returned(call: CallRecord) -> Returned:
    """Returns the scheduler's record of a granted step whose call was ``call``."""
    error = call.error
    waited = error == RESTARTED or (call.name in LOCK_CALLS and error in LOCK_TAKEN)
    failed = bool(error) and not waited
    number = getattr(errno_module, str(error), None) if failed else None
    return Returned(failed, number, call, waited)


NEXT = CallRecord("next", "")
"""What a stopped process is parked at: the call it makes next, not known yet."""


class Locks(Protocol):
    """What the scheduler's model of the locks learns from its sessions."""

    def returned(self, worker: str, parked: Parked, failed: bool) -> None:
        """The call ``worker`` was ``parked`` at returned (``failed`` or not)."""
        ...

    def ended(self, worker: str) -> None:
        """``worker``'s session ended."""
        ...


class StoppedProcess:
    """One command-backend session under the scheduler, stopped by strace, with the face of the
    scheduler's interposed workers (``parked``, ``granted``, ``blocked``, ``gone``,
    :meth:`grant`...)."""

    def __init__(self, job: Job, directory: Path) -> None:
        self.name = job.name
        self.everywhere = bool(off_root_locks(job.backend))
        self.run = traced(job, directory, stop_options(job.root, self.everywhere))
        self.root = os.path.realpath(job.root)
        self.worker = Worker(self.run.job)
        self.lines: list[str] = []
        self._partial = ""
        self._offset = 0
        self._signalled: set[int] = set()
        self._stops: list[tuple[int, int]] = []
        self._seen = 0
        self._follower = StraceFollower(self.root, self.run.initial)
        self._fed = 0
        self._calls = 0
        self.group: int | None = None
        self.parked: Parked | None = None
        self.granted: Parked | None = None
        self.blocked = False
        self.gone = False

    def _read(self) -> None:
        """Reads what strace has written since the last time."""
        try:
            with open(self.run.output, "rb") as output:
                output.seek(self._offset)
                data = output.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", "surrogateescape")
        *complete, self._partial = text.split("\n")
        first = len(self.lines)
        self.lines += complete
        found = stops_in(complete, self._signalled)
        self._stops += [(thread, first + index) for thread, index in found]

    def _call_before(self, thread: int, line: int) -> CallRecord | None:
        """Returns the call ``thread`` stopped after at strace line ``line``: the last new call
        record on the root; stopped everywhere, that thread's own last call, or None when it
        is not a scheduling point (module docs)."""
        self._follower.feed(self.lines[self._fed : line + 1])
        self._fed = max(self._fed, line + 1)
        records = self._follower.trace.records
        new, self._calls = records[self._calls :], len(records)
        if not self.everywhere:
            return new[-1] if new else unrecorded_call(self._back_from(line))
        syscall, record = self._follower.last_call(thread)
        if record is None:
            record = unrecorded_call(self._back_from(line, thread))
            record = replace(record, name=syscall or record.name)
        return record if self._scheduling_point(record) else None

    def _back_from(self, line: int, thread: int | None = None) -> Iterator[str]:
        """Yields strace's lines from ``line`` back to the first (only those of ``thread``)."""
        prefix = f"{thread} " if thread is not None else ""
        for index in range(line, -1, -1):
            if self.lines[index].startswith(prefix):
                yield self.lines[index]

    def _scheduling_point(self, call: CallRecord) -> bool:
        """Whether a call stopped at everywhere is one the scheduler decides at: a lock call,
        or a call on the root or one of its names."""
        path = call.path
        in_root = os.path.dirname(path) == self.root and os.path.basename(path) in STORE_NAMES
        return call.name in LOCK_CALLS or path == self.root or in_root

    def absorb(self, locks: Locks) -> list[Returned]:
        """Takes the stops strace reported; returns the ``return`` records of granted steps."""
        self._read()
        returns = []
        while self._seen < len(self._stops):
            thread, line = self._stops[self._seen]
            self._seen += 1
            if self.group is None:
                with contextlib.suppress(OSError):
                    self.group = os.getpgid(thread)
            call = self._call_before(thread, line)
            if call is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(thread, signal.SIGCONT)
                continue
            back = returned(call)
            if self.granted is not None:
                returns.append(back)
                self.granted = None
            self.parked = Parked(NEXT, after=call, thread=thread, would_block=back.waited)
        if self.worker.ended and self.parked is None and not self.gone:
            self.gone = True
            locks.ended(self.name)
        return returns

    def settle(self, locks: Locks, timeout: float) -> list[Returned]:
        """Waits until the process is stopped again or its session ended (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        returns = []
        while True:
            self.worker.pump(0)
            returns += self.absorb(locks)
            if self.parked is not None or self.worker.ended or time.monotonic() >= deadline:
                break
            time.sleep(STRACE_POLL)
        self.blocked = self.parked is None and not self.gone
        return returns

    def grant(self) -> bool:
        """Resumes the stopped process (``SIGCONT``); False if it is gone."""
        thread = self.granted.thread if self.granted is not None else None
        if thread is None:
            return False
        try:
            os.kill(thread, signal.SIGCONT)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        """Kills the session's process group (its stopped processes; strace ends with them)
        and worker."""
        end_process_group(self.group)
        if not self.worker.ended:
            self.worker.kill(WorkerStatus.TIMEOUT)

    def finish(self) -> WorkerResult:
        """Reaps the worker and returns its result, with the calls strace recorded."""
        result = self.worker.finish(REAP_TIMEOUT)
        end_process_group(self.group)
        return finish_traced(self.run, result)[0]


class ParkedWorker:
    """One Python-backend session under the scheduler: a worker whose interposed calls park
    *before* they are made until the scheduler grants them
    (:mod:`memspec.conformance.processes.turns`). It has the face of :class:`StoppedProcess`."""

    def __init__(self, job: Job) -> None:
        self.name = job.name
        self.worker = Worker(job, scheduled=True)
        self.seen = 0
        self.parked: Parked | None = None
        self.granted: Parked | None = None
        self.blocked = False
        self.gone = False

    def absorb(self, locks: Locks) -> list[Returned]:
        """Takes the worker's new turn records; returns the returns among them."""
        returns = []
        while self.seen < len(self.worker.turns):
            record = self.worker.turns[self.seen]
            self.seen += 1
            if isinstance(record, Parked):
                self.parked = record
            elif self.granted is not None:
                locks.returned(self.name, self.granted, record.failed)
                returns.append(record)
                self.granted = None
        if self.worker.ended and self.parked is None and not self.gone:
            self.gone = True
            locks.ended(self.name)
        return returns

    def settle(self, locks: Locks, timeout: float) -> list[Returned]:
        """Waits until the worker is parked or gone (or ``timeout``); returns its returns."""
        self.worker.wait_until(
            lambda worker: (
                worker.ended or any(isinstance(r, Parked) for r in worker.turns[self.seen :])
            ),
            timeout,
        )
        returns = self.absorb(locks)
        self.blocked = self.parked is None and not self.gone
        return returns

    def grant(self) -> bool:
        """Lets the worker make the call it is parked at; False if it is gone."""
        return self.worker.grant()

    def stop(self) -> None:
        """Kills the worker if it is still running."""
        if not self.worker.ended:
            self.worker.kill(WorkerStatus.TIMEOUT)

    def finish(self) -> WorkerResult:
        """Reaps the worker and returns its result."""
        return self.worker.finish(REAP_TIMEOUT)


Scheduled = StoppedProcess | ParkedWorker
"""A session under the scheduler, as its backend's tampering starts it."""
