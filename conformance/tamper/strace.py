"""A :class:`~memspec.conformance.tamper.interpose.Plan` carried out by ``strace`` on a
``--backend-cmd`` backend: the traces, faults and kill points of the fault, durability, lock
and crash checks (READ-6, READ-7, ATOMIC-1, ATOMIC-3, ATOMIC-4, LOCK-1..3, CRASH-1..3), for a
backend in any language.

One vocabulary with the interposition, calibrate-then-inject, and why it never hangs:
docs/architecture.md ("strace runs").
"""

from __future__ import annotations

import contextlib
import errno as errno_module
import functools
import itertools
import os
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memspec.conformance.core.waits import (
    ATTACH_POLL,
    ATTACH_TIMEOUT,
    STRACE_PROBE_TIMEOUT,
    TRACED_CALL_TIMEOUT,
)
from memspec.conformance.processes.workers import HARNESS_STEPS, Job, WorkerResult
from memspec.conformance.tamper.calls import CallRecord, Invocation, describe_call
from memspec.conformance.tamper.fstrace import (
    QUIET,
    SECCOMP_BPF,
    STRACE_ARGUMENTS,
    STRACE_FAULT_ARGUMENTS,
    StraceTrace,
    calls_from_strace,
    read_strace,
)
from memspec.conformance.tamper.interpose import Fault, Plan
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import HarnessError, Unverified

ATTEMPTS = 2
_runs = itertools.count()

Drive = Callable[[Job], WorkerResult]
"""Runs a job in a worker to its end and returns the result (the check's way of driving it)."""


@functools.cache
def strace_problem() -> str | None:
    """Returns why strace cannot trace here (missing, or ptrace not permitted), or ``None``."""
    if shutil.which("strace") is None:
        return "strace is not installed, so a --backend-cmd backend's calls cannot be recorded"
    try:
        probe = subprocess.run(
            ["strace", SECCOMP_BPF, QUIET, *STRACE_FAULT_ARGUMENTS, "-o", os.devnull, "true"],
            capture_output=True,
            text=True,
            timeout=STRACE_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"strace could not run: {error}"
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return f"strace is not permitted to trace here ({reason})"
    return None


def require_strace() -> None:
    """Raises Unverified, with the reason, where strace cannot trace: the checks that need it
    judge nothing, and their clauses read "not verified" until strace is there."""
    problem = strace_problem()
    if problem is not None:
        raise Unverified(problem)


# -- the plan, as strace options ------------------------------------------------------------


@dataclass(frozen=True)
class Injection:
    """An Injection is one fault as strace carries it out: at invocation ``nth`` of ``syscall``
    (per thread), raise ``errno`` or kill (``action`` of the Fault); ``target`` is the call
    record the fault selected in the recording, ``thread`` its thread there."""

    syscall: str
    nth: int
    action: str
    errno: int
    target: CallRecord
    thread: int

    @property
    def at_the_call(self) -> bool:
        """Whether a ``kill-after`` is made at the target call's own entry (after a sync), not
        at the next call."""
        return self.action == "kill-after" and self.target.name in SYNC_CALLS

    def options(self) -> tuple[str, ...]:
        """Returns the strace options that carry it out."""
        if self.action == "raise":
            effect = f"error={errno_module.errorcode[self.errno]}"
        else:
            effect = "signal=SIGKILL"
        return ("-e", f"inject={self.syscall}:{effect}:when={self.nth}")

    def describe(self) -> str:
        """Returns the fault in a few words: ``EIO on read MEMORY.md``."""
        what = (
            errno_module.errorcode.get(self.errno, str(self.errno))
            if self.action == "raise"
            else self.action
        )
        return f"{what} on {describe_call(self.target)} ({self.syscall} #{self.nth})"


SYNC_CALLS = frozenset({"fsync", "fdatasync"})
"""Calls after which a kill is made at the call's own entry (see ``kill-after`` above)."""


def selected(records: Sequence[CallRecord], fault: Fault) -> CallRecord | None:
    """Returns the call record ``fault`` acts on: the ``nth`` its match selects, or None."""
    chosen = [record for record in records if fault.match.matches(record)]
    return chosen[fault.nth - 1] if len(chosen) >= fault.nth else None


def plan_injection(
    trace: StraceTrace, records: Sequence[CallRecord], fault: Fault
) -> Injection | None:
    """Returns how strace injects ``fault`` into a run like the recorded one (``records``: the
    trace's records with job operation indices), or None when the fault selects no call.
    Raises NotApplicable when strace's per-thread count would hit another thread too."""
    if fault.times != 1:
        raise HarnessError(f"strace injects a fault once, not {fault.times} times")
    target = selected(records, fault)
    if target is None:
        return None
    invocation = _invocation(target)
    syscall, nth = invocation.syscall, invocation.nth
    if fault.action == "kill-after" and target.name not in SYNC_CALLS:
        following = invocation.next
        if following is None:
            raise Unverified(
                f"no traced call followed {describe_call(target)} in its thread, so strace "
                "has no call to kill the backend at right after it"
            )
        syscall, nth = following
    others = sorted(
        tid
        for (tid, name), count in trace.counts.items()
        if name == syscall and count >= nth and tid != invocation.tid
    )
    if others:
        raise Unverified(
            f"{fault.action} at {describe_call(target)} cannot be placed with strace: it counts "
            f"{syscall} calls per thread, and thread {others[0]} also makes a call #{nth}, "
            "which the injection would hit too"
        )
    return Injection(syscall, nth, fault.action, fault.errno, target, invocation.tid)


def _invocation(record: CallRecord) -> Invocation:
    """Returns where strace saw the call of ``record``, a record strace's parser made."""
    invocation = record.details.strace
    if invocation is None:
        raise HarnessError(f"the call record {record} is not one of strace's")
    return invocation


def _same_call(one: CallRecord, other: CallRecord) -> bool:
    """Whether two records are the same call of two runs (a temp file's name changes, and a
    recording may run on a copy of the root)."""
    return (
        one.name == other.name
        and one.kind == other.kind
        and one.op == other.op
        and (
            one.kind in ("temp", "dir")
            or os.path.basename(one.path) == os.path.basename(other.path)
        )
    )


def acted_on(
    trace: StraceTrace, records: Sequence[CallRecord], injection: Injection
) -> tuple[CallRecord | None, str]:
    """Returns the call record the injected run shows the fault on (for ``kill-after``, the
    call right before the kill), or None, and the invocations strace acted at, in words."""
    hits = trace.injected if injection.action == "raise" else trace.killed
    if injection.action != "raise":
        # A process kill ends every thread; another thread inside a traced call then shows as
        # killed there too. strace acted only at the injection's own invocation.
        own = [hit for hit in hits if hit[1:] == (injection.syscall, injection.nth)]
        hits = own or hits
    words = ", ".join(f"{syscall} #{nth}" for _, syscall, nth in hits) or "no call"
    if len(hits) != 1:
        return None, f"strace acted {len(hits)} times ({words})"
    tid, syscall, nth = hits[0]
    for record in records:
        invocation = _invocation(record)
        if injection.action == "kill-after" and not injection.at_the_call:
            if invocation.tid == tid and invocation.next == (syscall, nth):
                return record, words
        elif (invocation.tid, invocation.syscall, invocation.nth) == hits[0]:
            return record, words
    return None, f"strace acted on {words}, a call outside the root"


def landed(trace: StraceTrace, records: Sequence[CallRecord], injection: Injection) -> str | None:
    """Returns None when the injected run shows the fault on the planned call, else what it
    shows instead."""
    return _missed(*acted_on(trace, records, injection), injection)


def _missed(record: CallRecord | None, words: str, injection: Injection) -> str | None:
    """Returns None when strace acted on ``record``, the planned call, else where it acted."""
    planned = describe_call(injection.target)
    if record is None:
        return f"{words} (planned: {planned})"
    if not _same_call(record, injection.target):
        return (
            f"strace acted on {describe_call(record)} during operation {record.op} "
            f"(planned: {planned} during operation {injection.target.op})"
        )
    return None


# -- running a job under strace -----------------------------------------------------------


@dataclass(frozen=True)
class TracedJob:
    """A TracedJob is a command backend's job rewritten to run under strace: ``job`` runs it,
    ``output`` is where strace writes, ``original`` the job as the check made it."""

    job: Job
    output: Path
    original: Job
    initial: dict[str, int]


def traced(job: Job, directory: Path, options: Sequence[str] = ()) -> TracedJob:
    """Returns ``job`` (a command backend's) to run under strace with ``options`` (an
    injection's), its output in ``directory``."""
    backend = job.backend
    output = directory / f"strace-{job.name}-{next(_runs)}.txt"
    signals = any("signal=" in option for option in options)
    command = strace_backend(backend, (*STRACE_FAULT_ARGUMENTS, *options), output, not signals)
    initial = {name: ino for name, (ino, _, _) in root_files(job.root).items()}
    return TracedJob(replace(job, backend=command, plan=None), output, job, initial)


def strace_backend(
    backend: CommandBackend, arguments: Sequence[str], output: Path, seccomp: bool = True
) -> CommandBackend:
    """Returns ``backend`` with each session's process traced by strace with ``arguments``, writing
    to ``output``. Where ptrace permits (:func:`attach_problem`) strace attaches once the process
    waits for its ``open`` line, so its start-up is not traced; elsewhere it starts the process,
    with :data:`SECCOMP_BPF` where ``seccomp``, and never as a prestarted spare."""
    timeout = max(backend.timeout, TRACED_CALL_TIMEOUT)
    if attach_problem() is None:
        attach = functools.partial(attach_strace, (*arguments, "-o", str(output)))
        return replace(backend, timeout=timeout, started=attach)
    fast = (SECCOMP_BPF,) if seccomp else ()
    prefix = shlex.join(["strace", *fast, QUIET, *arguments, "-o", str(output), "--"])
    return CommandBackend(f"{prefix} {backend.command}", timeout, cwd=backend.cwd, prestart=False)


ATTACH_QUIET = "--quiet=personality,exit"
"""strace's messages off but the one that says it has attached (on its standard error)."""
IDLE_WAIT = 10.0
"""Longest wait for a process to wait for input before strace attaches to it anyway."""


def attach_strace(arguments: Sequence[str], process: subprocess.Popen[str]) -> None:
    """Attaches strace with ``arguments`` to ``process``, its threads and its children once they
    wait for the ``open`` line, and returns once every call they make is traced (attaching wakes a
    sleeping thread, so it waits until they wait again), so that calls are counted from the same
    place in every run. Raises HarnessError when strace cannot attach to a running process."""
    _until_waiting(process, IDLE_WAIT)
    tree = _process_tree(process.pid)
    strace = subprocess.Popen(
        ["strace", ATTACH_QUIET, *arguments, *(f"-p{pid}" for pid in tree)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: select() must see every line that is not read yet
        start_new_session=True,
    )
    assert strace.stderr is not None
    said: list[str] = []
    attached = 0
    deadline = time.monotonic() + ATTACH_TIMEOUT
    while attached < len(tree):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([strace.stderr], [], [], left)[0]:
            break
        raw = strace.stderr.readline()
        if not raw:
            break
        line = raw.decode("utf-8", "replace").strip()
        if " attached" in line:
            attached += 1
        else:
            said.append(line)
    threading.Thread(target=_reap, args=(strace,), daemon=True).start()
    if attached == len(tree):
        _until_waiting(process, ATTACH_TIMEOUT)
        return
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        strace.kill()
    words = "; ".join(said)
    raise HarnessError(
        f"strace could not attach to the backend's process {process.pid}: "
        f"{words or f'it said nothing in {ATTACH_TIMEOUT:.0f} s'}"
    )


def _until_waiting(process: subprocess.Popen[str], seconds: float) -> None:
    """Waits until ``process`` and its children wait for input (every thread asleep, one main thread
    reading its standard input, or all asleep for :data:`ASLEEP_FOR`), until it has ended, or
    ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    since = None
    while process.poll() is None and time.monotonic() < deadline:
        # The processes a wrapper started are looked up only once it sleeps itself.
        tree = _process_tree(process.pid) if _sleeping([process.pid]) else [process.pid]
        if not _sleeping(tree):
            since = None
        elif any(_reads_stdin(pid) for pid in tree) and _sleeping(tree):
            return
        else:
            since = since or time.monotonic()
            if time.monotonic() - since >= ASLEEP_FOR:
                return
        time.sleep(ATTACH_POLL)


ASLEEP_FOR = 0.05
"""How long every thread of a process must sleep to count as waiting, when no main thread is
in a call on its standard input."""


def _process_tree(pid: int) -> list[int]:
    """Returns ``pid`` and the processes it started, and they started (from ``/proc``)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(f"/proc/{entry}/stat")
        if fields:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    tree = [pid]
    for member in tree:
        tree += parents.get(member, [])
    return tree


def _reads_stdin(pid: int) -> bool:
    """Whether the main thread of ``pid`` is in a system call on descriptor 0."""
    try:
        with open(f"/proc/{pid}/syscall") as call:
            fields = call.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] != "-1" and fields[1] == "0x0"


def _sleeping(pids: Sequence[int]) -> bool:
    """Whether every thread of the processes ``pids`` sleeps (state ``S`` in ``/proc``)."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return False
        for task in tasks:
            fields = _stat_fields(f"/proc/{pid}/task/{task}/stat")
            if fields and fields[0] != b"S":
                return False
    return True


def _stat_fields(path: str) -> list[bytes]:
    """Returns the fields of a ``/proc`` stat file after the command name (state, parent...),
    or none when the process or thread is gone."""
    try:
        with open(path, "rb") as stat:
            text = stat.read()
    except OSError:
        return []
    return text[text.rindex(b")") + 2 :].split()


def _reap(strace: subprocess.Popen[bytes]) -> None:
    """Reads strace's standard error to its end (so that strace never blocks on it) and reaps
    it once the traced process has ended."""
    assert strace.stderr is not None
    for _ in strace.stderr:
        pass
    strace.wait()


@functools.cache
def attach_problem() -> str | None:
    """Returns why strace cannot attach to a process it did not start here (ptrace forbids it,
    as in many containers), or ``None``; :func:`strace_backend` then starts the process under
    strace."""
    problem = strace_problem()
    if problem is not None:
        return problem
    sleeper = subprocess.Popen(
        ["sleep", "60"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        attach_strace(("-o", os.devnull), sleeper)
    except HarnessError as error:
        return str(error)
    finally:
        sleeper.kill()
        sleeper.wait()
    return None


def finish_traced(run: TracedJob, result: WorkerResult) -> tuple[WorkerResult, StraceTrace]:
    """Ends what is left of the run's process group and returns ``result`` with the strace
    calls (operation indices of the job) as its ``calls``, and the trace."""
    end_process_group(result.store_pid)
    try:
        text = run.output.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as error:
        if result.status in ("defect", "died", "killed", "timeout"):
            text = ""
        else:
            raise HarnessError(f"strace wrote no output to {run.output}: {error}") from None
    try:
        trace = read_strace(text, os.path.realpath(run.job.root), run.initial)
    except (ValueError, IndexError, KeyError) as error:
        raise HarnessError(
            f"the strace output {run.output} could not be read ({error!r}); "
            "keep the file (--keep-temp) and report it"
        ) from None
    requests = [i for i, op in enumerate(run.original.operations) if op["op"] not in HARNESS_STEPS]

    def job_index(number: int | None) -> int | None:
        return requests[number] if number is not None and 0 <= number < len(requests) else None

    trace.records = [replace(record, op=job_index(record.op)) for record in trace.records]
    return replace(result, calls=trace.records), trace


def end_process_group(pid: int | None) -> None:
    """Kills the process group ``pid`` leads: the backend's, with strace where strace started
    it (the backend runs in a session of its own)."""
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def run_traced(
    job: Job, directory: Path, drive: Drive, options: Sequence[str] = ()
) -> tuple[WorkerResult, StraceTrace]:
    """Runs a command backend's job under strace to its end with ``drive``; returns the result
    (with calls) and the trace."""
    run = traced(job, directory, options)
    return finish_traced(run, drive(run.job))


# -- the root, put back --------------------------------------------------------------------


def root_files(root: Path) -> dict[str, tuple[int, bytes, int]]:
    """Returns the regular files directly in ``root``: name -> (inode, bytes, mode)."""
    files = {}
    with os.scandir(root) as listing:
        for entry in listing:
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                files[entry.name] = (info.st_ino, Path(entry.path).read_bytes(), info.st_mode)
    return files


def restore_root(root: Path, files: Mapping[str, tuple[int, bytes, int]]) -> None:
    """Makes ``root`` hold exactly ``files`` again (as :func:`root_files` returned them)."""
    with os.scandir(root) as listing:
        for entry in listing:
            if entry.name not in files:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
    for name, (_, data, mode) in files.items():
        path = root / name
        path.write_bytes(data)
        os.chmod(path, mode & 0o7777)


# -- the entry points of the capability (:mod:`memspec.conformance.tamper.capability`) ----------


def run_planned(job: Job, directory: Path, drive: Drive) -> WorkerResult:
    """Runs a command backend's ``job`` to its end with its plan carried out by strace (module
    docs); returns the worker's result, whose ``calls`` are the plan's call records (a call a
    fault acted on has ``effect``). Raises NotApplicable where strace cannot run or a fault
    cannot be placed."""
    require_strace()
    plan = job.plan or Plan()
    if len(plan.faults) > 1:
        raise HarnessError("strace carries out one fault per run")
    if not plan.faults:
        return run_traced(job, directory, drive)[0]
    fault = plan.faults[0]
    before = root_files(job.root)
    problems = []
    for _ in range(ATTEMPTS):
        recording, trace = run_traced(job, directory, drive)
        injection = plan_injection(trace, recording.calls, fault)
        if injection is None:
            return recording
        restore_root(job.root, before)
        result, injected = run_traced(job, directory, drive, injection.options())
        problem = landed(injected, result.calls, injection)
        if problem is None:
            return result
        problems.append(problem)
        restore_root(job.root, before)
    raise Unverified(
        f"{fault.action} ({errno_module.errorcode.get(fault.errno, '')}) could not be placed on "
        f"the planned call with strace in {ATTEMPTS} attempts, the backend's calls differ from "
        f"run to run: {'; '.join(problems)}"
    )


@dataclass(frozen=True)
class Killed:
    """A Killed is one run of a job killed at a planned step: ``missed`` says where the kill landed
    instead, or that strace killed nothing (still judged), ``unplaced`` that no step was selected
    (run as it is), ``outside`` that it landed outside the fault's operation (not judged)."""

    result: WorkerResult
    missed: str | None = None
    unplaced: bool = False
    outside: str | None = None


def kill_planned(job: Job, fault: Fault, directory: Path, drive: Drive) -> Killed:
    """Kills a command backend's ``job`` at the step ``fault`` (a kill) selects, with strace:
    the job is first recorded on a copy of the root — what an earlier crash left changes the
    calls before the fault's operation, and so strace's count — then run with the injection."""
    copy = Path(tempfile.mkdtemp(dir=directory))
    restore_root(copy, root_files(job.root))
    recording = replace(job, root=copy, name=f"{job.name}-recorded")
    recorded, trace = run_traced(recording, directory, drive)
    injection = plan_injection(trace, recorded.calls, fault)
    if injection is None:
        return Killed(run_traced(job, directory, drive)[0], unplaced=True)
    result, killed = run_traced(job, directory, drive, injection.options())
    return killed_where(result, killed, injection, fault)


def killed_where(
    result: WorkerResult, trace: StraceTrace, injection: Injection, fault: Fault
) -> Killed:
    """Returns what became of a run ``injection`` was to kill (``trace``: strace's record of it).
    A run strace did not kill missed its step: it ran as it is (to its end, or until the harness
    stopped it), and is judged so. A kill outside the fault's operation is not judged."""
    if not trace.killed:
        ended = "ran to its end" if result.status == "done" else f"ended {result.status}"
        planned = describe_call(injection.target)
        return Killed(result, missed=f"strace did not kill it at {planned}, the session {ended}")
    record, words = acted_on(trace, result.calls, injection)
    if record is None or record.op != fault.match.op:
        return Killed(result, outside=words)
    return Killed(result, missed=_missed(record, words, injection))


def record_session(job: Job, directory: Path) -> tuple[list[CallRecord], list[Any]]:
    """Runs a command backend's ``job`` (requests only) in one session under strace, from the
    harness's process; returns the call records, with the data a crash-state generator needs,
    and the answers."""
    require_strace()
    initial = {name: ino for name, (ino, _, _) in root_files(job.root).items()}
    output = Path(tempfile.mkdtemp(dir=directory)) / "strace.txt"
    session = strace_backend(job.backend, STRACE_ARGUMENTS, output).open(job.root, job.limits)
    try:
        answers = []
        for request in job.operations:
            fields = {key: value for key, value in request.items() if key != "op"}
            answers.append(session.request(request["op"], **fields))
    finally:
        session.close()
    text = output.read_text(encoding="utf-8", errors="surrogateescape")
    return calls_from_strace(text, os.path.realpath(job.root), initial), answers
