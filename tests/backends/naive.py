"""A minimal memory store written from the contract alone, and the base of backends broken on
purpose (``tests/backends/naive_broken.py``).

It uses the spec's pure functions (codec, rules, snapshot, fence judge's finders, threats) but
none of the reference implementation, and it is correct for everything the named checks of
files, atomic, read, contract, fence, scan and drift look at: a lock file opened with
``O_NOFOLLOW``, a re-read under the lock, temp-and-rename writes that keep the old mode (0600 for
new files), content-addressed backups before rewriting bytes it did not write, and a fence
sanitised to a fixed point. Each step a check looks at is one small method, so a broken variant
overrides exactly one of them.

It is not multi-process safe beyond ``flock`` and claims neither ``crash-safe`` nor ``durable``.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from memspec.spec import codes
from memspec.spec.codec import WHITESPACE, FileState, classify_bytes, encode_entries
from memspec.spec.fence import find_fence_tags, find_system_notes, frame
from memspec.spec.operations import Add, Batch, Mutation, Remove, Replace
from memspec.spec.rules import Outcome, argument_error, decide
from memspec.spec.snapshot import render_snapshot, render_unreadable
from memspec.spec.targets import FILENAMES, TARGETS
from memspec.spec.threats import find_threats

FEATURES = ("core", "batch", "fence", "drift-guard", "threat-scan")


def _failure(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "code": code, "message": message, **extra}


class NaiveStore:
    """One session on a memory root (CONTRACT-1, CONTRACT-2)."""

    features: tuple[str, ...] = FEATURES

    def __init__(
        self, root: Path, *, memory_char_limit: int = 2200, user_char_limit: int = 1375
    ) -> None:
        self.root = Path(root)
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self.live: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
        self.snapshots: dict[str, str | None] = {target: None for target in TARGETS}

    # --- reading -------------------------------------------------------------------------

    def path(self, target: str) -> Path:
        return self.root / FILENAMES[target]

    def read_bytes(self, path: Path) -> bytes | None:
        """The file's bytes, ``None`` when absent; any other OSError propagates (READ-7)."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def load(self) -> None:
        for target in TARGETS:
            try:
                state = classify_bytes(self.read_bytes(self.path(target)), self.limits[target])
            except OSError:
                state = FileState("unreadable", None)
            if state.entries is None:
                self.snapshots[target] = render_unreadable(target)
                continue
            self.live[target] = state.entries
            self.snapshots[target] = render_snapshot(
                target, state.entries, self.limits[target], find_threats
            )

    def entries(self, target: str) -> Any:
        return list(self.live[target])

    def snapshot(self, target: str) -> str | None:
        return self.snapshots[target]

    # --- fence ---------------------------------------------------------------------------

    def sanitize(self, raw: str) -> str:
        """Removes every fence tag and system note, repeating until none is left (FENCE-3)."""
        while spans := sorted(find_fence_tags(raw) + find_system_notes(raw)):
            kept, position = [], 0
            for start, end in spans:
                kept.append(raw[position : max(position, start)])
                position = max(position, end)
            raw = "".join(kept) + raw[position:]
        return raw.strip(WHITESPACE)

    def fence(self, raw: str) -> str:
        clean = self.sanitize(raw)
        return frame(clean) if clean else ""

    # --- mutations -----------------------------------------------------------------------

    def add(self, target: str, content: str) -> dict[str, Any]:
        return self.mutate(Add(target, content))

    def replace(self, target: str, old_text: str, new_content: str) -> dict[str, Any]:
        return self.mutate(Replace(target, old_text, new_content))

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        return self.mutate(Remove(target, old_text))

    def batch(self, target: str, operations: Any) -> dict[str, Any]:
        return self.mutate(Batch(target, operations))

    def check_arguments(self, op: Mutation) -> Outcome | None:
        return argument_error(op)

    def decide(
        self, op: Mutation, state: FileState, limit: int
    ) -> tuple[Outcome, tuple[str, ...] | None]:
        """The spec's decision of a mutation on the file it read: the step a broken patch
        overrides (``naive_broken.py``)."""
        return decide(op, state, limit)

    def answer(self, outcome: Outcome) -> dict[str, Any]:
        answer: dict[str, Any] = {"ok": outcome.ok, "code": outcome.code}
        if outcome.matches:
            answer["matches"] = list(outcome.matches)
        if outcome.usage is not None:
            answer["usage"] = outcome.usage
        if outcome.duplicate:
            answer["duplicate"] = True
        return answer

    def mutate(self, op: Mutation) -> dict[str, Any]:
        refusal = self.check_arguments(op)
        if refusal is not None:
            return self.answer(refusal)
        path = self.path(op.target)
        try:
            lock = self.open_lock(path)
        except OSError as error:
            return _failure(codes.E_IO, f"cannot open the lock: {error}")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self.mutate_locked(op, path, lock)
        except OSError as error:
            return _failure(codes.E_IO, f"cannot write {path.name}: {error}")
        finally:
            os.close(lock)

    def mutate_locked(self, op: Mutation, path: Path, lock: int) -> dict[str, Any]:
        limit = self.limits[op.target]
        try:
            data = self.read_bytes(path)
        except OSError as error:
            return _failure(codes.E_UNREADABLE, f"cannot read {path.name}: {error}")
        state = self.file_state(op.target, data, limit)
        if state.entries is None:
            return _failure(codes.E_UNREADABLE, f"{path.name} is not UTF-8")
        self.live[op.target] = state.entries
        outcome, result = self.decide(op, state, limit)
        if outcome.code == codes.E_DRIFT:
            assert data is not None
            backup = self.write_backup(path, data)
            return _failure(codes.E_DRIFT, f"saved as {backup.name}", backup=str(backup))
        if result is None:
            return self.answer(outcome)
        answer = self.answer(outcome)
        external = self.recorded(lock) != self.digest(encode_entries(state.entries))
        if state.entries and (state.kind == "foreign" or external):
            saved = self.backup_before_rewrite(path, data)
            if saved is not None:
                answer["backup"] = str(saved)
        new = encode_entries(result)
        self.write_file(path, new)
        self.record(lock, self.digest(new))
        self.live[op.target] = result
        return answer

    def file_state(self, target: str, data: bytes | None, limit: int) -> FileState:
        return classify_bytes(data, limit)

    # --- files ---------------------------------------------------------------------------

    def open_lock(self, path: Path) -> int:
        """Opens ``NAME.lock`` without following a symlink (FILES-3), mode 0600 (FILES-1)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path.with_name(path.name + ".lock"), flags, 0o600)

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def recorded(self, lock: int) -> str:
        return os.pread(lock, 64, 0).decode("ascii", "replace")

    def record(self, lock: int, digest: str) -> None:
        os.pwrite(lock, digest.encode("ascii"), 0)
        os.ftruncate(lock, len(digest))

    def backup_path(self, path: Path, data: bytes) -> Path:
        return path.with_name(f"{path.name}.bak.{self.digest(data)[:16]}")

    def write_backup(self, path: Path, data: bytes) -> Path:
        """Saves ``data`` byte-exactly under its content-addressed name (DRIFT-3, DRIFT-4), or
        under the full digest when other bytes hold that name (a backup is never overwritten)."""
        backup = self.backup_path(path, data)
        content_addressed = backup == NaiveStore.backup_path(self, path, data)
        if content_addressed and self.read_bytes(backup) not in (None, data):
            backup = path.with_name(f"{path.name}.bak.{self.digest(data)}")
        if self.read_bytes(backup) != data:
            self.write_file(backup, data)
        return backup

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        """Saves bytes this store did not write, or a foreign file, before rewriting them, and
        returns the backup the answer names (DRIFT-2, DRIFT-5)."""
        return self.write_backup(path, data)

    def new_file_mode(self, current: os.stat_result | None) -> int:
        """The old file's mode (FILES-2), or 0600 for a new file (FILES-1)."""
        return stat.S_IMODE(current.st_mode) if current is not None else 0o600

    def refuse_symlink(self, path: Path, current: os.stat_result | None) -> None:
        if current is not None and stat.S_ISLNK(current.st_mode):
            raise OSError(errno.ELOOP, f"{path.name} is a symlink; not replacing it")

    def write_file(self, path: Path, data: bytes) -> None:
        """Writes a unique temp file beside ``path`` and renames it over (ATOMIC-1, ATOMIC-2)."""
        try:
            current: os.stat_result | None = os.lstat(path)
        except FileNotFoundError:
            current = None
        self.refuse_symlink(path, current)
        for stale in path.parent.glob(f".{glob.escape(path.name)}.tmp.*"):
            stale.unlink(missing_ok=True)  # left by a crash; the caller holds the lock (CRASH-2)
        temp = path.with_name(f".{path.name}.tmp.{secrets.token_hex(8)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.fchmod(fd, self.new_file_mode(current))
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise


def open_store(root: Path, **limits: int) -> NaiveStore:
    """The factory (CONTRACT-1): ``tests.backends.naive:open_store``."""
    return NaiveStore(root, **limits)
