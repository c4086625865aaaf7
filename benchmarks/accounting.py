"""Where a certification's processor time goes, from the kernel's process accounting.

Linux writes one record for every process that ends while accounting is on (``acct(2)``, BSD
process accounting, format version 3): its command name, process and parent ids, and its user
and system time. :func:`accounting` turns it on for a block of code, into a file of its own;
:func:`tree_usage` then sums the processor time of one process tree (a certification and every
process it started) by kind: the backend's own processes, ``strace`` and the harness.

Turning accounting on needs ``CAP_SYS_PACCT`` (root, in practice); where it is refused,
:func:`accounting` yields ``None`` with nothing recorded. Times are kept in ticks of 1/100 s
and cut to whole ticks: each record's time is counted half a tick higher, the expected value of
what the cut dropped, so a sum over many short processes is not biased low.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RECORD = struct.Struct("<BBHIIIIIIf8H16s")
"""``struct acct_v3`` of ``<linux/acct.h>``: flag, version, tty, exit code, uid, gid, pid, ppid,
start time, elapsed time, then user, system, memory, I/O, blocks, minor and major faults, swaps
(each a ``comp_t``), and the command name."""
VERSION = 3
TICKS = 100.0
"""``AHZ``: the ticks per second of the times in a record."""


@dataclass(frozen=True)
class Ended:
    """An Ended is the accounting record of one process that ended: its id, its parent's, its
    command name (at most 15 bytes) and the processor seconds it used (user and system)."""

    pid: int
    ppid: int
    command: str
    cpu: float


@dataclass(frozen=True)
class Usage:
    """A Usage is the processor time of one process tree, by kind: the backend's processes (and
    how many there were), ``strace``'s, and the harness's (every other process of the tree)."""

    backend: float
    backend_processes: int
    tracing: float
    harness: float

    @property
    def total(self) -> float:
        return self.backend + self.tracing + self.harness


def comp_t(value: int) -> float:
    """Returns the ticks a ``comp_t`` holds: a 13-bit mantissa times 8 to a 3-bit exponent."""
    return float((value & 0x1FFF) << (((value >> 13) & 7) * 3))


def read_records(data: bytes) -> list[Ended]:
    """Returns the records of version 3 in ``data`` (a whole accounting file), in order."""
    ended = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] & 0x7F != VERSION:
            continue
        pid, ppid, utime, stime, name = fields[6], fields[7], fields[10], fields[11], fields[18]
        ticks = comp_t(utime) + comp_t(stime) + 0.5
        command = name.split(b"\0", 1)[0].decode("utf-8", "replace")
        ended.append(Ended(pid, ppid, command, ticks / TICKS))
    return ended


@contextmanager
def accounting(path: Path) -> Iterator[Path | None]:
    """Turns process accounting on into ``path`` for the block; yields ``path``, or ``None`` when
    the kernel refuses (not root, or no process accounting in this kernel)."""
    libc = ctypes.CDLL(None, use_errno=True)
    path.touch()
    if libc.acct(os.fsencode(path)) != 0:
        yield None
        return
    try:
        yield path
    finally:
        libc.acct(None)


def tree_usage(records: Sequence[Ended], root: int, backend_command: str | None) -> Usage:
    """Returns the processor time of the tree of processes under ``root`` (the root included),
    by kind: a process of the tree other than the root whose command name is
    ``backend_command`` (cut to 15 bytes, as the kernel keeps it) is the backend's, one named
    ``strace`` is tracing, any other is the harness's. Each process counts once, its last
    record (a pid the kernel reused within the run counts as the process that ended last)."""
    last = {record.pid: record for record in records}
    children: dict[int, list[Ended]] = {}
    for record in last.values():
        children.setdefault(record.ppid, []).append(record)
    name = backend_command[:15] if backend_command else None
    backend = tracing = 0.0
    harness = last[root].cpu if root in last else 0.0
    count = 0
    stack = list(children.get(root, []))
    seen: set[int] = {root}
    while stack:
        record = stack.pop()
        if record.pid in seen:
            continue
        seen.add(record.pid)
        stack.extend(children.get(record.pid, []))
        if record.command == name:
            backend += record.cpu
            count += 1
        elif record.command == "strace":
            tracing += record.cpu
        else:
            harness += record.cpu
    return Usage(backend, count, tracing, harness)
