"""The records of a backend's file-system calls, as the interposition (:mod:`.interpose`) and
the strace parser (:mod:`.fstrace`) make them and the checks and the scheduler read them: one
call (:class:`CallRecord`), and a session waiting for its turn at a call (:class:`Parked`) or
back from one (:class:`Returned`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Invocation:
    """Where strace saw a call: thread ``tid``'s ``nth`` call of ``syscall`` (counted per
    thread from 1), and ``next``, that thread's following traced call as (syscall, nth)."""

    tid: int
    syscall: str
    nth: int
    next: tuple[str, int] | None = None


@dataclass(frozen=True)
class Details:
    """What else a call record says besides its name and path (``None``: not known or not recorded):
    ``via`` and, as the call has them, ``fd``, ``size``, ``flags``, ``mode``, ``buffering``,
    ``buffered``, ``source``, ``source_kind``, ``operation`` and ``deleted``. A ``data`` plan and
    strace add :data:`~memspec.conformance.tamper.interpose.DATA_DETAILS`; strace adds its
    ``strace`` invocation."""

    via: str | None = None
    fd: int | None = None
    size: int | None = None
    flags: int | None = None
    mode: int | str | None = None
    buffering: int | None = None
    buffered: bool = False
    source: str | None = None
    source_kind: str | None = None
    operation: str | None = None
    deleted: bool = False
    ino: int | None = None
    offset: int | None = None
    hex: str | None = None
    written: int | None = None
    length: int | None = None
    replaced_ino: int | None = None
    strace: Invocation | None = None


@dataclass(frozen=True)
class CallRecord:
    """A CallRecord is one file-system call of a backend on its root: ``name`` from the
    interposition's table, ``path`` absolute, ``kind`` its kind in the root, ``op`` the job's
    operation during it, ``seq`` its number among the process's calls (``None``: not known);
    ``effect`` what a plan did to it (``"EIO"``, ``"kill"``...), ``error`` its errno name, if any.
    """

    name: str
    path: str
    kind: str | None = None
    details: Details = field(default_factory=Details)
    op: int | None = None
    seq: int | None = None
    effect: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Parked:
    """A scheduled session waits for its turn: a worker right before ``call`` (with the
    ``inode`` a lock or close acts on), or a process strace stopped right after the call
    ``after``, in thread ``thread`` (``call`` is then a placeholder, ``next``), which
    ``would_block`` when that call found a lock taken and is to be made again."""

    call: CallRecord
    inode: int | None = None
    after: CallRecord | None = None
    thread: int | None = None
    would_block: bool = False


@dataclass(frozen=True)
class Returned:
    """A granted call returned: ``failed`` with ``errno`` (a number), or ``waited`` for a lock;
    ``call`` is the call it returned from, where the one parked was a placeholder."""

    failed: bool
    errno: int | None = None
    call: CallRecord | None = None
    waited: bool = False


def describe_call(record: CallRecord) -> str:
    """Returns a call record in a few words, e.g. ``flock LOCK_EX MEMORY.md.lock``."""
    name = "the directory" if record.kind == "dir" else os.path.basename(record.path)
    details = record.details
    extra = details.operation or ""
    if record.name in ("replace", "rename") and details.source:
        extra = os.path.basename(details.source) + " ->"
    return " ".join(part for part in (record.name, extra, name) if part)


def opens_for_writing(record: CallRecord) -> bool:
    """Whether a call record is an ``open`` that can write (flags or mode)."""
    details = record.details
    if record.name != "open":
        return False
    if details.via == "file":
        return any(flag in str(details.mode or "") for flag in "wax+")
    return bool((details.flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND))


def render_trace(records: Sequence[CallRecord]) -> str:
    """Returns call records as numbered steps: ``1 open MEMORY.md.lock, 2 flock LOCK_EX ...``."""
    return ", ".join(f"{step} {describe_call(record)}" for step, record in enumerate(records, 1))
