"""What the checks see of the disk: listings outside the root, the root's files, backups, modes.

These functions only look (FILES-*, CONTRACT-1, CONTRACT-11); the one writer, :func:`put`, plays
"another writer" as SPEC.md's ``put`` step does. A listing maps a relative path to ``(kind, size,
mtime_ns, mode)``, so two listings differ when something was created, removed, renamed, written or
chmod-ed (a directory's mtime catches a temp renamed away).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from memspec.conformance.core.registry import CheckContext
from memspec.conformance.verdict.findings import Violation
from memspec.spec.codec import decode, parse_text
from memspec.spec.root_files import NAMED_KINDS, file_kind
from memspec.spec.targets import FILENAMES

Listing = dict[str, tuple[str, int, int, int]]


def _describe(info: os.stat_result) -> tuple[str, int, int, int]:
    kind = "dir" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "file"
    size = 0 if kind == "dir" else info.st_size
    return kind, size, info.st_mtime_ns, stat.S_IMODE(info.st_mode)


def listing(directory: Path, *, exclude: Path | None = None, recursive: bool = True) -> Listing:
    """Returns the listing of ``directory`` itself (as ``"."``) and everything under it, without
    following links and skipping ``exclude`` and everything under it."""
    found: Listing = {".": _describe(os.lstat(directory))}
    pending = [directory]
    while pending:
        current = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                path = Path(entry.path)
                if exclude is not None and path == exclude:
                    continue
                info = entry.stat(follow_symlinks=False)
                found[str(path.relative_to(directory))] = _describe(info)
                if recursive and stat.S_ISDIR(info.st_mode):
                    pending.append(path)
    return found


def outside_root(ctx: CheckContext) -> Listing:
    """Returns the listing of what the check watches outside ``ctx.root``: the directory that holds
    the root and the scratch directory, recursively, the root excluded (FILES-5, CONTRACT-1). Shared
    directories the harness did not make are not watched."""
    found = listing(ctx.root.parent, exclude=ctx.root)
    if not ctx.scratch.resolve().is_relative_to(ctx.root.parent.resolve()):
        found |= {f"scratch/{path}": info for path, info in listing(ctx.scratch).items()}
    return found


def listing_changes(before: Listing, after: Listing) -> list[str]:
    """Returns one line per path that appeared, disappeared or changed between two listings."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is None:
            changes.append(f"created {key}")
        elif new is None:
            changes.append(f"removed {key}")
        elif old != new:
            changes.append(f"changed {key}: {old} -> {new} (kind, size, mtime_ns, mode)")
    return changes


def root_files(root: Path) -> list[Path]:
    """Returns every non-directory path under ``root`` (links included, not followed), sorted."""
    found = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories.sort()
        found += [Path(directory, name) for name in names]
    return sorted(found)


def backups(root: Path, target: str) -> dict[Path, bytes]:
    """Returns the backups of ``target`` in ``root`` (files named ``NAME.bak.<suffix>``; DRIFT-3,
    CONTRACT-11) with their bytes."""
    return {
        path: path.read_bytes()
        for path in sorted(root.iterdir())
        if file_kind(path.name, FILENAMES[target]) == "backup" and path.is_file()
    }


def mode_of(path: Path) -> int:
    """Returns the permission bits of ``path`` itself (a link is not followed)."""
    return stat.S_IMODE(os.lstat(path).st_mode)


def read_or_none(path: Path) -> bytes | None:
    """Returns the bytes of ``path``, or ``None`` when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def assert_written(data: bytes | None, acknowledged: Sequence[str], what: str) -> None:
    """Fails ATOMIC-5 unless ``data``, a data file read after ``what`` was answered ``OK`` and
    with no write running, parses into the ``acknowledged`` entries (absent: none). A check that
    builds on those writes asks this first: what it would otherwise blame on its own clause is an
    ``OK`` whose result never reached the file."""
    text = "" if data is None else decode(data)
    found = None if text is None else parse_text(text)
    if found != list(acknowledged):
        raise Violation(
            "ATOMIC-5",
            f"{what} answered OK, but the file then held {found}; expected {list(acknowledged)}",
        )


def put(root: Path, target: str, data: bytes, *, mode: int | None = None) -> Path:
    """Writes ``data`` as ``target``'s file, the way another writer would (in place), and sets
    ``mode`` when given. Returns the file's path."""
    path = root / FILENAMES[target]
    path.write_bytes(data)
    if mode is not None:
        os.chmod(path, mode)
    return path


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Runs the block with the process umask set to ``mask`` (FILES-1: a store must set the
    modes it creates itself, whatever the umask; a command backend started inside inherits it)."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def stray_files(root: Path) -> dict[str, tuple[int, int]]:
    """Returns the entries of ``root`` that are neither data, lock nor backup files (temps and
    sidecars), each with its inode and mtime, which tell it from a later file of the same name."""
    strays = {}
    with os.scandir(root) as listing:
        for entry in listing:
            if file_kind(entry.name) not in NAMED_KINDS:
                info = entry.stat(follow_symlinks=False)
                strays[entry.name] = (info.st_ino, info.st_mtime_ns)
    return strays


def loaded_entries(
    ctx: CheckContext, name: str, data: bytes | None, op: str, fields: Mapping[str, object]
) -> list[str] | None:
    """Returns the entries of ``memory`` that a session which loaded first leaves after sending
    ``op`` with ``fields`` on a new root (``name``, beside the check's) whose MEMORY.md holds
    ``data``; None when that session does not answer OK. A check that judges how a mutation is
    made (in place or by rename, with or without a load) compares against what the store itself
    does after a load: where that leaves the same entries, the difference is the operation's
    own, which its examples judge, not the way it was made."""
    root = ctx.scratch / name
    root.mkdir()
    if data is not None:
        (root / FILENAMES["memory"]).write_bytes(data)
    with ctx.session(root=root) as control:
        control.request("load")
        answer = control.request(op, target="memory", **fields)
        if answer.get("code") != "OK":
            return None
        return list(control.request("entries", target="memory")["entries"])
