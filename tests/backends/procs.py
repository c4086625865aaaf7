"""Stores broken on purpose for the process checks (LOCK, ATOMIC, CRASH, READ-7).

:class:`FileStore` is a small file-backed store written against the contract, with the spec's
own rule functions for every decision. Done right, it locks ``MEMORY.md.lock``, sweeps stale temps,
re-reads under the lock, saves bytes it did not write in a content-addressed backup (the reference's
:mod:`~memspec.reference_impl.files` helpers, the digest in the lock file), writes a unique temp
with the old file's mode, fsyncs it, renames it and fsyncs the directory; it refuses a symlinked
lock or data file. It passes every check it meets, so a subclass fails only what its one broken step
breaks. It is a base of its own by design: it claims ``multi-process``, ``crash-safe`` and
``durable``, so the checks of concurrent sessions, kills, crash states and injected faults run on
it, and each step of that protocol is one method (the naive store of ``naive_broken.py`` claims none
of them; a wrapper of the reference, ``wrappers.py``, cannot break a step inside it). Each subclass
breaks exactly one step, the way real stores have:

=======================  ====================================================  ==============
factory                  defect                                                caught by
=======================  ====================================================  ==============
``open_no_lock``         no lock at all: concurrent adds are lost              LOCK-3
``open_data_file_lock``  flock on MEMORY.md, whose inode each rename replaces  LOCK-1, LOCK-3
``open_read_before_lock`` reads the file, then takes the lock                  LOCK-2, LOCK-3
``open_loaded_list``     writes the list loaded at session start, not re-read  LOCK-2, LOCK-3
``open_in_place``        truncates MEMORY.md and writes it entry by entry      CRASH-1
``open_keeps_temps``     never removes the temps a crash leaves                CRASH-2
``open_marker_lock``     a lock file whose mere existence means "locked"       CRASH-3
``open_no_temp_fsync``   renames the temp without fsyncing it                  ATOMIC-1
``open_no_dir_fsync``    never fsyncs the directory after the rename           ATOMIC-3
``open_fixed_temp``      one temp name, ``MEMORY.md.tmp``, for every session   ATOMIC-1
``open_unflushed_fsync``  fsyncs a buffered temp before flushing it            ATOMIC-1
``open_eio_as_empty``    a read error reads as an empty file                   READ-7
``open_ok_on_write_error`` answers OK when the write raised                    ATOMIC-4
``open_keeps_failed_temp`` leaves its temp behind when the write fails         ATOMIC-4
``open_raises_on_write_error`` raises out of the add when the write fails      ATOMIC-4
``open_dir_sync_error_is_io`` answers E_IO when the directory fsync fails      ATOMIC-3
``open_backup_sync_error_is_io`` answers E_IO when the directory fsync after   ATOMIC-3
                         a backup fails
``open_socket_lock_after_read`` reads the file, then takes its lock, an        LOCK-2, LOCK-3
                         abstract Unix socket (a lock off the root)
=======================  ====================================================  ==============

``open_socket_lock`` is the sound store with that lock, as the Node.js backend takes it (Node
has no ``flock``): the scheduler of a command stops at it only when it stops everywhere
(``conformance/tamper/stops.py``).

Three of these have a twin on the naive store, the same defect on the other base:
``open_loaded_list`` and ``StaleWithoutLoad`` (deciding on the list held since load),
``open_eio_as_empty`` and ``UnreadableAsEmpty`` (a read error read as an empty file),
``open_in_place`` and ``InPlaceWriter`` (writing the data file in place; only this store claims
``crash-safe``, so only it meets the crash checks). The zoo lists both of each pair, each caught
first by another check.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memspec.reference_impl import files
from memspec.spec import codes
from memspec.spec.codec import DELIMITER, classify_bytes, encode_entries
from memspec.spec.operations import Add, Mutation, Remove, Replace
from memspec.spec.rules import argument_error, decide
from memspec.spec.snapshot import render_snapshot, render_unreadable
from memspec.spec.targets import FILENAMES, TARGETS
from memspec.spec.threats import find_threats
from tests.backends import factory_of

ALL_FEATURES = ("core", "multi-process", "crash-safe", "durable")
LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a lock or record file is opened: never through a symlink (FILES-3)."""


class FileStore:
    """A contract store on ``root`` that does every file step right (subclasses break one)."""

    features = ALL_FEATURES

    def __init__(self, root: Path, *, memory_char_limit: int = 2200, user_char_limit: int = 1375):
        self.root = Path(root)
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self.live: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
        self.blocks: dict[str, str | None] = {target: None for target in TARGETS}

    # -- the contract -----------------------------------------------------------------------------

    def load(self) -> None:
        for target in TARGETS:
            try:
                state = classify_bytes(self.read(self.path(target)), self.limits[target])
            except OSError:
                self.blocks[target] = render_unreadable(target)
                continue
            if state.entries is None:
                self.blocks[target] = render_unreadable(target)
                continue
            self.live[target] = state.entries
            self.blocks[target] = render_snapshot(
                target, state.entries, self.limits[target], find_threats
            )

    def entries(self, target: str) -> list[str]:
        return list(self.live[target])

    def snapshot(self, target: str) -> str | None:
        return self.blocks[target]

    def add(self, target: str, content: str) -> dict[str, Any]:
        return self.mutate(Add(target, content))

    def replace(self, target: str, old_text: str, new_content: str) -> dict[str, Any]:
        return self.mutate(Replace(target, old_text, new_content))

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        return self.mutate(Remove(target, old_text))

    # -- one mutation -----------------------------------------------------------------------------

    def path(self, target: str) -> Path:
        return self.root / FILENAMES[target]

    def mutate(self, op: Mutation) -> dict[str, Any]:
        refusal = argument_error(op)
        if refusal is not None:
            return {"ok": False, "code": refusal.code}
        path = self.path(op.target)
        try:
            with self.locked(path):
                return self.mutate_locked(op, path, self.read_for_update(path))
        except OSError as error:
            return {"ok": False, "code": codes.E_IO, "message": str(error)}

    def read_for_update(self, path: Path) -> bytes | OSError | None:
        try:
            return self.read(path)
        except OSError as error:
            return error

    def mutate_locked(
        self, op: Mutation, path: Path, data: bytes | OSError | None
    ) -> dict[str, Any]:
        self.sweep(path)
        repair = f"move {path.name} aside or make it UTF-8 again, then retry"
        if isinstance(data, OSError):
            return {"ok": False, "code": codes.E_UNREADABLE, "message": f"{data}; {repair}"}
        state = classify_bytes(data, self.limits[op.target])
        outcome, result = decide(op, state, self.limits[op.target])
        if outcome.code == codes.E_DRIFT and data is not None:
            # DRIFT-3: a byte-exact backup first, named in the answer
            saved = self.save_backup(path, data)
            message = f"{path.name} is not this store's; saved as {saved.name}, edit it by hand"
            return {"ok": False, "code": codes.E_DRIFT, "backup": str(saved), "message": message}
        if outcome.code == codes.E_UNREADABLE:
            return {"ok": False, "code": outcome.code, "message": f"{path.name}: {repair}"}
        if result is None:
            return {"ok": outcome.ok, "code": outcome.code}
        answer: dict[str, Any] = {"ok": True, "code": codes.OK}
        with self.written(path) as record:
            # DRIFT-2, DRIFT-5: bytes this store did not write are saved before a rewrite
            if state.entries and (
                state.kind == "foreign" or files.read_recorded_digest(record) != files.digest(data)
            ):
                answer["backup"] = str(self.save_backup(path, data))
            try:
                self.write(path, result)
            except NotDurable as error:
                # ATOMIC-3: the new file is in place; only its durability is not confirmed.
                answer["message"] = f"not confirmed durable: {error}"
            files.record_digest(record, files.digest(encode_entries(result)))
        self.live[op.target] = result
        return answer

    # -- the file steps ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        fd = os.open(path.with_name(path.name + ".lock"), LOCK_FLAGS, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def record_path(self, path: Path) -> Path:
        """Where the digest of the bytes this store last wrote is kept (DRIFT-5): the lock file."""
        return path.with_name(path.name + ".lock")

    @contextlib.contextmanager
    def written(self, path: Path) -> Iterator[int]:
        """Opens :meth:`record_path` (taken or not: the caller holds the store's lock)."""
        fd = os.open(self.record_path(path), LOCK_FLAGS, 0o600)
        try:
            yield fd
        finally:
            os.close(fd)

    def read(self, path: Path) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def sweep(self, path: Path) -> None:
        for stale in self.root.glob(f".{path.name}.tmp.*"):
            stale.unlink(missing_ok=True)

    def temp_path(self, path: Path) -> Path:
        return path.with_name(f".{path.name}.tmp.{secrets.token_hex(6)}")

    def open_temp(self, path: Path, temp: Path) -> int:
        """Opens ``temp`` for the new content of ``path``, with the mode of the file it will
        replace (FILES-2) or 0600 (FILES-1); a data file that is a symlink is refused."""
        current = self.current(path)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if current is not None:
            os.fchmod(fd, stat.S_IMODE(current.st_mode))
        return fd

    def write(self, path: Path, entries: tuple[str, ...]) -> None:
        temp = self.temp_path(path)
        fd = self.open_temp(path, temp)
        try:
            try:
                os.write(fd, encode_entries(entries))
                self.sync_file(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self.sync_directory()

    def current(self, path: Path) -> os.stat_result | None:
        """Returns the data file's own status, refusing a symlink rather than replacing it
        (FILES-4), or ``None`` when there is no file."""
        try:
            current = os.lstat(path)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(current.st_mode):
            raise OSError(errno.ELOOP, f"{path.name} is a symlink; not replacing it")
        return current

    def sync_file(self, fd: int) -> None:
        os.fsync(fd)

    def save_backup(self, path: Path, data: bytes) -> Path:
        """Saves ``data`` byte-exactly beside ``path`` and returns the backup (DRIFT-3); a failed
        directory sync after it leaves the backup in place, only not confirmed durable
        (ATOMIC-3)."""
        try:
            return files.write_backup(path, data)
        except files.NotDurableError as error:
            return Path(error.filename)

    def sync_directory(self) -> None:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        except OSError as error:
            raise NotDurable(error.errno, error.strerror) from error
        finally:
            os.close(fd)


class NotDurable(OSError):
    """The directory fsync after the rename failed: the new file is in place (ATOMIC-3)."""


class NoLock(FileStore):
    """Takes no lock: two sessions read the same file and the second rename wins (LOCK-3).
    (Without a lock no temp can be known stale, so it sweeps none.)"""

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        yield

    def sweep(self, path: Path) -> None:
        pass


class DataFileLock(FileStore):
    """Locks MEMORY.md itself; the rename gives the name a new inode, so a session that opens
    the file after it locks another inode than a session still holding the old one (LOCK-1)."""

    open_error: OSError | None = None
    """Why the data file could not be opened to lock it, for the read under that lock."""

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        # only the lock is wrong: an absent or symlinked file is neither created nor opened
        # through here (there is then no lock at all, as the data file's inode is no lock
        # either), and a file that cannot be opened is unreadable, as the sound store finds it
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            self.open_error = None if error.errno in (errno.ENOENT, errno.ELOOP) else error
            try:
                yield
            finally:
                self.open_error = None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def read_for_update(self, path: Path) -> bytes | OSError | None:
        return self.open_error or super().read_for_update(path)

    def sweep(self, path: Path) -> None:
        pass


class ReadBeforeLock(FileStore):
    """Reads the file before taking the lock and decides on that stale copy (LOCK-2)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        refusal = argument_error(op)
        if refusal is not None:
            return {"ok": False, "code": refusal.code}
        path = self.path(op.target)
        data = self.read_for_update(path)
        try:
            with self.locked(path):
                return self.mutate_locked(op, path, data)
        except OSError as error:
            return {"ok": False, "code": codes.E_IO, "message": str(error)}


class LoadedList(FileStore):
    """Takes the lock but decides on the list it loaded at session start (and its own writes
    since), never re-reading the file: a concurrent session's writes are lost (LOCK-2)."""

    def read_for_update(self, path: Path) -> bytes | OSError | None:
        target = next(t for t in TARGETS if FILENAMES[t] == path.name)
        return encode_entries(self.live[target])


class InPlace(FileStore):
    """Truncates MEMORY.md and writes it entry by entry (the old open("w") way): a crash in
    between leaves a truncated file (CRASH-1, ATOMIC-2)."""

    features = ("core", "multi-process", "crash-safe")

    def write(self, path: Path, entries: tuple[str, ...]) -> None:
        self.current(path)  # a symlink is refused, as by the sound store
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for index, entry in enumerate(entries):
                os.write(fd, ((DELIMITER if index else "") + entry).encode("utf-8"))
        finally:
            os.close(fd)


class KeepsTemps(FileStore):
    """Never sweeps the temp files that crashed writers leave behind (CRASH-2)."""

    def sweep(self, path: Path) -> None:
        pass


class MarkerLock(FileStore):
    """Locks by creating MEMORY.md.lock with O_EXCL and deleting it afterwards: a crash leaves
    the marker and every later mutation waits for ever (CRASH-3)."""

    patience = 60.0

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        marker = path.with_name(path.name + ".lock")
        deadline = time.monotonic() + self.patience
        while True:
            try:
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                break
            except FileExistsError:
                if time.monotonic() > deadline:
                    raise OSError(errno.EAGAIN, "MEMORY.md is locked", str(marker)) from None
                time.sleep(0.002)
        try:
            yield
        finally:
            marker.unlink(missing_ok=True)

    def record_path(self, path: Path) -> Path:
        """The marker is removed after every mutation: the record is a file of its own."""
        return path.with_name(path.name + ".written")


class NoTempFsync(FileStore):
    """Renames the temp over MEMORY.md without fsyncing it first (ATOMIC-1)."""

    def sync_file(self, fd: int) -> None:
        pass


class NoDirFsync(FileStore):
    """Never fsyncs the directory, so the rename may not survive power loss (ATOMIC-3)."""

    def sync_directory(self) -> None:
        pass


class FixedTemp(FileStore):
    """Writes every new file through the one temp name MEMORY.md.tmp (ATOMIC-1)."""

    def temp_path(self, path: Path) -> Path:
        return path.with_name(path.name + ".tmp")


class UnflushedFsync(FileStore):
    """Writes the temp through a buffered file object and fsyncs its descriptor before the
    buffer is flushed (at close), so the synced file is empty (ATOMIC-1)."""

    def write(self, path: Path, entries: tuple[str, ...]) -> None:
        current = self.current(path)
        temp = self.temp_path(path)
        with open(temp, "wb") as handle:
            os.fchmod(handle.fileno(), stat.S_IMODE(current.st_mode) if current else 0o600)
            handle.write(encode_entries(entries))
            os.fsync(handle.fileno())
        os.replace(temp, path)
        self.sync_directory()


class EioAsEmpty(FileStore):
    """Takes a read error for an empty file, so the next add rewrites MEMORY.md with one entry
    (READ-7: the transient read failure Hermes had)."""

    def read(self, path: Path) -> bytes | None:
        try:
            return super().read(path)
        except OSError:
            return b""


class OkOnWriteError(FileStore):
    """Answers OK even when writing the new file raised (ATOMIC-4)."""

    def write(self, path: Path, entries: tuple[str, ...]) -> None:
        self.current(path)  # a symlink is refused, as by the sound store (FILES-4)
        try:
            super().write(path, entries)
        except NotDurable:
            raise  # the new file is in place: answered as the sound store does (ATOMIC-3)
        except OSError:
            pass


class RaisesOnWriteError(FileStore):
    """Raises out of the add when writing the new file fails, instead of answering E_IO, but
    keeps the old file (ATOMIC-4 and CONTRACT-6, as hermes-agent does on ENOSPC)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        if answer.get("code") == codes.E_IO:
            raise RuntimeError(f"Failed to write memory file: {answer.get('message')}")
        return answer


class KeepsFailedTemp(FileStore):
    """Answers E_IO when the write fails but leaves its temp file behind (ATOMIC-4)."""

    def write(self, path: Path, entries: tuple[str, ...]) -> None:
        temp = self.temp_path(path)
        fd = self.open_temp(path, temp)
        try:
            os.write(fd, encode_entries(entries))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        self.sync_directory()


class DirSyncErrorIsIo(FileStore):
    """Answers E_IO when the directory fsync after the rename fails, although the new file is
    already what every reader sees (ATOMIC-3: E_IO promises an intact old file)."""

    def sync_directory(self) -> None:
        try:
            super().sync_directory()
        except NotDurable as error:
            raise OSError(error.errno, error.strerror) from error


class BackupSyncErrorIsIo(FileStore):
    """Answers E_IO when the directory fsync after a backup fails, although the backup is in
    place and the answer owed names it (ATOMIC-3), as the reference did until 2026-12-07."""

    def save_backup(self, path: Path, data: bytes) -> Path:
        try:
            return files.write_backup(path, data)
        except files.NotDurableError as error:
            raise OSError(error.errno, error.strerror) from error


class SocketLock(FileStore):
    """Sound, with its lock off the root: a Unix socket bound in the abstract namespace under
    the root's device and inode and the file's name, tried until the bind succeeds (the kernel
    releases it when its holder dies)."""

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[None]:
        info = os.stat(self.root)
        name = f"\0memspec-test-lock/{info.st_dev}:{info.st_ino}/{path.name}".encode()
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            while True:
                try:
                    lock.bind(name)
                    break
                except OSError as error:
                    if error.errno != errno.EADDRINUSE:
                        raise
                    time.sleep(0.001)
            yield
        finally:
            lock.close()


class SocketLockAfterRead(ReadBeforeLock, SocketLock):
    """Reads the file before taking its socket lock and decides on that stale copy (LOCK-2)."""


open_sound = factory_of(FileStore)
open_no_lock = factory_of(NoLock)
open_data_file_lock = factory_of(DataFileLock)
open_read_before_lock = factory_of(ReadBeforeLock)
open_loaded_list = factory_of(LoadedList)
open_in_place = factory_of(InPlace)
open_raises_on_write_error = factory_of(RaisesOnWriteError)
open_keeps_temps = factory_of(KeepsTemps)
open_marker_lock = factory_of(MarkerLock)
open_no_temp_fsync = factory_of(NoTempFsync)
open_no_dir_fsync = factory_of(NoDirFsync)
open_fixed_temp = factory_of(FixedTemp)
open_unflushed_fsync = factory_of(UnflushedFsync)
open_eio_as_empty = factory_of(EioAsEmpty)
open_ok_on_write_error = factory_of(OkOnWriteError)
open_keeps_failed_temp = factory_of(KeepsFailedTemp)
open_dir_sync_error_is_io = factory_of(DirSyncErrorIsIo)
open_backup_sync_error_is_io = factory_of(BackupSyncErrorIsIo)
open_socket_lock = factory_of(SocketLock)
open_socket_lock_after_read = factory_of(SocketLockAfterRead)
