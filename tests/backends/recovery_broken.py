"""Backends broken on purpose against the rules of spec v2's issue 15, items 2 and 3: a store
must be recoverable from any readable state (DRIFT-2, DRIFT-7) and must keep external bytes
whatever it claims (DRIFT-5).

Each is the naive store (``tests/backends/naive.py``) with one defect, and its own factory
(``tests.backends.recovery_broken:refuses_repair_on_foreign``); ``tests/test_recovery.py`` proves
which example or check catches it, on which clause.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memspec.spec import codes
from memspec.spec.codec import FileState, classify_bytes
from memspec.spec.operations import Mutation
from memspec.spec.targets import FILENAMES
from tests.backends import factory_of
from tests.backends.naive import FEATURES, NaiveStore


def _limit_of(store: NaiveStore, path: Path) -> int:
    target = next(t for t, name in FILENAMES.items() if name == path.name)
    return store.limits[target]


class RefusesRepairOnForeign(NaiveStore):
    """The drift guard of spec v1: a foreign file refuses every mutation with ``E_DRIFT``, the
    ``remove`` that would repair it included, so a lowered limit locks the target for good
    (DRIFT-7, DRIFT-2)."""

    def mutate_locked(self, op: Mutation, path: Path, lock: int) -> dict[str, Any]:
        data = self.read_bytes(path)
        state = classify_bytes(data, self.limits[op.target])
        if state.kind == "foreign" and data is not None:
            backup = self.write_backup(path, data)
            return {"ok": False, "code": codes.E_DRIFT, "message": f"saved as {backup.name}",
                    "backup": str(backup)}  # fmt: skip
        return super().mutate_locked(op, path, lock)


class RewritesForeignWithoutBackup(NaiveStore):
    """Lets a change that does not grow a foreign file through, but rewrites it without a
    backup, so the text it drops is lost (DRIFT-2, DRIFT-5)."""

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        if classify_bytes(data, _limit_of(self, path)).kind == "foreign":
            return None
        return super().backup_before_rewrite(path, data)


class BackupNotNamed(NaiveStore):
    """Backs up the bytes it rewrites but never says where: its ``OK`` has no ``backup`` field
    (DRIFT-5, DRIFT-2)."""

    def mutate_locked(self, op: Mutation, path: Path, lock: int) -> dict[str, Any]:
        answer = super().mutate_locked(op, path, lock)
        if answer.get("ok"):
            answer.pop("backup", None)
        return answer


class NoDriftGuard(NaiveStore):
    """Claims no ``drift-guard`` and has none: it reads a foreign file as plain entries and
    rewrites whatever it finds, keeping no backup, like hermes-agent 0.13 and 0.14 (#26045). It
    must fail DRIFT-5, never skip it."""

    features = tuple(feature for feature in FEATURES if feature != "drift-guard")

    def file_state(self, target: str, data: bytes | None, limit: int) -> FileState:
        state = classify_bytes(data, limit)
        return FileState("cosmetic", state.entries) if state.kind == "foreign" else state

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        return None


class NoDriftGuardKeepsBytes(NoDriftGuard):
    """Not broken: no drift guard, claimed or present, but every rewrite of bytes it did not
    write backs them up first and names the backup, so it keeps DRIFT-5 another way."""

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        return self.write_backup(path, data)


refuses_repair_on_foreign = factory_of(RefusesRepairOnForeign)
rewrites_foreign_without_backup = factory_of(RewritesForeignWithoutBackup)
backup_not_named = factory_of(BackupNotNamed)
no_drift_guard = factory_of(NoDriftGuard)
no_drift_guard_keeps_bytes = factory_of(NoDriftGuardKeepsBytes)
