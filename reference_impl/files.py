"""The file machinery of the reference store: lock, atomic write, digest, backups (POSIX only).

Beside each data file live ``MEMORY.md.lock`` (a separate file, since the data file's inode changes
with every rename, LOCK-1; it holds the sha256 of the bytes last written, DRIFT-5),
``.MEMORY.md.tmp.<random>`` temps (ATOMIC-1) and ``MEMORY.md.bak.<sha256 hex[:16]>``
content-addressed backups (DRIFT-3, DRIFT-4). One mutation runs :func:`locked`,
:func:`remove_stale_temps`, :func:`read_file`, :func:`atomic_write`, :func:`record_digest`.
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
    """The rename of an atomic write happened but syncing the directory failed (ATOMIC-3): the new
    bytes are in place but may not survive a power loss, so unlike any other ``OSError`` that
    :func:`atomic_write` and :func:`write_backup` raise, the old file is *not* intact any more."""


def lock_path(data_path: Path) -> Path:
    """Returns the lock file of ``data_path``: ``MEMORY.md`` -> ``MEMORY.md.lock``, never the data
    file itself (LOCK-1)."""
    return data_path.with_name(data_path.name + ".lock")


@contextmanager
def locked(data_path: Path, *, wait: bool = True) -> Iterator[int]:
    """Holds the exclusive ``flock`` of ``data_path``'s lock file and yields its descriptor.

    The lock file is opened with ``O_NOFOLLOW`` and mode 0600, so a symlink raises ``OSError``
    (``ELOOP``) instead of being followed (FILES-3, FILES-1). The lock excludes every other session
    of the root (LOCK-1) for the whole body (LOCK-3), and the kernel releases it if its holder dies
    (CRASH-3). Without ``wait``, a lock another process holds raises ``BlockingIOError``.
    """
    fd = os.open(
        lock_path(data_path),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        NEW_FILE_MODE,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
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
    """Returns the digest recorded in the lock file (DRIFT-5), or ``None`` when it holds anything
    but 64 lowercase hex digits: the data file is then treated as foreign, costing at worst one
    extra backup."""
    raw = os.pread(lock_fd, _MAX_LOCK_CONTENT + 1, 0)
    if len(raw) > _MAX_LOCK_CONTENT:
        return None
    text = raw.strip()
    return text.decode("ascii") if _DIGEST_RE.fullmatch(text) else None


def record_digest(lock_fd: int, digest: str) -> None:
    """Records ``digest`` as the lock file's whole content (DRIFT-5), under the lock, after
    :func:`atomic_write`. Not fsynced: a lost record costs one extra backup, never a loss."""
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest.encode("ascii", "replace")):
        raise ValueError(f"expected a 64-digit lowercase hex sha256, got digest={digest!r}")
    data = digest.encode("ascii")
    written = 0
    while written < len(data):
        written += _checked_write_count(os.pwrite(lock_fd, data[written:], written))
    os.ftruncate(lock_fd, len(data))


def read_file(path: Path) -> bytes | None:
    """Returns the bytes of ``path`` (symlinks followed), or ``None`` when it does not exist; every
    other ``OSError`` propagates, since an unreadable file is never empty (READ-7)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def temp_prefix(data_path: Path) -> str:
    """Returns the name prefix of ``data_path``'s temp files, backups' included: ``MEMORY.md`` ->
    ``.MEMORY.md.tmp.`` (CRASH-2)."""
    return f".{data_path.name}.tmp."


def remove_stale_temps(data_path: Path) -> int:
    """Deletes the leftover temp files of ``data_path`` and returns how many it deleted. Only a lock
    holder writes temps, so a caller holding the lock finds only a crashed writer's (CRASH-2,
    FILES-5); directories are never touched."""
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
    """Replaces ``data_path``'s content with ``data`` so that no reader or crash sees anything but
    the old or the new bytes.

    A symlink is refused with ``ELOOP`` (FILES-4); the temp gets the existing mode (FILES-2) or 0600
    (FILES-1), is fsynced and renamed over the file (ATOMIC-1, ATOMIC-2, CRASH-1, CRASH-4), then the
    directory is synced (ATOMIC-3, CRASH-5). A failure before the rename leaves the old file intact
    and re-raises; a failed directory sync raises :class:`NotDurableError`.
    """
    _replace_via_temp(data_path, data, temp_prefix(data_path), keep_mode=True)


def backup_path(data_path: Path, data: bytes) -> Path:
    """Returns the content-addressed backup name of ``data``: ``MEMORY.md.bak.<sha256 hex[:16]>``
    (DRIFT-3, DRIFT-4)."""
    return data_path.with_name(f"{data_path.name}.bak.{digest(data)[:16]}")


def write_backup(data_path: Path, data: bytes) -> Path:
    """Saves ``data`` byte-exactly as a backup of ``data_path`` and returns the backup's path
    (DRIFT-3, FILES-1). An existing backup holding ``data`` is reused; on a 16-digit prefix
    collision the full name is used, and when both hold other bytes ``FileExistsError`` is raised
    rather than overwrite a backup (DRIFT-4). A failed directory sync after the rename raises
    :class:`NotDurableError` whose ``filename`` is the backup, in place (ATOMIC-3)."""
    short = backup_path(data_path, data)
    for candidate in (short, short.with_name(f"{data_path.name}.bak.{digest(data)}")):
        existing = read_file(candidate)
        if existing == data:
            return candidate
        if existing is None:
            try:
                _replace_via_temp(candidate, data, temp_prefix(data_path), keep_mode=False)
            except NotDurableError as error:
                raise NotDurableError(error.errno, error.strerror, str(candidate)) from error
            return candidate
    raise FileExistsError(
        errno.EEXIST,
        f"both backup names of {data_path.name} already hold different bytes; "
        "refusing to overwrite a backup — move one of them away",
        str(candidate),
    )


def _replace_via_temp(target: Path, data: bytes, prefix: str, *, keep_mode: bool) -> None:
    """Writes ``data`` to a fresh temp named ``prefix + <random>`` and renames it over ``target``;
    ``keep_mode`` copies an existing ``target``'s mode (FILES-2). A failure before the rename
    removes the temp and leaves ``target`` intact (ATOMIC-4)."""
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
    """Syncs ``directory`` so that a rename inside it survives power loss (ATOMIC-3); ``EINVAL`` and
    ``ENOTSUP`` are accepted, any other failure raises :class:`NotDurableError`."""
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
