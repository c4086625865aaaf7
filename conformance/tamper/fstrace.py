"""Recorded file-system calls turned into the logical operations of :mod:`.persistence`.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from memspec.conformance.tamper.calls import CallRecord, Details, Invocation
from memspec.conformance.tamper.interpose import path_kind
from memspec.conformance.tamper.ops import Op
from memspec.conformance.verdict.findings import HarnessError

STRACE_CALLS = (
    "open,openat,creat,write,pwrite64,writev,pwritev,lseek,ftruncate,truncate,fsync,"
    "fdatasync,rename,renameat,renameat2,unlink,unlinkat,close,dup,dup2,dup3"
)
SECCOMP_BPF = "--seccomp-bpf"
"""strace's option to stop a process it starts only at the traced calls: an interpreter starting
under strace then takes about half the time it would if every call stopped."""
_COMMON = ("-f", "-x", "-y", "-s", "1048576")
STRACE_ARGUMENTS = (*_COMMON, "-e", f"trace={STRACE_CALLS}")
"""The strace options :func:`calls_from_strace` reads the output of (add ``-o FILE``, and how
strace reaches the process: :func:`memspec.conformance.tamper.strace.strace_backend`)."""
FAULT_CALLS = f"{STRACE_CALLS},read,pread64,readv,preadv,flock,fcntl,bind"
STRACE_FAULT_ARGUMENTS = (*_COMMON, "-e", f"trace={FAULT_CALLS}")
"""The same with the reads and the locks traced too (faults, lock span, kill points)."""
QUIET = "-qq"
"""No messages about attaching, personality and exits, for a process strace starts."""
READS = frozenset({"read", "pread64", "readv", "preadv"})
"""System calls whose data the parser never needs (it can be megabytes of program code)."""
LOCKING_COMMANDS = frozenset({"F_SETLK", "F_SETLKW", "F_OFD_SETLK", "F_OFD_SETLKW"})
LOCK_TYPES = {"F_WRLCK": "LOCK_EX", "F_RDLCK": "LOCK_SH", "F_UNLCK": "LOCK_UN"}


# -- call records -> operations ---------------------------------------------------------------


def _creates(details: Details) -> tuple[bool, bool]:
    """Whether an open may create its file, and whether it truncates it."""
    if details.via == "file":
        mode = str(details.mode if details.mode is not None else "r")
        return any(flag in mode for flag in "wax"), "w" in mode
    flags = int(details.flags or 0)
    return bool(flags & os.O_CREAT), bool(flags & os.O_TRUNC)


def ops_from_calls(
    records: Sequence[CallRecord],
    root: str,
    initial: Mapping[str, tuple[int, bytes]],
    mutations: Sequence[int],
    acknowledged: Collection[int],
) -> list[Op]:
    """Returns the operations of the session operations ``mutations`` (their indices, in
    order), each followed by an ``ack`` if it is in ``acknowledged``; the replay stops after
    the first unacknowledged one. ``initial`` maps the root's files to (inode, bytes)."""
    names = {name: ino for name, (ino, _) in initial.items()}
    identities = _Identities()
    by_op: dict[int | None, list[CallRecord]] = {}
    for record in sorted(records, key=lambda r: r.seq or 0):
        by_op.setdefault(record.op, []).append(record)
    ops: list[Op] = []
    for number, index in enumerate(mutations):
        pending: dict[int | None, list[Op]] = {}
        for step, record in enumerate(by_op.get(index, []), 1):
            ops += _ops_of(record, root, names, pending, identities, number, step)
        if index not in acknowledged:
            break
        ops.append(Op("ack", mutation=number))
    return ops


class _Identities:
    """Maps inode numbers to identities: the number itself until a create reuses it."""

    def __init__(self) -> None:
        self.current: dict[int | None, int] = {}
        self.next = -(10**12)

    def of(self, ino: int | None) -> int | None:
        return None if ino is None else self.current.get(ino, ino)

    def new(self, ino: int | None) -> int:
        self.next -= 1
        self.current[ino] = self.next
        return self.next


def _ops_of(
    record: CallRecord,
    root: str,
    names: dict[str, int],
    pending: dict[int | None, list[Op]],
    identities: _Identities,
    mutation: int,
    step: int,
) -> list[Op]:
    """Returns the operations one call record stands for (updating ``names``/``pending``)."""
    if record.error or record.effect:
        return []
    call, path, details = record.name, str(record.path), record.details
    ino = identities.of(details.ino)
    directory = record.kind == "dir" or path == root
    name = os.path.basename(path) if os.path.dirname(path) == root else None
    op_here = partial(Op, step=step, mutation=mutation)
    if call in ("fsync", "fdatasync"):
        return [op_here("dirsync")] if directory else [op_here("fsync", ino=ino)]
    if directory or name is None:
        return []
    if call == "open":
        creates, truncates = _creates(details)
        if creates and names.get(name) != ino:
            ino = identities.new(details.ino)
            names[name] = ino
            return [op_here("create", ino=ino, name=name)]
        return [op_here("truncate", ino=ino, length=0)] if truncates else []
    if call in ("write", "pwrite"):
        if details.hex is None:
            raise HarnessError("the trace has no written bytes; record it with Plan(data=True)")
        data = bytes.fromhex(details.hex)
        written = details.written
        if isinstance(written, int) and written >= 0:
            data = data[:written]
        op = op_here("write", ino=ino, offset=int(details.offset or 0), data=data)
        if details.via == "file" and details.buffered:
            pending.setdefault(ino, []).append(op)
            return []
        return [op]
    if call in ("flush", "close") and details.via == "file":
        return pending.pop(ino, [])
    if call == "ftruncate":
        flushed = pending.pop(ino, []) if details.via == "file" else []
        return [*flushed, op_here("truncate", ino=ino, length=int(details.length or 0))]
    if call in ("replace", "rename"):
        source = os.path.basename(str(details.source or ""))
        moved = ino if ino is not None else names.get(source)
        replaced = identities.of(details.replaced_ino)
        if moved is None:
            return []
        names[name] = moved
        names.pop(source, None)
        return [op_here("rename", ino=moved, name=name, source=source, replaced=replaced)]
    if call == "unlink":
        gone = ino if ino is not None else names.get(name)
        names.pop(name, None)
        return [] if gone is None else [op_here("unlink", ino=gone, name=name)]
    return []


# -- strace output -> call records ------------------------------------------------------------

_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<body>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<call>\w+) resumed>(?P<rest>.*)$")
_RESULT = re.compile(r"\)\s+=\s+(?P<result>-?\d+|\?)(?P<decor><[^>]*>)?(?:\s+(?P<errno>E\w+))?")
_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, '"': 34, "\\": 92, "a": 7, "b": 8}


def decode_c_string(text: str) -> bytes:
    """Returns the bytes of a string strace printed (the text between the quotes)."""
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out += char.encode("utf-8")
            index += 1
            continue
        code = text[index + 1]
        if code == "x":
            out.append(int(text[index + 2 : index + 4], 16))
            index += 4
        elif code.isdigit():
            digits = re.match(r"[0-7]{1,3}", text[index + 1 :])
            assert digits is not None
            out.append(int(digits.group(), 8))
            index += 1 + len(digits.group())
        else:
            out.append(_ESCAPES.get(code, ord(code)))
            index += 2
    return bytes(out)


def split_arguments(text: str) -> list[str]:
    """Splits strace's argument list at its top-level commas (strings, brackets and ``<path>``
    decorations kept whole)."""
    parts, depth, current, index = [], 0, [], 0
    while index < len(text):
        char = text[index]
        if char == '"':
            end = index + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            current.append(text[index : end + 1])
            index = end + 1
            continue
        if char == "<" and current and (current[-1][-1:].isdigit() or current[-1].endswith("D")):
            end = text.index(">", index)
            current.append(text[index : end + 1])
            index = end + 1
            continue
        if char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        index += 1
    if current and "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _string(argument: str) -> bytes:
    match = re.match(r'^"(.*)"', argument, re.DOTALL)
    return decode_c_string(match.group(1)) if match else b""


def _fd(argument: str) -> int | None:
    match = re.match(r"^(-?\d+)", argument)
    return int(match.group(1)) if match else None


def _decoration(argument: str) -> str | None:
    match = re.search(r"<(.*)>$", argument)
    return match.group(1) if match else None


def _flags(argument: str) -> int:
    value = 0
    for flag in argument.split("|"):
        value |= getattr(os, flag.strip(), 0) if flag.strip().startswith("O_") else 0
    return value


@dataclass
class _Open:
    """A descriptor the parser follows: the file's inode (0: the root; None: unknown), its
    path, the position and whether it appends. Descriptors made by ``dup`` share one."""

    ino: int | None
    path: str
    pos: int = 0
    append: int = 0


class _StraceReader:
    """Follows names, descriptors and answers through strace lines (module docs)."""

    def __init__(self, root: str, initial: Mapping[str, int]) -> None:
        self.root = root
        self.names = dict(initial)
        self.sizes: dict[int, int] = {}
        self.fds: dict[int, _Open] = {}
        self.next_ino = -1
        self.cwd = root
        self.answers = 0
        self.stdout = b""
        self.records: list[CallRecord] = []
        self.invocation: Invocation | None = None
        self.effect: str | None = None

    def path(self, argument: str, dirfd: str | None = None) -> str:
        text = _string(argument).decode("utf-8", "surrogateescape")
        base = (_decoration(dirfd) if dirfd else None) or self.cwd
        return os.path.normpath(os.path.join(base, text))

    def in_root(self, path: str) -> str | None:
        """Returns the name of a file directly in the root, ``""`` for the root itself."""
        if path == self.root:
            return ""
        return os.path.basename(path) if os.path.dirname(path) == self.root else None

    def emit(self, call: str, path: str, error: str | None, **details: Any) -> None:
        # An abstract Unix socket bound as a lock (LOCK-1 allows locks other than flock).
        kind = "lock" if path.startswith("@") else path_kind(path, self.root) or "temp"
        said = Details(via="os", **details, strace=self.invocation)
        seq = len(self.records)
        record = CallRecord(call, path, kind, said, self.answers - 1, seq, self.effect, error)
        self.records.append(record)

    def new_ino(self) -> int:
        self.next_ino -= 1
        return self.next_ino

    def take(self, call: str, arguments: list[str], result: int | None, error: str | None) -> None:
        handler = getattr(self, f"_{call}", None)
        if handler is not None:
            handler(arguments, result, error)

    # -- one handler per system call ---------------------------------------------------------

    def _open_path(self, path: str, flags: int, result: int | None, error: str | None) -> None:
        name = self.in_root(path)
        if name is None:
            return
        if error or result is None or result < 0:
            self.emit("open", path, error or "EUNKNOWN", flags=flags)
            return
        ino = 0 if name == "" else self.names.get(name)
        if ino is None and flags & os.O_CREAT:
            ino = self.names[name] = self.new_ino()
        if ino is not None and flags & os.O_TRUNC:
            self.sizes[ino] = 0
        self.fds[result] = _Open(ino, path, append=flags & os.O_APPEND)
        self.emit("open", path, None, flags=flags, ino=ino)

    def _openat(self, args: list[str], result: int | None, error: str | None) -> None:
        self._open_path(self.path(args[1], args[0]), _flags(args[2]), result, error)

    def _open(self, args: list[str], result: int | None, error: str | None) -> None:
        self._open_path(self.path(args[0]), _flags(args[1]), result, error)

    def _creat(self, args: list[str], result: int | None, error: str | None) -> None:
        flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
        self._open_path(self.path(args[0]), flags, result, error)

    def _write_data(
        self,
        fd: int | None,
        data: bytes,
        offset: int | None,
        result: int | None,
        error: str | None,
        call: str,
    ) -> None:
        if fd == 1:
            self._answer(data)
            return
        entry = self.fds.get(fd) if fd is not None else None
        if entry is None or entry.ino in (None, 0):
            return
        ino = entry.ino
        written = result if result is not None and result >= 0 else 0
        if offset is None:
            offset = self.sizes.get(ino, 0) if entry.append else entry.pos
            entry.pos = offset + written
        if not error:
            self.sizes[ino] = max(self.sizes.get(ino, 0), offset + written)
        self.emit(call, entry.path, error, ino=ino, offset=offset, hex=data.hex(), written=written)

    def _write(self, args: list[str], result: int | None, error: str | None) -> None:
        self._write_data(_fd(args[0]), _string(args[1]), None, result, error, "write")

    def _pwrite64(self, args: list[str], result: int | None, error: str | None) -> None:
        offset = int(args[3])
        self._write_data(_fd(args[0]), _string(args[1]), offset, result, error, "pwrite")

    def _writev(self, args: list[str], result: int | None, error: str | None) -> None:
        data = b"".join(
            _string(part) for part in re.findall(r'iov_base=("(?:\\.|[^"\\])*")', args[1])
        )
        self._write_data(_fd(args[0]), data, None, result, error, "write")

    def _pwritev(self, args: list[str], result: int | None, error: str | None) -> None:
        data = b"".join(
            _string(part) for part in re.findall(r'iov_base=("(?:\\.|[^"\\])*")', args[1])
        )
        self._write_data(_fd(args[0]), data, int(args[3]), result, error, "pwrite")

    def _answer(self, data: bytes) -> None:
        self.stdout += data
        while b"\n" in self.stdout:
            line, self.stdout = self.stdout.split(b"\n", 1)
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and "id" in answer:
                self.answers += 1

    def _read(self, args: list[str], result: int | None, error: str | None) -> None:
        entry = self.fds.get(_fd(args[0]) or -1)
        if entry is not None and entry.ino not in (None, 0):
            self.emit("read", entry.path, error, ino=entry.ino, fd=_fd(args[0]))

    _pread64 = _read
    _readv = _read
    _preadv = _read

    def _flock(self, args: list[str], result: int | None, error: str | None) -> None:
        fd = _fd(args[0])
        entry = self.fds.get(fd if fd is not None else -1)
        if entry is not None:
            self.emit("flock", entry.path, error, ino=entry.ino, fd=fd, operation=args[1])

    def _fcntl(self, args: list[str], result: int | None, error: str | None) -> None:
        fd = _fd(args[0])
        entry = self.fds.get(fd if fd is not None else -1)
        if entry is None or len(args) < 3 or args[1] not in LOCKING_COMMANDS:
            return
        kind = re.search(r"l_type=(F_\w+)", args[2])
        operation = LOCK_TYPES.get(kind.group(1) if kind else "", args[1])
        if args[1] in ("F_SETLK", "F_OFD_SETLK") and operation != "LOCK_UN":
            operation += "|LOCK_NB"
        self.emit("lockf", entry.path, error, ino=entry.ino, fd=fd, operation=operation)

    def _bind(self, args: list[str], result: int | None, error: str | None) -> None:
        fd = _fd(args[0])
        name = re.search(r'sun_path=@("(?:\\.|[^"\\])*")', args[1]) if len(args) > 1 else None
        if fd is None or name is None:
            return
        path = "@" + _string(name.group(1)).decode("utf-8", "surrogateescape")
        if not error:
            self.fds[fd] = _Open(None, path)
        self.emit("bind", path, error, fd=fd, operation="LOCK_EX|LOCK_NB")

    def _lseek(self, args: list[str], result: int | None, error: str | None) -> None:
        entry = self.fds.get(_fd(args[0]) or -1)
        if entry is not None and result is not None and result >= 0:
            entry.pos = result

    def _ftruncate(self, args: list[str], result: int | None, error: str | None) -> None:
        entry = self.fds.get(_fd(args[0]) or -1)
        if entry is None or entry.ino in (None, 0):
            return
        self.sizes[entry.ino] = int(args[1])
        self.emit("ftruncate", entry.path, error, ino=entry.ino, length=int(args[1]))

    def _truncate(self, args: list[str], result: int | None, error: str | None) -> None:
        path = self.path(args[0])
        name = self.in_root(path)
        if name and name in self.names:
            self.emit("ftruncate", path, error, ino=self.names[name], length=int(args[1]))

    def _fsync(
        self, args: list[str], result: int | None, error: str | None, call: str = "fsync"
    ) -> None:
        entry = self.fds.get(_fd(args[0]) or -1)
        if entry is not None:
            self.emit(call, entry.path, error, ino=entry.ino)

    def _fdatasync(self, args: list[str], result: int | None, error: str | None) -> None:
        self._fsync(args, result, error, "fdatasync")

    def _rename_paths(self, source: str, target: str, error: str | None) -> None:
        old, new = self.in_root(source), self.in_root(target)
        if not old or not new:
            return
        ino, replaced = self.names.get(old), self.names.get(new)
        if not error and ino is not None:
            self.names[new] = ino
            self.names.pop(old, None)
        self.emit("replace", target, error, source=source, ino=ino, replaced_ino=replaced)

    def _rename(self, args: list[str], result: int | None, error: str | None) -> None:
        self._rename_paths(self.path(args[0]), self.path(args[1]), error)

    def _renameat(self, args: list[str], result: int | None, error: str | None) -> None:
        self._rename_paths(self.path(args[1], args[0]), self.path(args[3], args[2]), error)

    _renameat2 = _renameat

    def _unlink_path(self, path: str, error: str | None) -> None:
        name = self.in_root(path)
        if not name:
            return
        ino = self.names.get(name)
        if not error:
            self.names.pop(name, None)
        self.emit("unlink", path, error, ino=ino)

    def _unlink(self, args: list[str], result: int | None, error: str | None) -> None:
        self._unlink_path(self.path(args[0]), error)

    def _unlinkat(self, args: list[str], result: int | None, error: str | None) -> None:
        if "AT_REMOVEDIR" not in (args[2] if len(args) > 2 else ""):
            self._unlink_path(self.path(args[1], args[0]), error)

    def _close(self, args: list[str], result: int | None, error: str | None) -> None:
        fd = _fd(args[0])
        entry = self.fds.pop(fd if fd is not None else -1, None)
        if entry is not None:
            self.emit("close", entry.path, error, ino=entry.ino, fd=fd)

    def _dup(self, args: list[str], result: int | None, error: str | None) -> None:
        entry = self.fds.get(_fd(args[0]) or -1)
        if entry is not None and result is not None and result >= 0:
            self.fds[result] = entry

    _dup2 = _dup
    _dup3 = _dup


@dataclass
class StraceTrace:
    """A StraceTrace is what :func:`read_strace` makes of strace's output: the call records,
        how many calls of each system call each thread made (``counts[(tid, syscall)]``), and the
        invocations at which a thread was killed by ``SIGKILL`` and those strace injected an error
    into (``(tid, syscall, nth)``), in the root or not."""

    records: list[CallRecord]
    counts: dict[tuple[int, str], int] = field(default_factory=dict)
    killed: list[tuple[int, str, int]] = field(default_factory=list)
    injected: list[tuple[int, str, int]] = field(default_factory=list)


_KILLED = re.compile(r"^\+\+\+ killed by SIGKILL")


@dataclass(frozen=True)
class _Last:
    """A thread's last call line: its invocation, the index of its record (None: a call the
    parser keeps no record of) and its result as strace printed it (``?``: none)."""

    invocation: tuple[int, str, int]
    record: int | None
    result: str


class StraceFollower:
    """Reads strace output as it comes, line by line (:func:`read_strace` of all the lines fed
    so far is :attr:`trace`): a scheduled run reads the calls of each step as it stops."""

    def __init__(self, root: str, initial: Mapping[str, int]) -> None:
        self._reader = _StraceReader(os.path.normpath(root), initial)
        self.trace = StraceTrace(self._reader.records)
        self._unfinished: dict[str, str] = {}
        self._last: dict[int, _Last] = {}

    def last_call(self, tid: int) -> tuple[str, CallRecord | None]:
        """Returns the system call thread ``tid`` made last in the lines fed so far, and its
        record (None: a call the parser keeps no record of); ``("", None)`` before any."""
        last = self._last.get(tid)
        if last is None:
            return "", None
        record = None if last.record is None else self.trace.records[last.record]
        return last.invocation[1], record

    def feed(self, lines: Iterable[str]) -> None:
        """Reads complete lines of strace's output. Raises ValueError on one it cannot read."""
        reader, trace, unfinished, last = self._reader, self.trace, self._unfinished, self._last
        for raw in lines:
            line = _LINE.match(raw)
            if line is None:
                continue
            pid, body = line.group("pid"), line.group("body")
            if body.endswith("<unfinished ...>"):
                unfinished[pid] = body[: -len("<unfinished ...>")].rstrip()
                continue
            if _KILLED.match(body):
                if pid in unfinished:
                    body = unfinished.pop(pid) + ") = ?"
                    _take_line(reader, trace, last, int(pid), body, killed=True)
                elif int(pid) in last and last[int(pid)].result == "?":
                    trace.killed.append(last[int(pid)].invocation)
                    index = last[int(pid)].record
                    if index is not None:
                        trace.records[index] = replace(trace.records[index], effect="kill")
                continue
            resumed = _RESUMED.match(body)
            if resumed is not None:
                body = unfinished.pop(pid, f"{resumed.group('call')}(") + resumed.group("rest")
            _take_line(reader, trace, last, int(pid), body, killed=False)


def read_strace(text: str, root: str, initial: Mapping[str, int]) -> StraceTrace:
    """Returns the call records (interposition format, with data details and each record's
    invocation, module docs) of the calls on ``root`` in strace output; ``initial`` maps the
    root's files before the session to their inode numbers. Raises ValueError on a line it
    cannot read."""
    follower = StraceFollower(root, initial)
    follower.feed(text.splitlines())
    return follower.trace


def _take_line(
    reader: _StraceReader,
    trace: StraceTrace,
    last: dict[int, _Last],
    tid: int,
    body: str,
    killed: bool,
) -> None:
    """Reads one whole call line of thread ``tid`` into ``reader`` and ``trace``."""
    call = re.match(r"^(\w+)\((.*)$", body, re.DOTALL)
    if call is None:
        return
    outcomes = list(_RESULT.finditer(body))
    if not outcomes:
        return
    outcome, result = outcomes[-1], None
    if outcome.group("result") != "?":
        result = int(outcome.group("result"))
    syscall = call.group(1)
    nth = trace.counts.get((tid, syscall), 0) + 1
    trace.counts[(tid, syscall)] = nth
    previous = last.get(tid)
    if previous is not None and previous.record is not None:
        _followed_by(reader.records, previous.record, (syscall, nth))
    invocation = (tid, syscall, nth)
    injected = body.rstrip().endswith("(INJECTED)")
    if injected:
        trace.injected.append((tid, syscall, nth))
    reader.invocation = Invocation(tid, syscall, nth)
    reader.effect = (
        "kill" if killed else (outcome.group("errno") or "INJECTED") if injected else None
    )
    if syscall in READS:
        arguments = [body[len(syscall) + 1 :].split(",", 1)[0]]
    else:
        arguments = split_arguments(body[len(syscall) + 1 : outcome.start()])
    emitted = len(reader.records)
    reader.take(syscall, arguments, result, outcome.group("errno"))
    record = len(reader.records) - 1 if len(reader.records) > emitted else None
    last[tid] = _Last(invocation, record, outcome.group("result"))
    if killed:
        trace.killed.append(invocation)


def _followed_by(records: list[CallRecord], index: int, following: tuple[str, int]) -> None:
    """Notes in the record at ``index`` the call its thread made next."""
    record = records[index]
    invocation = record.details.strace
    if invocation is not None:
        details = replace(record.details, strace=replace(invocation, next=following))
        records[index] = replace(record, details=details)


def calls_from_strace(text: str, root: str, initial: Mapping[str, int]) -> list[CallRecord]:
    """Returns the call records of :func:`read_strace` alone."""
    return read_strace(text, root, initial).records
