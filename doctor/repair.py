"""``memspec doctor --fix``: repairs what can be repaired without losing a byte, as a writer would,
with the reference store's own file operations (``reference_impl/files.py``).

Both targets' locks are taken first, without waiting: a directory another process is writing is
refused, never raced. Under them, each data file is read again and, when it is cosmetic
(FORMAT-4), rewritten in the canonical form; a foreign file's over-limit entries are moved out
only on request (``move_oversized``). Every rewrite is preceded by a byte-exact, content-
addressed backup (DRIFT-3, DRIFT-5), named in the output, and keeps the file's mode (FILES-2);
temp files a killed writer left are removed (CRASH-2). A second run finds nothing to do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from memspec.doctor.diagnose import is_stray_temp, unusable_lock
from memspec.doctor.limits import DoctorError
from memspec.reference_impl.files import (
    atomic_write,
    digest,
    lock_path,
    locked,
    read_file,
    record_digest,
    write_backup,
)
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.targets import FILENAMES, TARGETS, Target


class Busy(DoctorError):
    """Another process holds a lock of the directory."""


@dataclass(frozen=True)
class Action:
    """An Action is one repair: the file, what was (or would be) done, and the backup of the
    old bytes (``None`` when nothing was rewritten)."""

    subject: str
    what: str
    backup: str | None = None


def repair(
    directory: Path,
    limits: Mapping[str, int],
    *,
    move_oversized: bool = False,
    dry_run: bool = False,
) -> list[Action]:
    """Repairs ``directory`` (or, with ``dry_run``, says what it would do, taking no lock and
    writing nothing); returns the actions. Raises Busy when another process holds a lock, and
    DoctorError when a file cannot be read."""
    paths = {target: directory / FILENAMES[target] for target in TARGETS}
    if not any(os.path.lexists(path) for path in paths.values()):
        return []  # no store writes here: nothing of a store's to repair, no lock to create
    for path in paths.values():
        _lockable(path)
    with ExitStack() as stack:
        held = {} if dry_run else {t: _hold(stack, path) for t, path in paths.items()}
        plans = {
            target: plan
            for target, path in paths.items()
            if (plan := _plan(path, limits[target], move_oversized)) is not None
        }  # every file is read before any is written: a refusal changes nothing
        if dry_run:
            actions = [Action(p.path.name, f"{p.would} {p.what}, after a byte-exact backup")
                       for p in plans.values()]  # fmt: skip
        else:
            actions = _rewrite_all(plans, held)
        return actions + _sweep(directory, dry_run)


def _lockable(data_path: Path) -> None:
    """Raises DoctorError when ``data_path``'s lock file is one no store can take."""
    lock = lock_path(data_path)
    unusable = unusable_lock(lock)
    if unusable is not None:
        clause, why = unusable
        raise DoctorError(f"cannot take {lock.name}: it {why} ({clause}); move it away and run "
                          "again; nothing was changed")  # fmt: skip


def _hold(stack: ExitStack, data_path: Path) -> int:
    """Takes ``data_path``'s lock without waiting, for as long as ``stack`` lasts; returns the
    lock file's descriptor."""
    try:
        return stack.enter_context(locked(data_path, wait=False))
    except BlockingIOError:
        raise Busy(
            f"{data_path.parent} is busy: another process holds {lock_path(data_path).name}; "
            "run doctor again when the agent using it is done"
        ) from None
    except OSError as error:
        name = lock_path(data_path).name
        raise DoctorError(
            f"cannot take {name}: {error.strerror or error}; nothing was changed"
        ) from None


@dataclass(frozen=True)
class _Rewrite:
    """A data file to rewrite: its old bytes, its new ones and what the change is."""

    path: Path
    old: bytes
    new: bytes
    did: str
    would: str
    what: str


def _plan(path: Path, limit: int, move_oversized: bool) -> _Rewrite | None:
    """Returns how one data file is rewritten in the canonical form, or without its over-limit
    entries; ``None`` when it is left as it is. Raises DoctorError when it cannot be read."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return None  # FILES-4: a link or a directory is the person's to settle
    try:
        data = read_file(path)
    except OSError as error:
        raise DoctorError(
            f"cannot read {path}: {error.strerror or error}; nothing was changed"
        ) from None
    state = classify_bytes(data, limit)
    if data is None or state.entries is None:
        return None
    entries = list(state.entries)
    if state.kind == "cosmetic":
        did, would = "rewrote", "would rewrite"
        what = "it in the canonical form (FORMAT-4)"
    elif state.kind == "foreign" and move_oversized:
        over = [e for e in entries if len(e) > limit]
        entries = [e for e in entries if len(e) <= limit]
        did, would = "moved out", "would move out"
        what = f"{len(over)} entr{'y' if len(over) == 1 else 'ies'} over the limit (DRIFT-2)"
    else:
        return None
    new = encode_entries(entries)
    return None if new == data else _Rewrite(path, data, new, did, would, what)


def _rewrite_all(plans: Mapping[Target, _Rewrite], held: Mapping[Target, int]) -> list[Action]:
    """Rewrites every planned file as the reference store writes, holding its lock: the old
    bytes of all of them saved first (a byte-exact backup each; a backup that fails rewrites
    nothing), then each new file renamed in and its digest recorded in the lock file
    (DRIFT-5). A rewrite that fails names what was done before it."""
    saved: dict[Target, Path] = {}
    for target, plan in plans.items():
        try:
            saved[target] = write_backup(plan.path, plan.old)
        except OSError as error:
            raise DoctorError(
                f"cannot back up {plan.path.name}: {error.strerror or error}; nothing was rewritten"
            ) from None
    actions: list[Action] = []
    for target, plan in plans.items():
        try:
            atomic_write(plan.path, plan.new)
        except OSError as error:
            done = "".join(f"{a.subject}: {a.what}, its old bytes in {a.backup}; " for a in actions)
            raise DoctorError(
                f"{done}cannot rewrite {plan.path.name}: {error.strerror or error}; it is as it "
                f"was (a copy is in {saved[target].name})"
            ) from None
        with contextlib.suppress(OSError):
            record_digest(held[target], digest(plan.new))
        actions.append(Action(plan.path.name, f"{plan.did} {plan.what}", saved[target].name))
    return actions


def _sweep(directory: Path, dry_run: bool) -> list[Action]:
    """Removes the temp files of both targets and Hermes' (CRASH-2), regular files only, as
    the diagnosis counts them: under both locks, only a crashed writer's can be left."""
    with os.scandir(directory) as listing:
        temps = sorted(entry.name for entry in listing if is_stray_temp(entry))
    if not temps:
        return []
    if dry_run:
        return [
            Action(", ".join(temps), f"would remove {len(temps)} temp file(s) a killed writer left")
        ]
    kept = []
    for name in temps:
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            continue
        except OSError as error:
            kept.append(f"{name} ({error.strerror})")
    what = f"removed {len(temps) - len(kept)} temp file(s) a killed writer left"
    return [
        Action(", ".join(temps), what + (f"; could not remove {', '.join(kept)}" if kept else ""))
    ]
