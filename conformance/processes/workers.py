"""Store sessions in worker processes, with a Jepsen-style record of every operation.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import multiprocess
from multiprocess import connection

from memspec.conformance.core.locations import shadows_memspec
from memspec.conformance.core.waits import BARRIER_TIMEOUT, PUMP_POLL, REAP_TIMEOUT, SESSION_TIMEOUT
from memspec.conformance.processes.turns import TurnHook
from memspec.conformance.tamper.calls import CallRecord, Parked, Returned
from memspec.conformance.tamper.interpose import Interposer, Plan, PlanHook
from memspec.conformance.transport.backend import BackendDefect, Runs
from memspec.conformance.transport.wire import (
    Answer,
    EventType,
    HistoryRecord,
    Request,
    Unanswered,
    fields_of,
)
from memspec.conformance.verdict.findings import (
    DEFECT_CLAUSE,
    AdapterGap,
    HarnessError,
    Refusal,
)
from memspec.spec.requests import MUTATIONS
from memspec.spec.targets import FILENAMES

HARNESS_STEPS = ("put", "observe")
START_METHOD_VARIABLE = "MEMSPEC_START_METHOD"
PRELOAD = ("memspec.spec.model", "memspec.spec.fence", "memspec.spec.threats")
"""Modules the fork server imports once, so that workers start without compiling the spec's
regular expressions again (most Python backends import the spec)."""

_context: Any = None


def process_context() -> Any:
    """Returns the ``multiprocess`` context workers start in: ``forkserver`` where available (a
    clean parent, no inherited threads or lock descriptors; ``MEMSPEC_START_METHOD`` overrides it).
    A script that runs the harness must guard its entry point with ``if __name__ == "__main__":``.
    """
    global _context
    if _context is None:
        methods = multiprocess.get_all_start_methods()
        method = os.environ.get(START_METHOD_VARIABLE) or (
            "forkserver" if "forkserver" in methods else "spawn"
        )
        _context = multiprocess.get_context(method)
        if method == "forkserver":
            _context.set_forkserver_preload(["__main__", __name__, *PRELOAD])
    return _context


def start_process_server() -> None:
    """Starts the fork server now if workers start from one, so that it and every worker take
    this moment's environment and working directory, not those of a later run."""
    context = process_context()
    if context.get_start_method() == "forkserver":
        from multiprocess import forkserver

        # The server is a ``python -c`` process, whose import path starts with its working
        # directory: never one whose ``memspec`` folder would shadow the installed package.
        neutral = shadows_memspec(os.getcwd())
        with contextlib.chdir(tempfile.gettempdir()) if neutral else nullcontext():
            forkserver.ensure_running()


@dataclass(frozen=True)
class Job:
    """A Job is one session to run in a worker: ``operations`` are protocol request dicts or harness
    steps (module docs); ``plan`` interposes its calls (a Python backend only); ``name`` identifies
    the process in records and messages."""

    backend: Any
    root: Path
    operations: tuple[Request, ...]
    limits: Mapping[str, int] | None = None
    plan: Plan | None = None
    name: str = "p0"
    barrier_timeout: float = BARRIER_TIMEOUT


# -- the messages a worker sends --------------------------------------------------------------


class OpType(StrEnum):
    """What became of an operation (:class:`OpRecord`)."""

    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


EVENT_TYPES: dict[OpType, EventType] = {
    OpType.INVOKE: "invoke",
    OpType.OK: "ok",
    OpType.FAIL: "fail",
    OpType.INFO: "info",
}
"""The type of the history event that records each outcome (the same word)."""


class _Sender(Protocol):
    """The sending end of a one-way pipe (``multiprocess``'s ``Connection``)."""

    def send(self, obj: object) -> None: ...

    def close(self) -> None: ...


class WorkerStatus(StrEnum):
    """How a worker ended (:class:`WorkerResult`)."""

    DONE = "done"
    KILLED = "killed"
    DIED = "died"
    TIMEOUT = "timeout"
    DEFECT = "defect"
    REFUSED = "refused"
    ERROR = "error"
    BARRIER = "barrier"
    GAP = "gap"
    """memspec's adapter of the store could not map an answer (:class:`AdapterGap`)."""


@dataclass(frozen=True)
class Opened:
    """The worker opened its session: its pid, the backend's (its own for a Python backend) and
    the features the backend claims."""

    pid: int
    store_pid: int
    features: tuple[str, ...]
    time: float


@dataclass(frozen=True)
class Invoked:
    """Operation ``index`` is about to be sent."""

    index: int
    time: float


@dataclass(frozen=True)
class Answered:
    """Operation ``index`` was answered: ``ok`` or ``fail``, as the answer says."""

    index: int
    time: float
    type: OpType
    answer: Answer


@dataclass(frozen=True)
class Refused:
    """The backend refused operation ``index``, an action of ``core``, as unsupported."""

    index: int
    time: float
    action: str
    clauses: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Broke:
    """The backend broke the contract: on opening the session (``index`` ``None``) or during
    operation ``index`` (which is then ``info``); what was sent and received, when known."""

    index: int | None
    time: float
    message: str
    sent: Any
    received: Any
    clause: str = DEFECT_CLAUSE
    """The clause broken (CONTRACT-2 for an answer of the wrong shape, :class:`BackendDefect`)."""


@dataclass(frozen=True)
class Ended:
    """The worker is done with its job: ``done``, ``error`` (a bug in the harness; ``message``
    has the traceback) or ``barrier`` (another worker never came)."""

    status: WorkerStatus
    message: str = ""


Message = Opened | Invoked | Answered | Refused | Broke | Ended | CallRecord | Parked | Returned
"""What a worker sends: one of the records above, or a record of the interposition hooks (a
call of the trace, a scheduled call parked or returned: :mod:`memspec.conformance.tamper.calls`)."""


# -- the worker side --------------------------------------------------------------------------


class _Outbox:
    """Sends records to the harness, one at a time (the store may run in a timeout thread)."""

    def __init__(self, sender: Any) -> None:
        self.sender = sender
        self.lock = threading.Lock()

    def send(self, record: Message) -> None:
        with self.lock:
            try:
                self.sender.send(record)
            except (OSError, ValueError):
                # The harness is gone: nobody will read this worker's records any more.
                os._exit(3)


def _plain(value: Any) -> Any:
    """Returns ``value`` if it is JSON-ready, else its repr (records must always unpickle)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def harness_step(root: Path, request: Request) -> Answer:
    """Executes a ``put`` or ``observe`` harness step (module docs) and returns its answer."""
    if request["op"] == "put":
        path = root / FILENAMES[request["target"]]
        content = request.get("hex")
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(bytes.fromhex(content))
        return {"ok": True, "code": "OK"}
    files = {
        entry.name: Path(entry.path).read_bytes().hex()
        for entry in os.scandir(root)
        if entry.is_file(follow_symlinks=False)
    }
    return {"ok": True, "code": "OK", "files": files}


def run_job(
    job: Job, sender: Any, barrier: Any = None, turnstile: Any = None, temp: str = ""
) -> None:
    """The worker's body: runs ``job`` and sends its records through ``sender``.

    With a ``turnstile`` (the receiving end of the scheduler's pipe) every interposed call
    waits for its turn (:mod:`memspec.conformance.processes.turns`). ``temp`` is the temporary
    directory of the harness process that started the worker: the session's, and a command
    backend's, temporary files go there, not to that of the fork server the worker comes from,
    which outlives the run."""
    if temp:
        os.environ["TMPDIR"] = temp
        tempfile.tempdir = None
    outbox = _Outbox(sender)
    interposer: Interposer | None = None
    hook: PlanHook | TurnHook | None = None
    try:
        if job.plan is not None or turnstile is not None:
            if getattr(job.backend, "runs", None) is not Runs.PYTHON:
                outbox.send(
                    Ended(
                        WorkerStatus.ERROR,
                        "interposition needs a Python backend (MODULE:FACTORY); "
                        f"got {job.backend!r}",
                    )
                )
                return
            inner = PlanHook(job.plan, outbox.send) if job.plan is not None else None
            hook = TurnHook(outbox.send, turnstile, inner) if turnstile is not None else inner
            assert hook is not None
            interposer = Interposer(job.root, hook).install()
        _run_session(job, outbox, barrier, hook, interposer)
    except BaseException:
        outbox.send(Ended(WorkerStatus.ERROR, traceback.format_exc()))
    finally:
        if interposer is not None:
            interposer.uninstall()
        with suppress(OSError):
            sender.close()


def _run_session(
    job: Job,
    outbox: _Outbox,
    barrier: Any,
    hook: PlanHook | TurnHook | None,
    interposer: Interposer | None,
) -> None:
    try:
        session = job.backend.open(job.root, job.limits)
    except BackendDefect as defect:
        outbox.send(_broke(None, defect))
        return
    process = getattr(session, "process", None)
    store_pid = getattr(process, "pid", None) or os.getpid()
    outbox.send(Opened(os.getpid(), store_pid, tuple(sorted(session.features)), time.monotonic()))
    try:
        if barrier is not None:
            try:
                barrier.wait(job.barrier_timeout)
            except threading.BrokenBarrierError:
                outbox.send(Ended(WorkerStatus.BARRIER, "the start barrier was broken"))
                return
        quiet = interposer.suspended if interposer is not None else nullcontext
        for index, request in enumerate(job.operations):
            outbox.send(Invoked(index, time.monotonic()))
            if hook is not None:
                hook.op = index
            try:
                if request["op"] in HARNESS_STEPS:
                    with quiet():
                        answer = harness_step(job.root, request)
                else:
                    answer = session.request(request["op"], **fields_of(request))
            except BackendDefect as defect:
                outbox.send(_broke(index, defect))
                return
            except Refusal as refusal:
                refused = (refusal.action, refusal.clauses, refusal.text)
                outbox.send(Refused(index, time.monotonic(), *refused))
                return
            except AdapterGap as gap:
                outbox.send(Ended(WorkerStatus.GAP, str(gap)))
                return
            finally:
                if hook is not None:
                    hook.op = None
            said = OpType.OK if answer.get("ok") else OpType.FAIL
            outbox.send(Answered(index, time.monotonic(), said, _plain(answer)))
    finally:
        with suppress(Exception):
            session.close()
    outbox.send(Ended(WorkerStatus.DONE))


def _broke(index: int | None, defect: BackendDefect) -> Broke:
    sent, received = _plain(defect.sent), _plain(defect.received)
    return Broke(index, time.monotonic(), str(defect), sent, received, defect.clause)


# -- the harness side -------------------------------------------------------------------------


@dataclass
class OpRecord:
    """An OpRecord is one operation of one worker, Jepsen-style: ``type`` is ``ok``, ``fail`` (it
    did not happen), ``info`` (no answer: it may or may not have happened) or ``invoke`` while it
    runs; ``invoke`` and ``complete`` are monotonic seconds."""

    process: str
    index: int
    request: Request
    type: OpType
    invoke: float
    complete: float | None = None
    answer: Answer | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """Returns the record as a JSON-ready dict."""
        return {
            "process": self.process,
            "index": self.index,
            "type": self.type,
            "request": self.request,
            "invoke": self.invoke,
            "complete": self.complete,
            "answer": self.answer,
            "message": self.message,
        }


@dataclass
class WorkerResult:
    """A WorkerResult is what became of one worker: its operations, calls and ``status``: ``done``,
    ``killed``, ``died`` (on its own), ``timeout``, ``defect`` (``defect`` holds message, sent and
    received), ``refused`` (an action of ``core``: :meth:`Worker.finish` raises
    :class:`~memspec.conformance.verdict.findings.Refusal`), ``error`` (a harness bug;
    ``message`` has the traceback) or ``barrier`` (another worker never came)."""

    name: str
    status: WorkerStatus
    ops: list[OpRecord]
    calls: list[CallRecord] = field(default_factory=list)
    features: frozenset[str] = frozenset()
    message: str = ""
    defect: Broke | None = None
    exitcode: int | None = None
    store_pid: int | None = None

    @property
    def in_flight(self) -> OpRecord | None:
        """The operation that got no answer (``info``), if any."""
        return next((op for op in self.ops if op.type == OpType.INFO), None)

    def answer(self, index: int) -> Answer | None:
        """Returns the answer to operation ``index`` (``None`` if it got none)."""
        op = next((op for op in self.ops if op.index == index), None)
        return op.answer if op is not None else None

    def calls_during(self, index: int) -> list[CallRecord]:
        """Returns the interposed calls reported while operation ``index`` ran, in order."""
        return [call for call in self.calls if call.op == index]

    def expect_done(self) -> WorkerResult:
        """Returns self when every operation ran; raises BackendDefect (the backend broke,
        hung or died) or RuntimeError (a harness bug) otherwise."""
        if self.status == WorkerStatus.DONE:
            return self
        if self.status == WorkerStatus.ERROR:
            raise HarnessError(f"worker {self.name} failed:\n{self.message}")
        if self.status == WorkerStatus.GAP:
            raise AdapterGap(self.message)
        defect = self.defect or Broke(None, 0.0, "", None, None)
        raise BackendDefect(
            f"session {self.name}: {defect.message or self.message}",
            defect.sent,
            defect.received,
            clause=defect.clause,
        )


class Worker:
    """A Worker is one running worker process and what it has reported so far. As a context manager,
    or with :meth:`finish`, the process (and a command backend's) is killed and reaped."""

    def __init__(self, job: Job, barrier: Any = None, scheduled: bool = False) -> None:
        context = process_context()
        self.job = job
        self._receiver, sender = context.Pipe(duplex=False)
        self._turns_out: _Sender | None
        turnstile, self._turns_out = context.Pipe(duplex=False) if scheduled else (None, None)
        self.process = context.Process(
            target=run_job,
            args=(job, sender, barrier, turnstile, tempfile.gettempdir()),
            name=f"memspec-{job.name}",
            daemon=True,
        )
        self.process.start()
        sender.close()
        if turnstile is not None:
            turnstile.close()
        self.turns: list[Parked | Returned] = []
        self.ops: dict[int, OpRecord] = {}
        self.calls: list[CallRecord] = []
        self.opened: Opened | None = None
        self.status: WorkerStatus | None = None
        self.message = ""
        self.defect: Broke | None = None
        self.eof = False
        self.killed_by: WorkerStatus | None = None
        self.exitcode: int | None = None
        self.refusal: Refused | None = None
        self._result: WorkerResult | None = None

    # -- receiving --------------------------------------------------------------------------------

    def _take(self, message: Message) -> None:
        match message:
            case CallRecord():
                self.calls.append(message)
            case Parked() | Returned():
                self.turns.append(message)
            case Opened():
                self.opened = message
            case Invoked(index, at):
                request = self.job.operations[index]
                self.ops[index] = OpRecord(self.job.name, index, request, OpType.INVOKE, at)
            case Answered(index, at, said, answer) if index in self.ops:
                op = self.ops[index]
                op.type, op.complete, op.answer = said, at, answer
            case Refused(index, at):
                self.status, self.refusal = WorkerStatus.REFUSED, message
                self.ops[index].type, self.ops[index].complete = OpType.FAIL, at
            case Broke(index):
                if index in self.ops:
                    self.ops[index].type = OpType.INFO
                    self.ops[index].message = message.message
                if self.killed_by is None:
                    self.status, self.defect = WorkerStatus.DEFECT, message
            case Ended(status, text):
                self.status, self.message = status, text

    def pump(self, timeout: float) -> bool:
        """Receives every record that arrives within ``timeout`` seconds; returns whether any
        did. A worker that died mid-record ends the stream (``eof``)."""
        if self.eof:
            return False
        got = False
        try:
            ready = self._receiver.poll(timeout)
            while ready:
                self._take(self._receiver.recv())
                got = True
                ready = self._receiver.poll(0)
        except Exception:
            self.eof = True
        return got

    def wait_until(self, predicate: Callable[[Worker], bool], timeout: float) -> bool:
        """Receives records until ``predicate(self)`` holds (True) or ``timeout`` seconds pass or
        the worker ended (False, unless the predicate then holds)."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.eof:
                return predicate(self)
            self.pump(min(remaining, PUMP_POLL))
        return True

    def grant(self) -> bool:
        """Lets a scheduled worker make the call it is parked at; False if it is gone."""
        if self._turns_out is None:
            return False
        try:
            self._turns_out.send("go")
        except (OSError, ValueError):
            return False
        return True

    def invoked(self, index: int) -> bool:
        """Whether operation ``index`` has started."""
        return index in self.ops

    def completed(self, index: int) -> bool:
        """Whether operation ``index`` has been answered."""
        return index in self.ops and self.ops[index].type in (OpType.OK, OpType.FAIL)

    @property
    def ended(self) -> bool:
        """Whether the worker has sent its last record or its stream has closed."""
        return self.status is not None or self.eof

    # -- ending -----------------------------------------------------------------------------------

    def kill(self, reason: WorkerStatus = WorkerStatus.KILLED) -> None:
        """Sends SIGKILL to the backend process (command backends) and to the worker."""
        if self.exitcode is not None:
            return
        if self.killed_by is None:
            self.killed_by = WorkerStatus(reason)
        store_pid = self.opened.store_pid if self.opened else None
        if store_pid and store_pid != self.process.pid and self.process.is_alive():
            with suppress(ProcessLookupError, PermissionError):
                os.kill(store_pid, signal.SIGKILL)
        with suppress(Exception):
            self.process.kill()

    def finish(self, timeout: float) -> WorkerResult:
        """Waits up to ``timeout`` seconds for the worker to end, kills it if it has not, reaps
        it and returns its result (also on later calls). Raises :class:`Refusal` when the
        backend refused an action of ``core`` as unsupported, and :class:`AdapterGap` when
        memspec's adapter of the store could not map an answer: no check can judge the history
        of a session stopped there."""
        result = self._finished(timeout)
        if self.refusal is not None:
            raise Refusal(self.refusal.action, self.refusal.clauses, self.refusal.text)
        if result.status == WorkerStatus.GAP:
            raise AdapterGap(result.message)
        return result

    def _finished(self, timeout: float) -> WorkerResult:
        if self._result is not None:
            return self._result
        if not self.wait_until(lambda worker: worker.ended, timeout):
            self.kill(WorkerStatus.TIMEOUT)
        self.wait_until(lambda worker: worker.eof, REAP_TIMEOUT)
        self._reap()
        self._result = self._make_result(timeout)
        return self._result

    def _reap(self) -> None:
        self.process.join(REAP_TIMEOUT)
        if self.process.is_alive():
            self.kill(self.killed_by or WorkerStatus.TIMEOUT)
            self.process.join(REAP_TIMEOUT)
        self.exitcode = self.process.exitcode
        with suppress(OSError):
            self._receiver.close()
        if self._turns_out is not None:
            with suppress(OSError):
                self._turns_out.close()
        if self.exitcode is not None:
            # Releases the process's sentinel descriptor now rather than at garbage collection.
            self.process.close()

    def _make_result(self, timeout: float) -> WorkerResult:
        exitcode = self.exitcode
        # A defect reported after the harness's own kill is that kill's doing (_take ignores it).
        status = self.status or self.killed_by or WorkerStatus.DIED
        reasons = {
            "killed": "the harness killed the worker during this operation",
            "timeout": f"the worker had not finished within {timeout:g} s and was killed",
            "died": f"the worker died (exit code {exitcode}) during this operation"
            + self._kill_point(),
        }
        for op in self.ops.values():
            if op.type == OpType.INVOKE:
                op.type, op.message = OpType.INFO, reasons.get(status, self.message)
        return WorkerResult(
            name=self.job.name,
            status=status,
            ops=[self.ops[index] for index in sorted(self.ops)],
            calls=self.calls,
            features=frozenset(self.opened.features if self.opened else ()),
            message=self.message or reasons.get(status, ""),
            defect=self.defect,
            exitcode=exitcode,
            store_pid=self.opened.store_pid if self.opened else None,
        )

    def _kill_point(self) -> str:
        killed = [call for call in self.calls if (call.effect or "").startswith("kill")]
        if not killed:
            return ""
        call = killed[-1]
        when = (call.effect or "").split("-", 1)[1]
        return f", killed {when} {call.name} of {os.path.basename(call.path)}"

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._result is None:
            self.kill(WorkerStatus.KILLED)
            self._finished(0)


def run_session(job: Job, timeout: float = SESSION_TIMEOUT) -> WorkerResult:
    """Runs one job in a worker to its end (killing it after ``timeout`` seconds)."""
    with Worker(job) as worker:
        return worker.finish(timeout)


def run_together(jobs: Sequence[Job], timeout: float = SESSION_TIMEOUT) -> list[WorkerResult]:
    """Runs ``jobs`` in one worker each, released together by a start barrier once every
    session is open; returns their results in order. Workers still running after ``timeout``
    seconds are killed; if one cannot open its session, the barrier is broken for the others."""
    gate = process_context().Barrier(len(jobs)) if len(jobs) > 1 else None
    with _started(jobs, gate) as workers:
        deadline = time.monotonic() + timeout
        pending = list(workers)
        while pending and (remaining := deadline - time.monotonic()) > 0:
            ready = connection.wait([worker._receiver for worker in pending], timeout=remaining)
            for worker in pending:
                if worker._receiver in ready:
                    worker.pump(0)
            if gate is not None and any(w.opened is None and w.ended for w in workers):
                gate.abort()
            pending = [worker for worker in pending if not worker.ended]
        return [worker.finish(0 if worker in pending else REAP_TIMEOUT) for worker in workers]


@contextmanager
def _started(jobs: Sequence[Job], gate: Any) -> Iterator[list[Worker]]:
    with ExitStack() as stack:
        yield [stack.enter_context(Worker(job, gate)) for job in jobs]


def history(
    results: Sequence[WorkerResult], ops: Collection[str] | None = MUTATIONS
) -> list[HistoryRecord]:
    """Returns the operations of ``results`` whose ``op`` is in ``ops`` (mutations by default;
    ``None``: all) as history events ordered by time (:mod:`memspec.conformance.history.history`),
    ``process`` being the worker's index. An ``info`` event carries the invoke's time."""
    events: list[HistoryRecord] = []
    for process, result in enumerate(results):
        for op in result.ops:
            if ops is not None and op.request["op"] not in ops:
                continue
            events.append(
                {"type": "invoke", "process": process, "op": op.request, "time": op.invoke}
            )
            end = op.complete if op.complete is not None else op.invoke
            value = op.answer if op.answer is not None else Unanswered(message=op.message)
            events.append(
                {
                    "type": EVENT_TYPES[op.type],
                    "process": process,
                    "op": op.request,
                    "time": end,
                    "value": value,
                }
            )
    return sorted(events, key=lambda event: (event["time"], event["type"] != "invoke"))
