"""Tests of the reference store's file machinery (LOCK, ATOMIC, CRASH, DRIFT, FILES clauses)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import multiprocessing
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memspec.reference_impl import files
from memspec.reference_impl.files import NotDurableError

FORK = multiprocessing.get_context("fork")
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.fixture
def data_path(tmp_path: Path) -> Path:
    """Returns the path of a MEMORY.md in a fresh, empty root."""
    return tmp_path / "MEMORY.md"


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """Runs the test with umask 0, so that modes come from the code, not from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    """Returns the permission bits of ``path`` (not following a symlink)."""
    return stat.S_IMODE(os.lstat(path).st_mode)


def leftover_temps(directory: Path) -> list[str]:
    """Returns the names of temp files left in ``directory``."""
    return sorted(name for name in os.listdir(directory) if ".tmp." in name)


def failing(error_number: int) -> Callable[..., object]:
    """Returns a stand-in for an os function that always fails with ``error_number``."""

    def fail(*args: object, **kwargs: object) -> object:
        raise OSError(error_number, os.strerror(error_number))

    return fail


# --- lock_path and locked (LOCK, FILES clauses) -------------------------------------------


def test_lock_path_is_beside_the_data_file(data_path: Path) -> None:
    # The lock is a separate file next to the data file, named <FILE>.lock.
    assert files.lock_path(data_path) == data_path.parent / "MEMORY.md.lock"
    assert files.lock_path(Path("root/USER.md")) == Path("root/USER.md.lock")


def test_locked_creates_a_0600_lock_file_and_yields_its_fd(
    data_path: Path, umask_zero: None
) -> None:
    with files.locked(data_path) as fd:
        # The yielded descriptor is the lock file, created with mode 0600.
        assert os.fstat(fd).st_ino == os.stat(files.lock_path(data_path)).st_ino
        assert mode_of(files.lock_path(data_path)) == 0o600
    # The data file itself is neither created nor touched by locking.
    assert not data_path.exists()


def try_lock_nonblocking(data_path: Path) -> bool:
    """Returns whether a new open file description can take the lock right now."""
    fd = os.open(files.lock_path(data_path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_locked_holds_the_lock_and_releases_it_on_exit(data_path: Path) -> None:
    with files.locked(data_path) as fd:
        # While held, nobody else can take the lock.
        assert not try_lock_nonblocking(data_path)
    # On exit the lock is released and the descriptor closed.
    assert try_lock_nonblocking(data_path)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_locked_releases_the_lock_when_the_body_raises(data_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), files.locked(data_path):
        raise RuntimeError("boom")
    # An exception in the body never leaves the lock held.
    assert try_lock_nonblocking(data_path)


def test_locked_closes_the_fd_when_flock_fails(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[int] = []
    real_open = os.open

    def recording_open(*args: object, **kwargs: object) -> int:
        fd = real_open(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(fd)
        return fd

    monkeypatch.setattr(os, "open", recording_open)
    monkeypatch.setattr(fcntl, "flock", failing(errno.ENOLCK))
    with pytest.raises(OSError) as caught, files.locked(data_path):
        pytest.fail("the body must not run without the lock")
    # A failed flock propagates and the lock file's descriptor is closed.
    assert caught.value.errno == errno.ENOLCK
    assert len(opened) == 1
    with pytest.raises(OSError):
        os.fstat(opened[0])


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_locked_refuses_a_symlinked_lock_file(data_path: Path, dangling: bool) -> None:
    victim = data_path.parent / "victim"
    if not dangling:
        victim.write_bytes(b"keep")
    files.lock_path(data_path).symlink_to(victim)
    with pytest.raises(OSError) as caught, files.locked(data_path):
        pytest.fail("a symlinked lock file must not be locked")
    # O_NOFOLLOW: a lock file that is a symlink raises ELOOP; the link's target is left alone.
    assert caught.value.errno == errno.ELOOP
    if dangling:
        assert not victim.exists()
    else:
        assert victim.read_bytes() == b"keep"


def hold_lock(data_path: Path, held: object, release: object) -> None:
    """Child process body: hold the lock until told to release it."""
    with files.locked(data_path):
        held.set()  # type: ignore[attr-defined]
        release.wait(30)  # type: ignore[attr-defined]


def test_lock_excludes_another_process(data_path: Path) -> None:
    held, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=hold_lock, args=(data_path, held, release))
    holder.start()
    try:
        assert held.wait(30), "the holder process never took the lock"
        acquired = threading.Event()

        def take_lock() -> None:
            with files.locked(data_path):
                acquired.set()

        waiter = threading.Thread(target=take_lock, daemon=True)
        waiter.start()
        # While another process holds the lock, locked() blocks.
        assert not acquired.wait(0.3)
        release.set()
        # Once the holder releases it, the waiter gets it.
        assert acquired.wait(30)
        waiter.join(30)
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0


def kill_holder(data_path: Path, held: object) -> None:
    """Child process body: take the lock and hang until killed."""
    with files.locked(data_path):
        held.set()  # type: ignore[attr-defined]
        time.sleep(60)


def test_lock_of_a_killed_process_is_released(data_path: Path) -> None:
    held = FORK.Event()
    holder = FORK.Process(target=kill_holder, args=(data_path, held))
    holder.start()
    assert held.wait(30)
    assert not try_lock_nonblocking(data_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    # The kernel drops a flock when its holder dies, so a crash never wedges the store.
    assert try_lock_nonblocking(data_path)


# --- digests in the lock file (DRIFT clauses) ---------------------------------------------


def test_digest_is_hex_sha256() -> None:
    assert files.digest(b"") == EMPTY_SHA256
    assert files.digest(b"abc") == hashlib.sha256(b"abc").hexdigest()


@given(st.binary())
def test_digest_is_64_lowercase_hex(data: bytes) -> None:
    value = files.digest(data)
    assert len(value) == 64
    assert value == value.lower()
    int(value, 16)


def test_recorded_digest_round_trips(data_path: Path) -> None:
    with files.locked(data_path) as fd:
        # A fresh (empty) lock file records nothing.
        assert files.read_recorded_digest(fd) is None
        files.record_digest(fd, files.digest(b"one"))
        assert files.read_recorded_digest(fd) == files.digest(b"one")
        files.record_digest(fd, EMPTY_SHA256)
        assert files.read_recorded_digest(fd) == EMPTY_SHA256
    # The record is the lock file's whole content and outlives the lock.
    assert files.lock_path(data_path).read_bytes() == EMPTY_SHA256.encode()
    with files.locked(data_path) as fd:
        assert files.read_recorded_digest(fd) == EMPTY_SHA256


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        EMPTY_SHA256.upper().encode(),
        EMPTY_SHA256[:63].encode(),
        (EMPTY_SHA256 + "0").encode(),
        EMPTY_SHA256.encode() + b"\nextra",
        b"\xff" * 64,
        EMPTY_SHA256.encode() + b" " * 100,
    ],
    ids=["empty", "word", "upper", "short", "long", "trailer", "binary", "oversized"],
)
def test_a_lock_file_without_a_valid_digest_records_none(data_path: Path, content: bytes) -> None:
    files.lock_path(data_path).write_bytes(content)
    with files.locked(data_path) as fd:
        assert files.read_recorded_digest(fd) is None


def test_surrounding_whitespace_around_a_digest_is_tolerated(data_path: Path) -> None:
    files.lock_path(data_path).write_bytes(b"  " + EMPTY_SHA256.encode() + b"\n")
    with files.locked(data_path) as fd:
        assert files.read_recorded_digest(fd) == EMPTY_SHA256


def test_record_digest_replaces_longer_content(data_path: Path) -> None:
    files.lock_path(data_path).write_bytes(b"x" * 500)
    with files.locked(data_path) as fd:
        files.record_digest(fd, EMPTY_SHA256)
        # The old, longer content is truncated away.
        assert files.read_recorded_digest(fd) == EMPTY_SHA256
    assert files.lock_path(data_path).read_bytes() == EMPTY_SHA256.encode()


@pytest.mark.parametrize("value", ["", "abc", EMPTY_SHA256.upper(), "é" * 64, None, b"00" * 32])
def test_record_digest_rejects_a_non_digest(data_path: Path, value: object) -> None:
    with files.locked(data_path) as fd, pytest.raises(ValueError, match="64-digit"):
        files.record_digest(fd, value)  # type: ignore[arg-type]
    # Nothing was recorded.
    assert files.lock_path(data_path).read_bytes() == b""


def test_record_digest_loops_on_short_writes(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pwrite = os.pwrite
    calls: list[int] = []

    def one_byte_pwrite(fd: int, data: bytes, offset: int) -> int:
        calls.append(offset)
        return real_pwrite(fd, data[:1], offset)

    monkeypatch.setattr(os, "pwrite", one_byte_pwrite)
    with files.locked(data_path) as fd:
        files.record_digest(fd, EMPTY_SHA256)
        assert files.read_recorded_digest(fd) == EMPTY_SHA256
    assert calls == list(range(64))


def test_record_digest_fails_on_a_write_without_progress(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: 0)
    with files.locked(data_path) as fd, pytest.raises(OSError) as caught:
        files.record_digest(fd, EMPTY_SHA256)
    assert caught.value.errno == errno.EIO


# --- read_file (FILES clauses) -------------------------------------------------------------


def test_read_file_returns_bytes_or_none_when_absent(data_path: Path) -> None:
    assert files.read_file(data_path) is None
    data_path.write_bytes(b"\xef\xbb\xbfa\r\n\xff")
    # Bytes come back exactly, undecodable ones included.
    assert files.read_file(data_path) == b"\xef\xbb\xbfa\r\n\xff"


def test_read_file_follows_symlinks(data_path: Path) -> None:
    real = data_path.parent / "elsewhere.md"
    real.write_bytes(b"linked")
    data_path.symlink_to(real)
    assert files.read_file(data_path) == b"linked"
    real.unlink()
    # A dangling link reads as absent.
    assert files.read_file(data_path) is None


def test_read_file_propagates_other_errors(data_path: Path) -> None:
    data_path.mkdir()
    # Unreadable is never absent: a directory in the file's place raises.
    with pytest.raises(IsADirectoryError):
        files.read_file(data_path)


@pytest.mark.parametrize("error_number", [errno.EACCES, errno.EIO])
def test_read_file_propagates_io_errors(
    data_path: Path, monkeypatch: pytest.MonkeyPatch, error_number: int
) -> None:
    data_path.write_bytes(b"x")
    monkeypatch.setattr(files, "open", failing(error_number), raising=False)
    with pytest.raises(OSError) as caught:
        files.read_file(data_path)
    assert caught.value.errno == error_number


# --- remove_stale_temps (CRASH clauses) ----------------------------------------------------


def test_temp_prefix_names_the_data_file() -> None:
    assert files.temp_prefix(Path("r/MEMORY.md")) == ".MEMORY.md.tmp."
    assert files.temp_prefix(Path("r/USER.md")) == ".USER.md.tmp."


def test_remove_stale_temps_removes_only_this_files_temps(data_path: Path) -> None:
    root = data_path.parent
    stale = [".MEMORY.md.tmp.1a2b", ".MEMORY.md.tmp.x", ".MEMORY.md.tmp."]
    kept = [
        "MEMORY.md",
        "MEMORY.md.lock",
        "MEMORY.md.bak.0123456789abcdef",
        ".USER.md.tmp.1a2b",
        ".MEMORY.md.tmp",
        "MEMORY.md.tmp.1a2b",
        "notes.txt",
    ]
    for name in stale + kept:
        (root / name).write_bytes(b"x")
    (root / ".MEMORY.md.tmp.dir").mkdir()
    target = root / "target"
    target.write_bytes(b"keep")
    (root / ".MEMORY.md.tmp.link").symlink_to(target)
    # Every temp of MEMORY.md goes (a symlinked temp as a link); everything else stays.
    assert files.remove_stale_temps(data_path) == len(stale) + 1
    assert sorted(os.listdir(root)) == sorted([*kept, ".MEMORY.md.tmp.dir", "target"])
    assert target.read_bytes() == b"keep"
    # Nothing left: a second sweep removes nothing.
    assert files.remove_stale_temps(data_path) == 0


def test_remove_stale_temps_ignores_a_temp_that_vanished(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = data_path.parent
    for name in (".MEMORY.md.tmp.a", ".MEMORY.md.tmp.b"):
        (root / name).write_bytes(b"x")
    real_unlink = os.unlink

    def racing_unlink(path: str | Path) -> None:
        real_unlink(path)
        if str(path).endswith(".a"):
            raise FileNotFoundError(errno.ENOENT, "gone", str(path))

    monkeypatch.setattr(os, "unlink", racing_unlink)
    # A temp removed by someone else meanwhile is not counted and not an error.
    assert files.remove_stale_temps(data_path) == 1
    assert leftover_temps(root) == []


def crash_while_writing(data_path: Path, wrote: object) -> None:
    """Child process body: start an atomic write and hang before the rename, until killed."""
    real_fsync = os.fsync

    def hang(fd: int) -> None:
        real_fsync(fd)
        wrote.set()  # type: ignore[attr-defined]
        time.sleep(60)

    os.fsync = hang  # the child is killed before it could matter
    with files.locked(data_path):
        files.atomic_write(data_path, b"new")


def test_a_writer_killed_mid_write_leaves_the_old_file_and_a_temp_the_next_sweeps(
    data_path: Path,
) -> None:
    data_path.write_bytes(b"old")
    wrote = FORK.Event()
    writer = FORK.Process(target=crash_while_writing, args=(data_path, wrote))
    writer.start()
    assert wrote.wait(30)
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(30)
    # A crash before the rename leaves the old file whole and one stale temp.
    assert data_path.read_bytes() == b"old"
    assert len(leftover_temps(data_path.parent)) == 1
    with files.locked(data_path):
        assert files.remove_stale_temps(data_path) == 1
    assert leftover_temps(data_path.parent) == []


# --- atomic_write (ATOMIC, CRASH, FILES clauses) -------------------------------------------


def test_atomic_write_creates_a_new_file_with_mode_0600(data_path: Path, umask_zero: None) -> None:
    files.atomic_write(data_path, b"a\n\xc2\xa7\nb")
    assert data_path.read_bytes() == b"a\n\xc2\xa7\nb"
    # A new file is 0600 whatever the umask.
    assert mode_of(data_path) == 0o600
    assert leftover_temps(data_path.parent) == []


def test_atomic_write_new_file_is_0600_under_a_restrictive_umask(data_path: Path) -> None:
    old = os.umask(0o277)
    try:
        files.atomic_write(data_path, b"x")
    finally:
        os.umask(old)
    assert mode_of(data_path) == 0o600


@pytest.mark.parametrize("mode", [0o640, 0o644, 0o600, 0o660, 0o400])
def test_atomic_write_keeps_the_existing_mode(data_path: Path, umask_zero: None, mode: int) -> None:
    data_path.write_bytes(b"old")
    data_path.chmod(mode)
    old_inode = os.stat(data_path).st_ino
    files.atomic_write(data_path, b"new")
    # Rewriting keeps an existing file's mode (hermes #22889) and replaces the inode.
    assert data_path.read_bytes() == b"new"
    assert mode_of(data_path) == mode
    assert os.stat(data_path).st_ino != old_inode


def test_atomic_write_writes_the_empty_file(data_path: Path) -> None:
    data_path.write_bytes(b"old")
    files.atomic_write(data_path, b"")
    assert data_path.read_bytes() == b""


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_atomic_write_refuses_a_symlinked_data_file(data_path: Path, dangling: bool) -> None:
    real = data_path.parent / "real.md"
    if not dangling:
        real.write_bytes(b"real")
    data_path.symlink_to(real)
    with pytest.raises(OSError, match="symlink") as caught:
        files.atomic_write(data_path, b"new")
    # A link is never replaced by a regular file, nor written through.
    assert caught.value.errno == errno.ELOOP
    assert data_path.is_symlink()
    assert os.readlink(data_path) == str(real)
    assert real.exists() is not dangling
    if not dangling:
        assert real.read_bytes() == b"real"
    assert leftover_temps(data_path.parent) == []


def test_atomic_write_loops_on_short_writes(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def short_write(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data[:3]))

    monkeypatch.setattr(os, "write", short_write)
    payload = bytes(range(256)) * 4
    files.atomic_write(data_path, payload)
    assert data_path.read_bytes() == payload


def test_atomic_write_records_the_durable_order(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_path.write_bytes(b"old")
    calls: list[tuple[str, str]] = []
    names: dict[int, str] = {}
    real_open, real_write, real_fsync, real_replace, real_fchmod = (
        os.open,
        os.write,
        os.fsync,
        os.replace,
        os.fchmod,
    )

    def rec_open(path: str | Path, flags: int, mode: int = 0o777, **kwargs: object) -> int:
        fd = real_open(path, flags, mode, **kwargs)  # type: ignore[arg-type]
        names[fd] = "dir" if flags & os.O_DIRECTORY else "temp"
        return fd

    def rec_write(fd: int, data: bytes) -> int:
        calls.append(("write", names[fd]))
        return real_write(fd, data)

    def rec_fsync(fd: int) -> None:
        calls.append(("fsync", names[fd]))
        real_fsync(fd)

    def rec_replace(src: str | Path, dst: str | Path) -> None:
        calls.append(("replace", Path(dst).name))
        real_replace(src, dst)

    def rec_fchmod(fd: int, mode: int) -> None:
        calls.append(("fchmod", names[fd]))
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "open", rec_open)
    monkeypatch.setattr(os, "write", rec_write)
    monkeypatch.setattr(os, "fsync", rec_fsync)
    monkeypatch.setattr(os, "replace", rec_replace)
    monkeypatch.setattr(os, "fchmod", rec_fchmod)
    files.atomic_write(data_path, b"new")
    # The bytes and mode are synced before the rename; the directory is synced after it.
    assert calls == [
        ("fchmod", "temp"),
        ("write", "temp"),
        ("fsync", "temp"),
        ("replace", "MEMORY.md"),
        ("fsync", "dir"),
    ]


def test_atomic_write_uses_a_fresh_exclusive_nofollow_temp(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str, int, int]] = []
    real_open = os.open

    def rec_open(path: str | Path, flags: int, mode: int = 0o777, **kwargs: object) -> int:
        opened.append((Path(path).name, flags, mode))
        return real_open(path, flags, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", rec_open)
    files.atomic_write(data_path, b"one")
    files.atomic_write(data_path, b"two")
    temps = [entry for entry in opened if entry[0].startswith(".MEMORY.md.tmp.")]
    # Each write has its own uniquely named temp, created exclusively, not through a link.
    assert len(temps) == 2
    assert temps[0][0] != temps[1][0]
    for _name, flags, mode in temps:
        for flag in (os.O_WRONLY, os.O_CREAT, os.O_EXCL, os.O_NOFOLLOW, os.O_CLOEXEC):
            assert flags & flag
        assert mode == 0o600


@pytest.mark.parametrize(
    ("function", "error_number"),
    [
        ("write", errno.ENOSPC),
        ("write", errno.EIO),
        ("fsync", errno.EIO),
        ("fsync", errno.ENOSPC),
        ("fchmod", errno.EPERM),
        ("close", errno.EIO),
        ("replace", errno.EIO),
        ("replace", errno.EXDEV),
    ],
)
def test_a_failure_before_the_rename_keeps_the_old_file_and_no_temp(
    data_path: Path, monkeypatch: pytest.MonkeyPatch, function: str, error_number: int
) -> None:
    data_path.write_bytes(b"old")
    data_path.chmod(0o640)
    real_close = os.close

    if function == "close":
        # Close the descriptor for real, then report the failure (as NFS may).
        def close_then_fail(fd: int) -> None:
            real_close(fd)
            raise OSError(error_number, os.strerror(error_number))

        monkeypatch.setattr(os, "close", close_then_fail)
    else:
        monkeypatch.setattr(os, function, failing(error_number))
    with pytest.raises(OSError) as caught:
        files.atomic_write(data_path, b"new content")
    monkeypatch.undo()
    # The error propagates unchanged, the old file is intact and no temp is left behind.
    assert caught.value.errno == error_number
    assert not isinstance(caught.value, NotDurableError)
    assert data_path.read_bytes() == b"old"
    assert mode_of(data_path) == 0o640
    assert leftover_temps(data_path.parent) == []


def test_a_write_without_progress_fails_instead_of_looping(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_path.write_bytes(b"old")
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(OSError) as caught:
        files.atomic_write(data_path, b"new")
    monkeypatch.undo()
    assert caught.value.errno == errno.EIO
    assert data_path.read_bytes() == b"old"
    assert leftover_temps(data_path.parent) == []


def test_an_interrupt_during_the_write_removes_the_temp(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_path.write_bytes(b"old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.atomic_write(data_path, b"new")
    monkeypatch.undo()
    assert data_path.read_bytes() == b"old"
    assert leftover_temps(data_path.parent) == []


def test_cleanup_tolerates_a_temp_that_is_already_gone(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_path.write_bytes(b"old")

    def vanish_then_fail(src: str | Path, dst: str | Path) -> None:
        os.unlink(src)
        raise OSError(errno.EIO, "rename failed")

    monkeypatch.setattr(os, "replace", vanish_then_fail)
    with pytest.raises(OSError, match="rename failed"):
        files.atomic_write(data_path, b"new")
    assert data_path.read_bytes() == b"old"
    assert leftover_temps(data_path.parent) == []


def test_atomic_write_over_a_directory_fails_cleanly(data_path: Path) -> None:
    data_path.mkdir()
    with pytest.raises(IsADirectoryError):
        files.atomic_write(data_path, b"new")
    assert data_path.is_dir()
    assert leftover_temps(data_path.parent) == []


def test_a_failed_directory_sync_raises_not_durable_with_the_new_bytes_in_place(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_path.write_bytes(b"old")
    real_fsync = os.fsync

    def fail_on_directory(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fail_on_directory)
    with pytest.raises(NotDurableError, match="may not survive") as caught:
        files.atomic_write(data_path, b"new")
    # The rename happened: the error says so, and it is still an OSError with the errno.
    assert isinstance(caught.value, OSError)
    assert caught.value.errno == errno.EIO
    assert data_path.read_bytes() == b"new"
    assert leftover_temps(data_path.parent) == []


def test_a_directory_that_cannot_be_opened_raises_not_durable(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refuse_directory(path: str | Path, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_DIRECTORY:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refuse_directory)
    with pytest.raises(NotDurableError) as caught:
        files.atomic_write(data_path, b"new")
    assert caught.value.errno == errno.EACCES
    assert data_path.read_bytes() == b"new"


@pytest.mark.parametrize("error_number", [errno.EINVAL, errno.ENOTSUP])
def test_a_filesystem_that_cannot_sync_directories_is_accepted(
    data_path: Path, monkeypatch: pytest.MonkeyPatch, error_number: int
) -> None:
    real_fsync = os.fsync

    def unsupported_on_directory(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(error_number, os.strerror(error_number))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", unsupported_on_directory)
    files.atomic_write(data_path, b"new")
    assert data_path.read_bytes() == b"new"


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(versions=st.lists(st.binary(max_size=300), min_size=1, max_size=5))
def test_atomic_write_round_trips_any_bytes(tmp_path: Path, versions: list[bytes]) -> None:
    data_path = tmp_path / "USER.md"
    for data in versions:
        files.atomic_write(data_path, data)
        # Reading back yields exactly the bytes written, and no temp survives.
        assert files.read_file(data_path) == data
        assert leftover_temps(tmp_path) == []


# --- backups (DRIFT clauses) ---------------------------------------------------------------


def test_backup_path_is_content_addressed(data_path: Path) -> None:
    path = files.backup_path(data_path, b"")
    assert path == data_path.parent / f"MEMORY.md.bak.{EMPTY_SHA256[:16]}"
    assert files.backup_path(data_path.parent / "USER.md", b"").name == (
        f"USER.md.bak.{EMPTY_SHA256[:16]}"
    )


@given(st.binary(), st.binary())
def test_backup_names_are_equal_exactly_for_equal_content(first: bytes, second: bytes) -> None:
    data_path = Path("root/MEMORY.md")
    same_name = files.backup_path(data_path, first) == files.backup_path(data_path, second)
    # Identical content -> same name; different content -> different name.
    assert same_name == (first == second)


def test_write_backup_writes_a_byte_exact_0600_file(data_path: Path, umask_zero: None) -> None:
    data_path.write_bytes(b"ours")
    data_path.chmod(0o644)
    external = b"\xef\xbb\xbfexternal\r\n\xff tail"
    path = files.write_backup(data_path, external)
    assert path == files.backup_path(data_path, external)
    assert path.read_bytes() == external
    # Backups are private whatever the data file's mode, and leave no temp behind.
    assert mode_of(path) == 0o600
    assert leftover_temps(data_path.parent) == []
    assert data_path.read_bytes() == b"ours"


def test_write_backup_of_identical_content_is_not_duplicated(data_path: Path) -> None:
    first = files.write_backup(data_path, b"external")
    before = os.stat(first)
    second = files.write_backup(data_path, b"external")
    # The same content maps to the same, untouched file: no duplicate, no rewrite.
    assert second == first
    after = os.stat(second)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert [name for name in os.listdir(data_path.parent) if ".bak." in name] == [first.name]


def test_different_content_gets_a_different_backup(data_path: Path) -> None:
    first = files.write_backup(data_path, b"one")
    second = files.write_backup(data_path, b"two")
    assert first != second
    assert (first.read_bytes(), second.read_bytes()) == (b"one", b"two")


def test_a_prefix_collision_uses_the_full_name_and_keeps_the_other_backup(
    data_path: Path,
) -> None:
    data = b"mine"
    short = files.backup_path(data_path, data)
    short.write_bytes(b"someone else's bytes")
    path = files.write_backup(data_path, data)
    # The 16-digit name is taken by other bytes: the full 64-digit name is used instead.
    assert path.name == f"MEMORY.md.bak.{files.digest(data)}"
    assert path.read_bytes() == data
    assert short.read_bytes() == b"someone else's bytes"
    # Asking again finds the full-name backup and writes nothing new.
    assert files.write_backup(data_path, data) == path
    assert len([name for name in os.listdir(data_path.parent) if ".bak." in name]) == 2


def test_write_backup_never_overwrites_when_both_names_are_taken(data_path: Path) -> None:
    data = b"mine"
    short = files.backup_path(data_path, data)
    full = short.with_name(f"MEMORY.md.bak.{files.digest(data)}")
    short.write_bytes(b"other 1")
    full.write_bytes(b"other 2")
    with pytest.raises(FileExistsError, match="refusing to overwrite a backup"):
        files.write_backup(data_path, data)
    assert (short.read_bytes(), full.read_bytes()) == (b"other 1", b"other 2")
    assert leftover_temps(data_path.parent) == []


def test_write_backup_propagates_an_unreadable_backup(data_path: Path) -> None:
    files.backup_path(data_path, b"x").mkdir()
    with pytest.raises(IsADirectoryError):
        files.write_backup(data_path, b"x")


def test_write_backup_refuses_a_dangling_symlink_in_its_place(data_path: Path) -> None:
    path = files.backup_path(data_path, b"x")
    path.symlink_to(data_path.parent / "nowhere")
    with pytest.raises(OSError) as caught:
        files.write_backup(data_path, b"x")
    assert caught.value.errno == errno.ELOOP
    assert path.is_symlink()
    assert not (data_path.parent / "nowhere").exists()


def test_backup_temps_are_swept_with_the_data_files_temps(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real_open = os.open

    def rec_open(path: str | Path, flags: int, *args: object, **kwargs: object) -> int:
        opened.append(Path(path).name)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", rec_open)
    files.write_backup(data_path, b"external")
    temps = [name for name in opened if ".tmp." in name]
    # A backup's temp carries the data file's temp prefix, so a crash mid-backup is swept too.
    assert len(temps) == 1
    assert temps[0].startswith(files.temp_prefix(data_path))


def test_a_failed_backup_write_leaves_nothing(
    data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", failing(errno.ENOSPC))
    with pytest.raises(OSError) as caught:
        files.write_backup(data_path, b"external")
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC
    assert os.listdir(data_path.parent) == []
