"""What ``memspec doctor`` finds in a memory directory, each state named by the spec's clause id
and judged by the spec's own functions: the file kinds and the reading (``codec``), the usage
(LIMIT-1), the threat scan (``threats``), the names of a root's files (``root_files``). Read
only: nothing here writes.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memspec.spec.codec import classify_bytes, decode, usage
from memspec.spec.root_files import file_kind
from memspec.spec.snapshot import BLOCKED_PREFIX
from memspec.spec.targets import FILENAMES, TARGETS
from memspec.spec.threats import find_threats

HERMES_TEMP = re.compile(r"^\.mem_\w+\.tmp$")
"""The temp files Hermes' store writes before its rename (``tempfile.mkstemp``)."""
FIX = "--fix"
MOVE = "--fix --move-oversized"
SEVERITIES = ("error", "warning", "note")
"""``error``: a store refuses the file or loses data; ``warning``: it needs a person's look;
``note``: worth knowing, healthy."""


@dataclass(frozen=True)
class Problem:
    """A Problem is one state of the directory: the clause that names it, how bad it is, the
    file, what is wrong and what repairs it; ``fix``, the options of ``memspec doctor`` that
    repair it (``--fix``), empty when a person must."""

    clause: str
    severity: str
    subject: str
    what: str
    repair: str
    fix: str = ""


@dataclass
class TargetState:
    """What one data file holds: ``kind`` as the spec reads it (``absent``, ``unreadable``,
    ``foreign``, ``canonical``, ``cosmetic``), or ``unopenable`` / ``not a file``."""

    target: str
    file: str
    kind: str
    entries: int = 0
    usage: int = 0
    limit: int = 0


@dataclass
class Diagnosis:
    """Everything doctor found in one directory."""

    directory: Path
    targets: list[TargetState] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """One line each about the other files: backups, the lock."""

    @property
    def healthy(self) -> bool:
        return not any(p.severity in ("error", "warning") for p in self.problems)

    def as_json(self) -> dict[str, object]:
        return {
            "directory": str(self.directory),
            "healthy": self.healthy,
            "targets": [asdict(t) for t in self.targets],
            "problems": [asdict(p) for p in self.problems],
            "files": self.files,
        }


def diagnose(directory: Path, limits: Mapping[str, int]) -> Diagnosis:
    """Returns the diagnosis of ``directory``, an existing directory, under ``limits``."""
    found = Diagnosis(directory)
    for target in TARGETS:
        state, problems = diagnose_file(directory / FILENAMES[target], target, limits[target])
        found.targets.append(state)
        found.problems += problems
    files, problems = diagnose_others(directory)
    found.files, found.problems = files, found.problems + problems
    return found


def diagnose_file(path: Path, target: str, limit: int) -> tuple[TargetState, list[Problem]]:
    """Returns what one data file holds and what is wrong with it."""
    name = path.name
    state = TargetState(target, name, "absent", limit=limit)
    problems: list[Problem] = []
    if path.is_symlink():
        problems.append(Problem(
            "FILES-4", "warning", name,
            f"is a symbolic link to {os.readlink(path)}: a store must write through it, and "
            "one that renames a new file over it replaces the link with a regular file",
            "make it a regular file, or check that every tool writing it keeps the link",
        ))  # fmt: skip
    try:
        info = path.stat()
    except FileNotFoundError:
        return state, problems
    except OSError as error:
        state.kind = "unopenable"
        return state, [*problems, _unopenable(name, error)]
    if not stat.S_ISREG(info.st_mode):
        state.kind = "not a file"
        return state, [*problems, Problem(
            "READ-7", "error", name, "is not a regular file: no store can read it",
            f"move it away; a store then starts {name} empty",
        )]  # fmt: skip
    try:
        data = path.read_bytes()
    except OSError as error:
        state.kind = "unopenable"
        return state, [*problems, _unopenable(name, error)]
    problems += _mode(path, info.st_mode)
    file_state = classify_bytes(data, limit)
    state.kind = file_state.kind
    if file_state.entries is None:
        return state, [*problems, _undecodable(name, data)]
    entries = file_state.entries
    state.entries, state.usage = len(entries), usage(entries)
    problems += _layout(name, data, entries, file_state.kind, limit)
    if state.usage > limit and file_state.kind != "foreign":
        problems.append(Problem(
            "LIMIT-4", "warning", name,
            f"uses {state.usage:,} of its {limit:,} characters: every add is refused (E_LIMIT) "
            "until entries are removed or shortened",
            "remove or shorten entries with the memory tool (remove, replace)",
        ))  # fmt: skip
    problems += _duplicates(name, entries)
    problems += _threats(name, entries)
    return state, problems


def _unopenable(name: str, error: OSError) -> Problem:
    return Problem(
        "READ-7", "error", name,
        f"cannot be read ({error.strerror or error}): a store must refuse to write it rather "
        "than start it empty",
        "give the file back read and write permission to its owner (chmod 600)",
    )  # fmt: skip


def _undecodable(name: str, data: bytes) -> Problem:
    try:
        data.decode("utf-8")
        where = ""
    except UnicodeDecodeError as error:
        where = f" at byte {error.start:,} ({data[error.start : error.start + 4]!r})"
    return Problem(
        "READ-6", "error", name,
        f"is not valid UTF-8{where}: a store refuses every write to it (E_UNREADABLE) and shows "
        "the model an [UNREADABLE: line instead of its entries; Hermes 0.19 stops at load",
        "restore it from a backup, or re-save it as UTF-8 in an editor",
    )  # fmt: skip


def _mode(path: Path, mode: int) -> list[Problem]:
    if not mode & 0o077:
        return []
    return [Problem(
        "FILES-1", "warning", path.name,
        f"is readable or writable by others (mode {stat.S_IMODE(mode):04o}); a store creates "
        "its files 0600",
        f"chmod 600 {shlex.quote(str(path))}",
    )]  # fmt: skip


def _layout(name: str, data: bytes, entries: Sequence[str], kind: str, limit: int) -> list[Problem]:
    """The file's form: a foreign file (an entry over the limit, DRIFT-2) or the cosmetic
    anomalies a reader tolerates and a writer never makes (FORMAT-4)."""
    if kind == "foreign":
        over = [(i, len(e)) for i, e in enumerate(entries) if len(e) > limit]
        index, size = over[0]
        text = decode(data) or ""
        pasted = "§" not in text
        return [Problem(
            "DRIFT-2", "error", name,
            f"entry {index + 1} is {size:,} characters, over the limit of {limit:,}"
            + (" (the file has no § line: it looks pasted)" if pasted else "")
            + f"{f' and {len(over) - 1} more' if len(over) > 1 else ''}: a store refuses every "
            "write to the file (E_DRIFT) rather than lose it",
            f"split it into entries on lines of their own with § between them, or move it out "
            f"with {MOVE} (a byte-exact backup keeps it)",
            fix=MOVE,
        )]  # fmt: skip
    if kind != "cosmetic":
        return []
    text = decode(data) or ""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    said = []
    if text.startswith("\ufeff"):
        said.append((
            "READ-1", "a byte order mark at its start",
            "a reader that keeps it (Hermes does) glues it to the first entry, which the threat "
            "scan then blocks as invisible Unicode",
        ))  # fmt: skip
    if "\r" in text:
        said.append((
            "READ-2", "CR LF or CR line ends",
            "a reader that splits on a bare line feed alone reads the entries as one",
        ))  # fmt: skip
    if any(line.strip() == "§" and line != "§" for line in lines):
        said.append((
            "READ-3", "spaces around a § line",
            "a reader that splits only on an exact § line (Hermes does) reads the entries on "
            "both sides as one",
        ))  # fmt: skip
    if not said:
        said.append((
            "READ-4", "blank lines, empty entries or spaces at entries' ends",
            "readers drop them, and a store writes the file back without them",
        ))  # fmt: skip
    return [Problem(
        clause, "warning", name,
        f"holds {words}, which no store writes (FORMAT-4): {why}",
        f"{FIX} rewrites it in the canonical form (a byte-exact backup first)",
        fix=FIX,
    ) for clause, words, why in said]  # fmt: skip


def _duplicates(name: str, entries: Sequence[str]) -> list[Problem]:
    seen: dict[str, int] = {}
    problems = []
    for index, entry in enumerate(entries):
        if entry in seen:
            problems.append(Problem(
                "DUP-4", "warning", name,
                f"entry {index + 1} repeats entry {seen[entry] + 1} ({_short(entry)}): a store "
                "keeps both, but Hermes drops the repeat at its next write",
                "remove one of them with the memory tool, if they are the same fact",
            ))  # fmt: skip
        seen.setdefault(entry, index)
    return problems


def _threats(name: str, entries: Sequence[str]) -> list[Problem]:
    problems = []
    for index, entry in enumerate(entries):
        threats = find_threats(entry)
        if threats:
            problems.append(Problem(
                "SCAN-6", "warning", name,
                f"entry {index + 1} ({_short(entry)}) matches the threat scan "
                f"({', '.join(threats)}): the model sees a [BLOCKED: placeholder instead",
                "read it: remove it with the memory tool if you did not write it, else reword it",
            ))  # fmt: skip
        elif entry.startswith(BLOCKED_PREFIX):
            problems.append(Problem(
                "SCAN-8", "warning", name,
                f"entry {index + 1} begins with {BLOCKED_PREFIX} but is text of the file, not a "
                "placeholder: it looks to the model like a blocked entry",
                "remove it with the memory tool, or reword its start",
            ))  # fmt: skip
    return problems


def diagnose_others(directory: Path) -> tuple[list[str], list[Problem]]:
    """The files beside the data files: temps a crash left (CRASH-2), backups (DRIFT-3), the
    locks (LOCK-1, FILES-3) and files that belong to no store (FILES-5)."""
    lines: list[str] = []
    problems: list[Problem] = []
    backups: dict[str, list[os.stat_result]] = {}
    temps: list[str] = []
    others: list[str] = []
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        kind = file_kind(entry.name)
        if kind == "data":
            continue
        if kind == "temp" or HERMES_TEMP.match(entry.name):
            temps.append(entry.name)
        elif kind == "backup":
            owner = entry.name.split(".bak.", 1)[0]
            backups.setdefault(owner, []).append(entry.stat(follow_symlinks=False))
        elif kind == "lock":
            if entry.is_symlink():
                problems.append(Problem(
                    "FILES-3", "error", entry.name,
                    "is a symbolic link: a store opens its lock with O_NOFOLLOW and cannot lock",
                    f"remove {entry.name}; a store creates it again",
                ))  # fmt: skip
            else:
                lines.append(f"lock file {entry.name}")
        else:
            others.append(entry.name)
    if others:
        problems.append(_others(others, any(file_kind(e.name) != "other" for e in entries)))
    if temps:
        problems.append(Problem(
            "CRASH-2", "warning", ", ".join(temps[:3]) + (" …" if len(temps) > 3 else ""),
            f"{len(temps)} temp file(s) a writer left when it was killed or crashed: never data, "
            "but they pile up",
            f"{FIX} removes them, holding the store's lock",
            fix=FIX,
        ))  # fmt: skip
    for owner, stats in sorted(backups.items()):
        size = sum(s.st_size for s in stats)
        oldest = time.strftime("%Y-%m-%d", time.localtime(min(s.st_mtime for s in stats)))
        lines.append(
            f"{len(stats)} backup(s) of {owner}, {size:,} bytes, the oldest from {oldest}: copies "
            "a store saved before rewriting or refusing a file edited elsewhere (DRIFT-3); "
            "delete the ones you do not need"
        )
    return lines, problems


def _others(names: Sequence[str], store_here: bool) -> Problem:
    """The files that belong to no store: a note beside a store's files; a warning in a
    directory that holds none of them, which may not be a memory directory at all."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
    if store_here:
        return Problem(
            "FILES-5", "note", shown,
            "belong(s) to no memory store: not a data file, lock, backup or temp",
            "leave them if you put them there",
        )  # fmt: skip
    return Problem(
        "FILES-5", "warning", shown,
        "no MEMORY.md, USER.md or other file a store writes is beside them: this does not "
        "look like a memory directory",
        "name the memory directory (a Hermes profile's is $HERMES_HOME/memories)",
    )  # fmt: skip


def _short(text: str, width: int = 40) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")
