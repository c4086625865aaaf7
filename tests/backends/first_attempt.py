"""A first attempt at a memory store, as a new author writes one from the README and Hermes'
design before reading the spec: about a hundred lines, and about a dozen defects.

It keeps the file format, the limits and the snapshot's frame, but it takes no lock, writes the
file in place, guards against no drift and keeps no backup, strips only ASCII whitespace,
refuses no delimiter line in content, reads an unreadable file as empty, stores exact duplicates
again, takes the first of several matching entries, and scans nothing (so it claims no
``threat-scan``). It uses nothing of memspec, as a store written elsewhere would not.

:class:`AtomicFirstAttempt` is the same store with one defect fixed, the write: a temp file
and a rename, done whole. ``tests/harness/test_author_loop.py`` certifies both and requires that
the fix changes the verdicts of the clauses that bug breaks, and of no other.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from pathlib import Path
from typing import Any

FILES = {"memory": "MEMORY.md", "user": "USER.md"}
TITLES = {"memory": "MEMORY (your personal notes)", "user": "USER PROFILE (who the user is)"}
DELIMITER = "\n§\n"
RULE = "═" * 46


class FirstAttempt:
    features = ("core",)

    def __init__(self, root: Path, memory_char_limit: int = 2200, user_char_limit: int = 1375):
        self.root = Path(root)
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self.live: dict[str, list[str]] = {"memory": [], "user": []}
        self.frozen: dict[str, str | None] = {"memory": None, "user": None}

    def _read(self, target: str) -> list[str]:
        try:
            text = (self.root / FILES[target]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        return [e.strip(" \t\n") for e in text.split(DELIMITER) if e.strip(" \t\n")]

    def _write(self, target: str, entries: list[str]) -> None:
        (self.root / FILES[target]).write_text(DELIMITER.join(entries), encoding="utf-8")

    def load(self) -> None:
        for target in FILES:
            self.live[target] = self._read(target)
            self.frozen[target] = self._block(target) if self.live[target] else None

    def _block(self, target: str) -> str:
        used, limit = len(DELIMITER.join(self.live[target])), self.limits[target]
        header = f"{TITLES[target]} [{used * 100 // limit}% — {used:,}/{limit:,} chars]"
        return f"{RULE}\n{header}\n{RULE}\n" + DELIMITER.join(self.live[target])

    def entries(self, target: str) -> list[str]:
        return list(self.live[target])

    def snapshot(self, target: str) -> str | None:
        return self.frozen[target]

    def _commit(self, target: str, entries: list[str]) -> dict[str, Any]:
        if len(DELIMITER.join(entries)) > self.limits[target]:
            return {"ok": False, "code": "E_LIMIT", "message": "over the limit"}
        self._write(target, entries)
        self.live[target] = entries
        return {"ok": True, "code": "OK"}

    def _check(self, target: str, *texts: object) -> dict[str, Any] | None:
        if target not in FILES:
            return {"ok": False, "code": "E_TARGET", "message": f"unknown target {target}"}
        if not all(isinstance(text, str) for text in texts):
            return {"ok": False, "code": "E_INVALID", "message": "text must be a string"}
        if not all(str(text).strip(" \t\n") for text in texts):
            return {"ok": False, "code": "E_EMPTY", "message": "empty text"}
        return None

    def add(self, target: str, content: str) -> dict[str, Any]:
        refused = self._check(target, content)
        if refused:
            return refused
        entries = self._read(target)
        return self._commit(target, [*entries, content.strip(" \t\n")])

    def _find(self, entries: list[str], old_text: str) -> int | None:
        for index, entry in enumerate(entries):
            if old_text.strip(" \t\n") in entry:
                return index
        return None

    def _chosen(self, target: str, old_text: str, *texts: object) -> tuple[list[str], int] | dict:
        """The entries and the index of the first that holds ``old_text``, or the refusal."""
        refused = self._check(target, old_text, *texts)
        if refused:
            return refused
        entries = self._read(target)
        index = self._find(entries, old_text)
        if index is None:
            return {"ok": False, "code": "E_NOMATCH", "message": "no entry matches"}
        return entries, index

    def replace(self, target: str, old_text: str, new_content: str) -> dict[str, Any]:
        chosen = self._chosen(target, old_text, new_content)
        if isinstance(chosen, dict):
            return chosen
        entries, index = chosen
        entries[index] = new_content.strip(" \t\n")
        return self._commit(target, entries)

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        chosen = self._chosen(target, old_text)
        if isinstance(chosen, dict):
            return chosen
        entries, index = chosen
        del entries[index]
        self._write(target, entries)
        self.live[target] = entries
        return {"ok": True, "code": "OK"}

    def close(self) -> None:
        pass


class AtomicFirstAttempt(FirstAttempt):
    """The first attempt with its write fixed as ATOMIC-1 says: a uniquely named temp file in
    the root, written, flushed and synced, given the data file's mode (FILES-2), and renamed
    over the data file; temp files whose writer died are removed before the next write."""

    def _write(self, target: str, entries: list[str]) -> None:
        path = self.root / FILES[target]
        for stale in self.root.glob(f".{path.name}.tmp.*"):
            if not _alive(int(stale.name.split(".")[-2])):
                stale.unlink(missing_ok=True)
        temp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{next(_COUNTER)}")
        with open(temp, "w", encoding="utf-8") as file:
            file.write(DELIMITER.join(entries))
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, stat.S_IMODE(path.stat().st_mode))
        os.replace(temp, path)


_COUNTER = itertools.count()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def open_store(root: Path, **limits: int) -> FirstAttempt:
    return FirstAttempt(root, **limits)


def open_atomic_store(root: Path, **limits: int) -> AtomicFirstAttempt:
    return AtomicFirstAttempt(root, **limits)
