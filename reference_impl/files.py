"""The file machinery of the reference store: lock, atomic write, digest, backups (POSIX only).

Every function here acts on one data file (``root / "MEMORY.md"`` or ``root / "USER.md"``) and
the files kept beside it in the same directory:

- ``MEMORY.md.lock``: the lock file. A separate file, because the data file's inode changes with
  every rename and a lock held on it would be lost (LOCK-1). Its content is the sha256 of
  the bytes the store last wrote, so a later writer can tell its own bytes from external ones
  (DRIFT-5).
- ``.MEMORY.md.tmp.<random>``: temp files, alive only while a lock holder writes (ATOMIC-1).
- ``MEMORY.md.bak.<sha256 hex[:16]>``: byte-exact, content-addressed backups (DRIFT-3, DRIFT-4).

The store calls them in this order for one mutation::

    with locked(path) as lock_fd:
        remove_stale_temps(path)
        data = read_file(path)
        ...                                   # classify, back up, compute the result
        atomic_write(path, new_bytes)
        record_digest(lock_fd, digest(new_bytes))
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from memspec.spec.root_files import file_kind

NEW_FILE_MODE = 0o600
"""The mode of every file the store creates: data files, lock files, backups (FILES-1)."""

_DIGEST_RE = re.compile(rb"[0-9a-f]{64}")
_MAX_LOCK_CONTENT = 128
# Filesystems that cannot sync a directory answer fsync with one of these; nothing more can be done.
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


class NotDurableError(OSError):
    """The rename of an atomic write happened but syncing the directory failed.

    The new bytes are in place and every reader sees them, but the rename may not survive a power
    loss (ATOMIC-3: a rename is durable only once its directory is synced). Raised by
    :func:`atomic_write` and :func:`write_backup` after the replace, so unlike any other
    ``OSError`` they raise, the old file is *not* intact any more; the caller decides whether the
    write counts as done. ``errno`` and ``strerror`` are those of the failed call.
    """


def lock_path(data_path: Path) -> Path:
    """Returns the lock file of ``data_path``: ``MEMORY.md`` -> ``MEMORY.md.lock``, never the data
    file itself (LOCK-1)."""
    return data_path.with_name(data_path.name + ".lock")


@contextmanager
def locked(data_path: Path) -> Iterator[int]:
    """Holds the exclusive ``flock`` of ``data_path``'s lock file and yields its descriptor.

    The lock file is opened with ``O_NOFOLLOW`` and created with mode 0600: a lock file that is a
    symlink raises ``OSError`` (``ELOOP``), which propagates, instead of locking (or creating)
    whatever the link points to (FILES-3, FILES-1). The lock excludes every other session of
    the root, in any process (LOCK-1), for the whole body (LOCK-3); it is released and the
    descriptor closed on exit, also when the body raises, and the kernel releases a ``flock``
    whose holder dies (CRASH-3).
    """
    fd = os.open(
        lock_path(data_path),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        NEW_FILE_MODE,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def digest(data: bytes) -> str:
    """Returns the lowercase hex sha256 of ``data``, the name of bytes in the lock file and in
    backup names (DRIFT-4, DRIFT-5)."""
    return hashlib.sha256(data).hexdigest()


def read_recorded_digest(lock_fd: int) -> str | None:
    """Returns the digest recorded in the lock file, or ``None`` when it holds none.

    The lock file holds the hex sha256 of the bytes the store family last wrote (DRIFT-5).
    Anything other than 64 lowercase hex digits (surrounding ASCII whitespace allowed) — an empty
    lock file from an older writer, a torn or foreign write — reads as ``None``: the store then
    treats the data file as not written by itself, which can at worst cost one extra backup.
    """
    raw = os.pread(lock_fd, _MAX_LOCK_CONTENT + 1, 0)
    if len(raw) > _MAX_LOCK_CONTENT:
        return None
    text = raw.strip()
    return text.decode("ascii") if _DIGEST_RE.fullmatch(text) else None


def record_digest(lock_fd: int, digest: str) -> None:
    """Records ``digest`` as the lock file's whole content (DRIFT-5).

    Called while holding the lock, after :func:`atomic_write` returned. The lock file is not
    fsynced: if the record is lost in a power cut, the next writer sees bytes it cannot vouch for
    and backs them up once more — never a loss. A record can never vouch for bytes the store did
    not write, because it is only compared for equality with the file's actual digest.
    """
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest.encode("ascii", "replace")):
        raise ValueError(f"expected a 64-digit lowercase hex sha256, got digest={digest!r}")
    data = digest.encode("ascii")
    written = 0
    while written < len(data):
        written += _checked_write_count(os.pwrite(lock_fd, data[written:], written))
    os.ftruncate(lock_fd, len(data))


def read_file(path: Path) -> bytes | None:
    """Returns the bytes of ``path`` (symlinks followed), or ``None`` when it does not exist.

    Only ``FileNotFoundError`` means absent (a dangling symlink included). Every other
    ``OSError`` — permission denied, a directory, an I/O error — propagates, because an
    unreadable file must never be taken for an empty one (READ-7; the store answers
    ``E_UNREADABLE``).
    """
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def temp_prefix(data_path: Path) -> str:
    """Returns the name prefix of ``data_path``'s temp files: ``MEMORY.md`` -> ``.MEMORY.md.tmp.``.

    Temps of backups share it, so one sweep of :func:`remove_stale_temps` finds every leftover of
    a writer of this data file (CRASH-2).
    """
    return f".{data_path.name}.tmp."


def remove_stale_temps(data_path: Path) -> int:
    """Deletes the leftover temp files of ``data_path`` and returns how many it deleted.

    Only a lock holder writes temps, and it removes them before it releases the lock, so any temp
    found by a caller holding the lock belongs to a writer that crashed (CRASH-2); sweeping
    them keeps the number of files in the directory bounded (FILES-5). A name that vanishes
    meanwhile is skipped; directories are never touched (they are not ours).
    """
    removed = 0
    with os.scandir(data_path.parent) as listing:
        for entry in listing:
            # The temps of this data file are the names temp_prefix gives, as the spec reads them.
            if file_kind(entry.name, data_path.name) != "temp" or entry.is_dir(
                follow_symlinks=False
            ):
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed += 1
    return removed


def atomic_write(data_path: Path, data: bytes) -> None:
    """Replaces ``data_path``'s content with ``data`` so that no reader or crash sees anything
    but the old or the new bytes.

    The steps: refuse a ``data_path`` that is a symlink (``OSError`` ``ELOOP``: a link is never
    replaced by a regular file; FILES-4); create a unique temp ``.MEMORY.md.tmp.<random>``
    beside it with ``O_EXCL|O_NOFOLLOW``; give it the existing file's mode (FILES-2), or 0600
    for a new file whatever the umask (FILES-1); write every byte; fsync; ``os.replace``, never
    a write in place (ATOMIC-1, ATOMIC-2, CRASH-1, CRASH-4); fsync the directory so the rename
    itself is durable (ATOMIC-3, CRASH-5). Any failure before the replace removes
    the temp and re-raises, leaving the old file intact; a failure of the directory sync, after
    the replace, raises :class:`NotDurableError`.
    """
    _replace_via_temp(data_path, data, temp_prefix(data_path), keep_mode=True)


def backup_path(data_path: Path, data: bytes) -> Path:
    """Returns the content-addressed backup name of ``data``: ``MEMORY.md.bak.<sha256 hex[:16]>``.

    Identical content always gets the same name and different content (short of a 64-bit prefix
    collision) a different one, so backups are neither duplicated nor overwritten (DRIFT-3:
    ``<FILE>.bak.<suffix>``; DRIFT-4).
    """
    return data_path.with_name(f"{data_path.name}.bak.{digest(data)[:16]}")


def write_backup(data_path: Path, data: bytes) -> Path:
    """Saves ``data`` byte-exactly as a backup of ``data_path`` and returns the backup's path.

    When :func:`backup_path` already holds exactly ``data``, it is returned untouched. When it holds
    other bytes (a collision of the 16-digit prefix), the full 64-digit name is used instead. A
    backup with different bytes is never overwritten (DRIFT-4): if both names hold other
    bytes, ``FileExistsError`` is raised. New backups are written like :func:`atomic_write`
    (temp, fsync, rename, directory fsync) with mode 0600 (FILES-1), byte-exact (DRIFT-3).
    """
    short = backup_path(data_path, data)
    for candidate in (short, short.with_name(f"{data_path.name}.bak.{digest(data)}")):
        existing = read_file(candidate)
        if existing == data:
            return candidate
        if existing is None:
            _replace_via_temp(candidate, data, temp_prefix(data_path), keep_mode=False)
            return candidate
    raise FileExistsError(
        errno.EEXIST,
        f"both backup names of {data_path.name} already hold different bytes; "
        "refusing to overwrite a backup — move one of them away",
        str(candidate),
    )


def _replace_via_temp(target: Path, data: bytes, prefix: str, *, keep_mode: bool) -> None:
    """Writes ``data`` to a fresh temp named ``prefix + <random>`` and renames it over ``target``.

    The shared body of :func:`atomic_write` and :func:`write_backup`; ``keep_mode`` copies the
    mode of an existing ``target`` instead of 0600 (FILES-2). A failure before the rename
    removes the temp and leaves ``target`` intact (ATOMIC-4).
    """
    try:
        current = os.lstat(target)
    except FileNotFoundError:
        current = None
    if current is not None and stat.S_ISLNK(current.st_mode):
        raise OSError(
            errno.ELOOP,
            f"{target.name} is a symlink; refusing to replace it with a regular file "
            "(write to the link's target yourself or replace the link by a regular file)",
            str(target),
        )
    mode = stat.S_IMODE(current.st_mode) if keep_mode and current is not None else NEW_FILE_MODE
    temp = target.with_name(prefix + secrets.token_hex(8))
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        NEW_FILE_MODE,
    )
    try:
        try:
            # The mode is set before the fsync so that it is as durable as the bytes.
            os.fchmod(fd, mode)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        _unlink_if_present(temp)
        raise
    _fsync_directory(target.parent)


def _write_all(fd: int, data: bytes) -> None:
    """Writes every byte of ``data`` to ``fd``, looping on short writes."""
    view = memoryview(data)
    while view:
        view = view[_checked_write_count(os.write(fd, view)) :]


def _checked_write_count(count: int) -> int:
    """Returns ``count``, a write's byte count; a write of nothing would loop forever, so 0 is
    raised as ``EIO``."""
    if count <= 0:
        raise OSError(errno.EIO, "write made no progress")
    return count


def _unlink_if_present(path: Path) -> None:
    """Deletes ``path``; a file already gone is fine."""
    with suppress(FileNotFoundError):
        os.unlink(path)


def _fsync_directory(directory: Path) -> None:
    """Syncs ``directory`` so that a rename inside it survives power loss (ATOMIC-3).

    A filesystem that cannot sync directories (``EINVAL``/``ENOTSUP``) is accepted as is; any
    other failure raises :class:`NotDurableError`.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        if error.errno in _DIR_FSYNC_UNSUPPORTED:
            return
        raise NotDurableError(
            error.errno,
            f"renamed into {directory} but could not sync the directory: {error.strerror}; "
            "the new bytes are in place but may not survive a power loss",
            str(directory),
        ) from error
