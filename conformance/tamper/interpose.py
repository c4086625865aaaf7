"""Interposition of the file-system calls a Python backend makes, inside one worker process.

What is interposed, which calls count and the limits: docs/architecture.md ("Interposition").
"""

from __future__ import annotations

import builtins
import contextlib
import errno as errno_module
import fcntl
import fnmatch
import io
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memspec.conformance.tamper.calls import CallRecord, Details
from memspec.spec.root_files import NAMED_KINDS, file_kind

KINDS = frozenset({"dir", "data", "lock", "backup", "temp"})
DATA_CALLS = frozenset({"read", "write", "pwrite", "flush", "fsync", "fdatasync", "ftruncate"})
"""Calls that move or sync a file's bytes."""
NAME_CALLS = frozenset({"open", "close", "replace", "rename", "unlink", "flock", "lockf"})
"""Calls that open, name, unname or lock files."""
CALLS = DATA_CALLS | NAME_CALLS
DATA_DETAILS = {
    "ino": "the inode number of the file or directory the call acts on (after an open: the one "
    "opened; a rename: the source's; an unlink: the one unlinked)",
    "offset": "where a write starts (lseek position, pwrite's offset, the file object's tell)",
    "hex": "the bytes a write hands over, in hex (text-mode file objects: encoded)",
    "written": "how many bytes a write reported written",
    "length": "the size a truncate sets",
    "replaced_ino": "the inode a rename replaced at its destination",
}
"""The details a hook with ``data`` gets (and that a ``data`` plan records), beyond ``flags``
and ``mode`` of an open, which every trace carries."""
ACTIONS = frozenset({"raise", "kill-before", "kill-after"})
_DELETED = " (deleted)"


class Hook:
    """A Hook is told about every reported call; the base class lets everything through.

    ``before`` runs before the real call and may raise an ``OSError`` in its place or end the
    process; ``after`` runs after it, with the exception it raised, if any. Both run with
    interposition suspended. A hook whose ``data`` is true also gets :data:`DATA_DETAILS` in
    ``details``, completed before ``after`` runs.
    """

    data: bool = False

    def before(self, call: CallRecord) -> None:
        """Called right before ``call`` is made."""

    def after(self, call: CallRecord, error: BaseException | None) -> None:
        """Called right after ``call`` returned (``error`` is ``None``) or raised."""


@dataclass(frozen=True)
class Match:
    """A Match selects calls by name, kind of path, file name (an ``fnmatch`` pattern on the base
    name) and operation; an empty ``calls`` or ``kinds`` matches all: ``Match.of("write",
    kinds=("temp",), op=4)``."""

    calls: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    name: str | None = None
    op: int | None = None

    def __post_init__(self) -> None:
        unknown = (set(self.calls) - CALLS) | (set(self.kinds) - KINDS)
        if unknown:
            raise ValueError(
                f"unknown call names or kinds {sorted(unknown)}; calls are {sorted(CALLS)}, "
                f"kinds {sorted(KINDS)}"
            )

    @classmethod
    def of(
        cls,
        *calls: str,
        kinds: tuple[str, ...] = (),
        name: str | None = None,
        op: int | None = None,
    ) -> Match:
        """Returns the Match of ``calls`` (names) with the given filters."""
        return cls(frozenset(calls), frozenset(kinds), name, op)

    def matches(self, call: CallRecord) -> bool:
        """Whether ``call`` is selected."""
        return (
            (not self.calls or call.name in self.calls)
            and (not self.kinds or call.kind in self.kinds)
            and (self.name is None or fnmatch.fnmatchcase(os.path.basename(call.path), self.name))
            and (self.op is None or call.op == self.op)
        )


@dataclass(frozen=True)
class Fault:
    """A Fault acts at the ``nth`` (1-based) call that ``match`` selects, ``times`` times in a row:
    ``"raise"`` an ``OSError`` with ``errno`` instead of the call, or ``"kill-before"`` /
    ``"kill-after"`` the real call with ``SIGKILL``."""

    match: Match
    action: str = "raise"
    errno: int = errno_module.EIO
    nth: int = 1
    times: int = 1

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a fault's action is one of {sorted(ACTIONS)}, got {self.action!r}")
        if self.nth < 1 or self.times < 1:
            raise ValueError(f"nth and times count from 1, got nth={self.nth} times={self.times}")


@dataclass(frozen=True)
class Plan:
    """A Plan says what a worker's interposition does: trace calls, inject faults, or both. Plans
    are frozen and picklable, so they travel to worker processes.

    With ``trace`` every reported call is sent as a
    :class:`~memspec.conformance.tamper.calls.CallRecord` (a call a fault acts on always is, its
    ``effect`` named). With ``data`` each also carries :data:`DATA_DETAILS` and is sent once it has
    returned, with ``error``, so a crash-state generator can replay it.
    """

    faults: tuple[Fault, ...] = ()
    trace: bool = True
    data: bool = False


class PlanHook(Hook):
    """The Hook that carries out a :class:`Plan`, sending records through ``emit``; the worker sets
    ``op`` to the operation it runs."""

    def __init__(self, plan: Plan, emit: Callable[[CallRecord], None]) -> None:
        self.plan = plan
        self.emit = emit
        self.op: int | None = None
        self.data = plan.data
        self._counts = [0] * len(plan.faults)
        self._kill_after: set[int | None] = set()
        self._pending: dict[int | None, CallRecord] = {}

    def before(self, call: CallRecord) -> None:
        """Counts ``call`` against each fault, records it and acts on it."""
        call = replace(call, op=self.op)
        acting: Fault | None = None
        for index, fault in enumerate(self.plan.faults):
            if fault.match.matches(call):
                self._counts[index] += 1
                if acting is None and fault.nth <= self._counts[index] < fault.nth + fault.times:
                    acting = fault
        effect = None
        if acting is not None:
            effect = (
                errno_module.errorcode.get(acting.errno, str(acting.errno))
                if acting.action == "raise"
                else acting.action
            )
        if self.plan.trace and self.data and not effect:
            self._pending[call.seq] = call
        elif self.plan.trace or effect:
            self.emit(replace(call, effect=effect))
        if acting is None:
            return
        if acting.action == "raise":
            raise OSError(acting.errno, os.strerror(acting.errno), call.path)
        if acting.action == "kill-before":
            kill_self()
        self._kill_after.add(call.seq)

    def after(self, call: CallRecord, error: BaseException | None) -> None:
        """Sends a call deferred by a ``data`` plan, with the details known once it returned;
        kills the process after a call planned ``kill-after``."""
        pending = self._pending.pop(call.seq, None)
        if pending is not None:
            self.emit(replace(pending, details=call.details, error=error_name(error)))
        if call.seq in self._kill_after:
            kill_self()


def error_name(error: BaseException | None) -> str | None:
    """Returns ``None`` for no error, else its errno name (``"ENOENT"``) or its class name."""
    if error is None:
        return None
    number = getattr(error, "errno", None)
    if isinstance(number, int):
        return errno_module.errorcode.get(number, str(number))
    return type(error).__name__


def path_kind(path: str | None, root: str) -> str | None:
    """Returns the kind (:data:`KINDS`) of the absolute ``path`` in the real path ``root``:
    ``dir`` for the root itself, ``data``/``lock``/``backup`` by name, ``temp`` for any other
    file in or below it; ``None`` outside the root. A ``" (deleted)"`` suffix (``/proc``) is
    ignored."""
    if path is None:
        return None
    if path.endswith(_DELETED):
        path = path[: -len(_DELETED)]
    if path == root:
        return "dir"
    head, tail = os.path.split(path)
    if head == root:
        kind = file_kind(tail)
        # Temps of any name and sidecars are one kind here: what a Match calls "temp".
        return kind if kind in NAMED_KINDS else "temp"
    if path.startswith(root + os.sep):
        return "temp"
    return None


def kill_self() -> None:
    """Ends this process at once with SIGKILL, as ``kill -9`` would (no cleanup runs)."""
    os.kill(os.getpid(), signal.SIGKILL)


def _fd_of(target: Any) -> int | None:
    if isinstance(target, int):
        return target
    fileno = getattr(target, "fileno", None)
    if callable(fileno):
        try:
            return int(fileno())
        except (OSError, ValueError):
            return None
    return None


def fd_path(fd: Any) -> str | None:
    """Returns the path ``fd`` (an int or an object with ``fileno``) refers to, via /proc."""
    number = _fd_of(fd)
    if number is None:
        return None
    try:
        return os.readlink(f"/proc/self/fd/{number}")
    except OSError:
        return None


class Interposer:
    """An Interposer wraps the file-system calls of this process for one root: ``install()`` and
    ``uninstall()``, at most one per process; harness code inside the worker wraps its own I/O in
    :meth:`suspended`."""

    _installed: Interposer | None = None

    def __init__(self, root: Path | str, hook: Hook) -> None:
        self.root = os.path.realpath(root)
        self.hook = hook
        self._local = threading.local()
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._saved: list[tuple[Any, str, Any]] = []

    # -- installation -------------------------------------------------------------------------

    def install(self) -> Interposer:
        """Replaces the interposed attributes (raises RuntimeError if one is installed)."""
        if Interposer._installed is not None:
            raise RuntimeError("an Interposer is already installed in this process")
        file_open = self._wrap_io_open(io.open)
        replacements: list[tuple[Any, str, Any]] = [
            (os, "open", self._wrap_os_open(os.open)),
            (os, "read", self._wrap_fd("read", os.read, size_arg=1)),
            (os, "pread", self._wrap_fd("read", os.pread, size_arg=1)),
            (os, "write", self._wrap_fd("write", os.write, data_arg=1)),
            (os, "pwrite", self._wrap_fd("pwrite", os.pwrite, data_arg=1)),
            (os, "fsync", self._wrap_fd("fsync", os.fsync)),
            (os, "fdatasync", self._wrap_fd("fdatasync", os.fdatasync)),
            (os, "ftruncate", self._wrap_fd("ftruncate", os.ftruncate)),
            (os, "close", self._wrap_fd("close", os.close)),
            (os, "replace", self._wrap_rename("replace", os.replace)),
            (os, "rename", self._wrap_rename("rename", os.rename)),
            (os, "unlink", self._wrap_unlink(os.unlink)),
            (os, "remove", self._wrap_unlink(os.remove)),
            (fcntl, "flock", self._wrap_lock("flock", fcntl.flock)),
            (fcntl, "lockf", self._wrap_lock("lockf", fcntl.lockf)),
            (io, "open", file_open),
            (builtins, "open", file_open),
        ]
        for module, name, wrapper in replacements:
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, wrapper)
        Interposer._installed = self
        return self

    def uninstall(self) -> None:
        """Puts every original attribute back."""
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved.clear()
        if Interposer._installed is self:
            Interposer._installed = None

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Lets every call of this thread through unreported while the block runs."""
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    # -- paths ------------------------------------------------------------------------------------

    def _bypassed(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _arg_path(self, path: Any, dir_fd: int | None = None) -> str | None:
        if isinstance(path, int):
            return fd_path(path)
        try:
            text = os.fsdecode(os.fspath(path))
        except TypeError:
            return None
        if dir_fd is not None and not os.path.isabs(text):
            base = fd_path(dir_fd)
            if base is None:
                return None
            text = os.path.join(base, text)
        full = os.path.abspath(text)
        head, tail = os.path.split(full)
        joined = os.path.join(os.path.realpath(head), tail) if tail else os.path.realpath(full)
        if joined != self.root and os.path.realpath(joined) == self.root:
            return self.root
        return joined

    def kind_of(self, path: str | None) -> str | None:
        """Returns the kind of ``path`` in the root, or ``None`` when it is outside the root."""
        return path_kind(path, self.root)

    # -- the core ---------------------------------------------------------------------------------

    def intercept(
        self,
        name: str,
        path: str | None,
        details: Details,
        call: Callable[[], Any],
        finish: Callable[[Details, Any], Details] | None = None,
    ) -> Any:
        """Reports ``call`` (a thunk making the real call) to the hook when ``path`` is in the
        root, makes it, and returns its result. For a hook with ``data``, ``finish`` adds to
        ``details`` what is known from the result (the inode an open opened, bytes written)."""
        kind = self.kind_of(path)
        if kind is None:
            return call()
        assert path is not None
        if path.endswith(_DELETED):
            path = path[: -len(_DELETED)]
            details = replace(details, deleted=True)
        with self._seq_lock:
            seq = self._seq
            self._seq += 1
        event = CallRecord(name, path, kind, details, seq=seq)
        with self.suspended():
            self.hook.before(event)
        try:
            result = call()
        except BaseException as error:
            with self.suspended():
                self.hook.after(event, error)
            raise
        with self.suspended():
            if finish is not None and self.hook.data:
                event = replace(event, details=finish(event.details, result))
            self.hook.after(event, None)
        return result

    def wants_data(self) -> bool:
        """Whether the hook wants the data details (see :data:`DATA_DETAILS`)."""
        return self.hook.data

    def fd_ino(self, fd: Any) -> int | None:
        """Returns the inode of descriptor ``fd`` (``None`` when it is closed)."""
        number = _fd_of(fd)
        if number is None:
            return None
        try:
            return os.fstat(number).st_ino
        except OSError:
            return None

    def opened(self, details: Details, fd: Any) -> Details:
        """Returns the details of an open with the inode it opened (``fd``, what it returned)."""
        return replace(details, ino=self.fd_ino(fd))

    def write_details(self, details: Details, fd: Any, data: Any, offset: int | None) -> Details:
        """Returns ``details`` with the data details of a write of ``data`` to ``fd``: inode,
        offset (the current position unless given; the end of the file for O_APPEND) and the
        bytes."""
        number = _fd_of(fd)
        if offset is None and number is not None:
            try:
                appending = fcntl.fcntl(number, fcntl.F_GETFL) & os.O_APPEND
                offset = os.fstat(number).st_size if appending else os.lseek(number, 0, 1)
            except OSError:
                offset = None
        return replace(details, ino=self.fd_ino(fd), offset=offset, hex=bytes(data).hex())

    # -- wrappers ---------------------------------------------------------------------------------

    def _wrap_os_open(self, real: Callable[..., int]) -> Callable[..., int]:
        def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            def call() -> int:
                return real(path, flags, mode, dir_fd=dir_fd)

            if self._bypassed():
                return call()
            details = Details(via="os", flags=flags, mode=mode)
            return self.intercept("open", self._arg_path(path, dir_fd), details, call, self.opened)

        return open_

    def _wrap_fd(
        self,
        name: str,
        real: Callable[..., Any],
        *,
        size_arg: int | None = None,
        data_arg: int | None = None,
    ) -> Callable[..., Any]:
        def wrapper(fd: Any, *args: Any) -> Any:
            def call() -> Any:
                return real(fd, *args)

            if self._bypassed():
                return call()
            details = Details(via="os", fd=_fd_of(fd))
            if size_arg is not None and args:
                details = replace(details, size=args[size_arg - 1])
            if data_arg is not None and args:
                details = replace(details, size=len(args[data_arg - 1]))
            finish = None
            if self.hook.data:
                details = self._data_of(details, name, fd, args)
                if data_arg is not None:
                    finish = _written
            return self.intercept(name, fd_path(fd), details, call, finish)

        wrapper.__name__ = getattr(real, "__name__", name)
        return wrapper

    def _data_of(self, details: Details, name: str, fd: Any, args: tuple[Any, ...]) -> Details:
        if name == "write" and args:
            return self.write_details(details, fd, args[0], None)
        if name == "pwrite" and len(args) > 1:
            return self.write_details(details, fd, args[0], args[1])
        details = replace(details, ino=self.fd_ino(fd))
        if name == "ftruncate" and args:
            details = replace(details, length=args[0])
        return details

    def _wrap_rename(self, name: str, real: Callable[..., None]) -> Callable[..., None]:
        def wrapper(
            src: Any, dst: Any, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None
        ) -> None:
            def call() -> None:
                real(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

            if self._bypassed():
                return call()
            source = self._arg_path(src, src_dir_fd)
            target = self._arg_path(dst, dst_dir_fd)
            details = Details(via="os", source=source, source_kind=self.kind_of(source))
            if self.hook.data:
                details = replace(details, ino=_lstat_ino(source), replaced_ino=_lstat_ino(target))
            path = target if self.kind_of(target) is not None else source
            return self.intercept(name, path, details, call)

        return wrapper

    def _wrap_unlink(self, real: Callable[..., None]) -> Callable[..., None]:
        def wrapper(path: Any, *, dir_fd: int | None = None) -> None:
            def call() -> None:
                real(path, dir_fd=dir_fd)

            if self._bypassed():
                return call()
            where = self._arg_path(path, dir_fd)
            details = Details(via="os")
            if self.hook.data:
                details = replace(details, ino=_lstat_ino(where))
            return self.intercept("unlink", where, details, call)

        return wrapper

    def _wrap_lock(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(fd: Any, operation: int, *args: Any) -> Any:
            def call() -> Any:
                return real(fd, operation, *args)

            if self._bypassed():
                return call()
            details = Details(via="fcntl", fd=_fd_of(fd), operation=lock_operation(operation))
            return self.intercept(name, fd_path(fd), details, call)

        return wrapper

    def _wrap_io_open(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def open_(
            file: Any, mode: str = "r", buffering: int = -1, *args: Any, **kwargs: Any
        ) -> Any:
            def call() -> Any:
                return real(file, mode, buffering, *args, **kwargs)

            if self._bypassed():
                return call()
            path = self._arg_path(file)
            if self.kind_of(path) is None:
                return call()
            details = Details(via="file", mode=mode, buffering=buffering)
            opened = self.intercept("open", path, details, call, self.opened)
            return FileProxy(opened, self, path, buffered=buffering != 0)

        return open_


def _written(details: Details, result: Any) -> Details:
    return replace(details, written=result)


def _lstat_ino(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.lstat(path).st_ino
    except OSError:
        return None


def lock_operation(operation: int) -> str:
    """Returns a flock/lockf operation as text, e.g. ``"LOCK_EX|LOCK_NB"``."""
    names = [
        name
        for name in ("LOCK_SH", "LOCK_EX", "LOCK_UN")
        if operation & ~fcntl.LOCK_NB == getattr(fcntl, name)
    ]
    if operation & fcntl.LOCK_NB:
        names.append("LOCK_NB")
    return "|".join(names) or str(operation)


class FileProxy:
    """A file object from an interposed ``open``: reports its reads, writes, flushes and closes and
    delegates the rest; ``details.buffered`` says written data reaches the kernel only at the next
    ``flush`` or ``close``."""

    def __init__(self, file: Any, interposer: Interposer, path: str | None, buffered: bool) -> None:
        self._file = file
        self._interposer = interposer
        self._path = path
        self._buffered = buffered

    def _report(
        self,
        name: str,
        call: Callable[[], Any],
        size: int | None = None,
        data: str | None = None,
    ) -> Any:
        """Reports the call ``name`` of the file (``size``, and ``data``: the ``hex`` detail)."""
        interposer = self._interposer
        if interposer._bypassed():
            return call()
        path = self._path
        if not self._file.closed:
            path = fd_path(self._file) or path
        info = Details(via="file", buffered=self._buffered, size=size, hex=data)
        if interposer.wants_data() and not self._file.closed:
            info = replace(info, ino=interposer.fd_ino(self._file))
            if name == "write":
                info = replace(info, offset=self._file.tell())
            if name == "ftruncate":
                length = size if size is not None else self._file.tell()
                info = replace(info, size=None, length=length)
        return interposer.intercept(name, path, info, call)

    def read(self, *args: Any) -> Any:
        """Reported as ``read``."""
        return self._report("read", lambda: self._file.read(*args))

    def readinto(self, buffer: Any) -> Any:
        """Reported as ``read``."""
        return self._report("read", lambda: self._file.readinto(buffer))

    def readline(self, *args: Any) -> Any:
        """Reported as ``read``."""
        return self._report("read", lambda: self._file.readline(*args))

    def readlines(self, *args: Any) -> Any:
        """Reported as ``read``."""
        return self._report("read", lambda: self._file.readlines(*args))

    def write(self, data: Any) -> Any:
        """Reported as ``write`` (``size`` in details)."""
        return self._report(
            "write", lambda: self._file.write(data), size=len(data), data=self._hex(data)
        )

    def writelines(self, lines: Any) -> Any:
        """Reported as ``write``."""
        lines = list(lines)
        size = sum(len(line) for line in lines)
        joined = "".join(lines) if lines and isinstance(lines[0], str) else b"".join(lines)
        return self._report(
            "write", lambda: self._file.writelines(lines), size=size, data=self._hex(joined)
        )

    def _hex(self, data: Any) -> str | None:
        """Returns the ``hex`` data detail of a write (text is encoded as the file encodes)."""
        if not self._interposer.wants_data():
            return None
        if isinstance(data, str):
            encoding = getattr(self._file, "encoding", None) or "utf-8"
            errors = getattr(self._file, "errors", None) or "strict"
            return data.encode(encoding, errors).hex()
        return bytes(data).hex()

    def flush(self) -> Any:
        """Reported as ``flush``."""
        return self._report("flush", self._file.flush)

    def truncate(self, *args: Any) -> Any:
        """Reported as ``ftruncate``."""
        size = args[0] if args and args[0] is not None else None
        return self._report("ftruncate", lambda: self._file.truncate(*args), size)

    def close(self) -> Any:
        """Reported as ``close`` (once; closing a closed file is not reported)."""
        if self._file.closed:
            return None
        return self._report("close", self._file.close)

    def __iter__(self) -> FileProxy:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def __enter__(self) -> FileProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)
