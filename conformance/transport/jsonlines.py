"""The JSON Lines transport: one backend process per session, one JSON object per line.

:class:`CommandBackend` starts the command per session, sends ``open`` and one request per line, and
reads one answer per request; output that is not JSON, another ``id``, a death or silence past the
timeout is a ``BackendDefect`` and the process is killed (CONTRACT-*).
:func:`~memspec.conformance.transport.served.serve` exposes any Python backend over the same
protocol.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, NamedTuple, cast

from memspec.conformance.core.locations import backend_environment
from memspec.conformance.core.waits import CALL_TIMEOUT
from memspec.conformance.transport import prestart
from memspec.conformance.transport.backend import (
    Address,
    BackendDefect,
    Runs,
    Session,
    check_answer,
    request_problem,
)
from memspec.conformance.transport.wire import Answer, Request
from memspec.conformance.verdict.findings import ADAPTER_GAP_MARK, AdapterGap
from memspec.spec.errors import UsageError
from memspec.spec.targets import DEFAULT_LIMITS

STDERR_TAIL = 20
STDERR_DRAIN = 2.0
"""Seconds to wait, once a backend has ended, for the rest of what it wrote to stderr."""
ADAPTER_GAP_STATUS = 3
"""A backend that is memspec's own adapter of a store written elsewhere (Hermes' tool, a
Hermes-shaped class) ends with this status and a stderr line starting with ADAPTER_GAP_MARK when the
store answered something the adapter cannot map: :class:`AdapterGap`, never a guessed code."""
DECLINED = re.compile(r"^[a-z][a-z-]* feature not claimed: ")
"""How a backend says on stderr why it does not claim a feature it might have (Hermes' adapter:
``agent feature not claimed: ...``): certify prints each such line of its first session."""
SHOWN_LINE = 200
"""How many characters of a line that is not JSON a defect shows."""
EOF = object()
"""What :func:`read_output`'s queue holds after a process's last line of stdout."""


INVOCATION_DIR = "MEMSPEC_INVOCATION_DIR"


def _short(request: Request) -> str:
    return json.dumps(request, ensure_ascii=False)[:200]


def invocation_dir() -> str:
    """Returns the directory memspec was invoked from (certify runs pytest elsewhere)."""
    return os.environ.get(INVOCATION_DIR) or os.getcwd()


def _pump(stream: IO[str], lines: queue.Queue[object]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(EOF)


def _keep_tail(stream: IO[str], tail: deque[str]) -> None:
    for line in stream:
        tail.append(line.rstrip("\n"))


class Output(NamedTuple):
    """The output of a started process as two threads of its own read it: ``lines``, each line
    of its stdout as it comes (then :data:`EOF`); ``stderr``, the last :data:`STDERR_TAIL`
    lines of its stderr; ``stderr_reader``, the thread that reads them (join it to wait for
    the last lines of a process that has ended)."""

    lines: queue.Queue[object]
    stderr: deque[str]
    stderr_reader: threading.Thread


def read_output(process: subprocess.Popen[str]) -> Output:
    """Starts reading the stdout and stderr of ``process`` (started with text pipes, as
    :func:`.prestart.start` does) in daemon threads and returns where what they read goes."""
    assert process.stdout is not None and process.stderr is not None
    lines: queue.Queue[object] = queue.Queue()
    stderr: deque[str] = deque(maxlen=STDERR_TAIL)
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    reader = threading.Thread(target=_keep_tail, args=(process.stderr, stderr), daemon=True)
    reader.start()
    return Output(lines, stderr, reader)


def kill_process(process: subprocess.Popen[str]) -> None:
    """Ends ``process`` at once and waits for it."""
    if process.poll() is None:
        process.kill()
    process.wait()


def close_process(process: subprocess.Popen[str], wait: float) -> None:
    """Closes the stdin of ``process`` and waits ``wait`` seconds for it to end; kills it if it
    does not."""
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=wait)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        kill_process(process)


@dataclass
class CommandSession(Session):
    """A session served by one backend process speaking JSON Lines."""

    command: str
    root: Path
    limits: Mapping[str, int]
    timeout: float
    features: frozenset[str] = frozenset({"core"})
    name: str = ""
    version: str = ""
    cwd: str | None = None
    prestart: bool = True
    started: Callable[[subprocess.Popen[str]], None] | None = None
    process: subprocess.Popen[str] = field(init=False, repr=False)
    _lines: queue.Queue[object] = field(init=False, repr=False)
    _stderr: deque[str] = field(init=False, repr=False)
    _stderr_pump: threading.Thread = field(init=False, repr=False)
    _next_id: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise UsageError(
                f"--backend-cmd {self.command!r} is not a valid command: {error}"
            ) from None
        if not argv:
            raise UsageError("--backend-cmd is empty")
        try:
            self.process = prestart.take(
                argv, self.cwd or invocation_dir(), backend_environment(), self.prestart
            )
        except OSError as error:
            raise BackendDefect(
                f"could not start {argv[0]!r}: {error.strerror or error}", {"command": self.command}
            ) from None
        if self.started is not None:
            try:
                self.started(self.process)
            except BaseException:
                self.kill()
                raise
        self._lines, self._stderr, self._stderr_pump = read_output(self.process)
        opened = self._exchange(
            {
                "op": "open",
                "root": str(self.root),
                "memory_char_limit": self.limits["memory"],
                "user_char_limit": self.limits["user"],
            }
        )
        if not opened.get("ok"):
            why = f": {opened.get('message')}" if opened.get("message") else ""
            self.kill()  # a session that never opened leaves no process behind
            raise BackendDefect(
                f"the backend refused to open the root{why}", {"op": "open"}, opened
            )
        claimed = opened.get("features") or ["core"]
        if not isinstance(claimed, list) or not all(isinstance(f, str) for f in claimed):
            self.kill()
            raise BackendDefect(
                "open answered features that are not a list of str", {"op": "open"}, opened
            )
        self.features = frozenset(claimed)
        self.name = str(opened.get("backend") or self.command)
        self.version = str(opened.get("version") or "")

    def _defect(
        self, message: str, sent: Any, received: Any = None, *, hung: bool = False
    ) -> BackendDefect:
        self.kill()
        tail = "\n".join(self._stderr)
        if tail:
            message += f"\n--- stderr of the backend (last lines) ---\n{tail}"
        last = [line.strip() for line in self._stderr if line.strip()]
        return BackendDefect(message, sent, received, last[-1] if last else "", hung=hung)

    def _exchange(self, request: Request) -> Answer:
        request = {"id": self._next_id, **request}
        self._next_id += 1
        line = json.dumps(request)
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._defect(
                f"the backend exited (status {self.process.poll()}) before the "
                "request could be sent",
                request,
            ) from None
        try:
            received = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise self._defect(
                f"the backend did not answer within {self.timeout:g} s; raise "
                "--timeout if it is slow, not hung",
                request,
                hung=True,
            ) from None
        if received is EOF:
            status = self.process.wait(timeout=self.timeout)
            self._stderr_pump.join(STDERR_DRAIN)  # its last lines say why it ended
            gap = [line for line in self._stderr if line.startswith(ADAPTER_GAP_MARK)]
            if status == ADAPTER_GAP_STATUS and gap:
                self.kill()
                raise AdapterGap(f"{gap[-1].strip()} (answering {_short(request)})")
            raise self._defect(
                f"the backend exited with status {status} instead of answering", request
            )
        assert isinstance(received, str)
        try:
            answer = json.loads(received)
        except json.JSONDecodeError:
            line = received.rstrip("\n")
            shown = repr(line[:SHOWN_LINE]) + (
                f" ({len(line):,} chars)" if len(line) > SHOWN_LINE else ""
            )
            raise self._defect(
                f"the backend printed a line that is not JSON: {shown} (print only the JSON "
                "answers on stdout; log to stderr)",
                request,
                line,
            ) from None
        if not isinstance(answer, dict) or answer.get("id") != request["id"]:
            got = answer.get("id") if isinstance(answer, dict) else None
            raise self._defect(
                f"the answer carries id {got!r}, expected {request['id']}", request, answer
            )
        answer.pop("id")
        return check_answer(request["op"], request, answer, self.features)

    def request(self, op: str, **fields: Any) -> Answer:
        """Sends one request and returns the validated answer."""
        problem = request_problem(op, fields)
        if problem is not None:
            raise UsageError(problem)
        return self._exchange(cast(Request, {"op": op, **fields}))

    @property
    def declined(self) -> tuple[str, ...]:
        """The lines the backend wrote on stderr saying why it does not claim a feature
        (:data:`DECLINED`), once it has ended (read after :meth:`close`)."""
        if self.process.poll() is not None:
            self._stderr_pump.join(STDERR_DRAIN)
        return tuple(line.strip() for line in self._stderr if DECLINED.match(line))

    def kill(self) -> None:
        """Ends the backend process at once."""
        kill_process(self.process)

    def close(self) -> None:
        """Closes stdin and waits for the backend to exit; kills it if it does not."""
        close_process(self.process, self.timeout)


@dataclass
class CommandBackend:
    """A backend in any language, named by the command that starts one session.

    The command runs in the directory memspec was invoked from (taken when the backend is made), so
    a relative path in it means what the user typed. With ``prestart`` the next session's process
    starts while the current one runs (:mod:`.prestart`). ``started`` is called with each process
    before its ``open`` line (where strace attaches).
    """

    command: str
    timeout: float = CALL_TIMEOUT
    cwd: str = field(default_factory=invocation_dir)
    prestart: bool = True
    started: Callable[[subprocess.Popen[str]], None] | None = None
    runs: ClassVar[Runs] = Runs.COMMAND

    @property
    def label(self) -> str:
        """The name reports use."""
        return self.command

    def address(self) -> Address:
        """Returns the backend's command and the directory it runs in."""
        return Address(command=self.command, cwd=self.cwd)

    def open(self, root: Path, limits: Mapping[str, int] | None = None) -> CommandSession:
        """Starts one backend process on ``root``."""
        limits = {**DEFAULT_LIMITS, **(limits or {})}
        return CommandSession(
            self.command,
            root,
            limits,
            self.timeout,
            cwd=self.cwd,
            prestart=self.prestart,
            started=self.started,
        )
