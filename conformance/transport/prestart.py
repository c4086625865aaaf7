"""A command backend's next process, started before the session that needs it.

Most of a short session is its process starting, so the harness starts the next one while the
current session runs. One spare is kept, for the command opened last once it has been opened twice;
it is ended when another command opens and at exit, and a forked child forgets it. A command that
must not start twice at once (strace) opens with ``prestart=False``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence

Command = tuple[tuple[str, ...], str, tuple[tuple[str, str], ...]]

_spare: tuple[Command, subprocess.Popen[str]] | None = None
_opened: set[Command] = set()
_lock = threading.Lock()  # sessions may be opened from several threads at once


def start(argv: Sequence[str], cwd: str, environment: Mapping[str, str]) -> subprocess.Popen[str]:
    """Starts one backend process, in a session of its own, with text pipes on stdio."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        bufsize=1,
        cwd=cwd,
        env=dict(environment),
        start_new_session=True,
    )


def take(
    argv: Sequence[str], cwd: str, environment: Mapping[str, str], prestart: bool = True
) -> subprocess.Popen[str]:
    """Returns a started process of the command (the spare if it is this command's and alive), then
    starts the next spare for a command opened before; without ``prestart`` it just starts. Raises
    OSError when the command cannot be started."""
    global _spare
    if not prestart:
        return start(argv, cwd, environment)
    command = (tuple(argv), cwd, tuple(sorted(environment.items())))
    with _lock:
        ready = None
        if _spare is not None and _spare[0] == command and _spare[1].poll() is None:
            ready, _spare = _spare[1], None
        _discard()
        process = ready or start(argv, cwd, environment)
        if command in _opened:
            with contextlib.suppress(OSError):
                _spare = (command, start(argv, cwd, environment))
        _opened.add(command)
    return process


def ready() -> subprocess.Popen[str] | None:
    """Returns the process kept ready, if there is one."""
    return None if _spare is None else _spare[1]


def discard(*, forget: bool = False) -> None:
    """Ends the spare, if there is one; with ``forget``, also forgets which commands were
    opened, so that none gets a spare before it is opened twice again."""
    with _lock:
        _discard()
        if forget:
            _opened.clear()


def _discard() -> None:
    global _spare
    if _spare is None:
        return
    process = _spare[1]
    _spare = None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _forget_in_child() -> None:
    global _spare, _lock
    _lock = threading.Lock()  # another thread of the parent may have held it
    if _spare is not None:
        for stream in (_spare[1].stdin, _spare[1].stdout, _spare[1].stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    _spare = None
    _opened.clear()


atexit.register(discard)
os.register_at_fork(after_in_child=_forget_in_child)
