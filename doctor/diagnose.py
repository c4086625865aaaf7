"""What ``memspec doctor`` finds in a memory directory, each state named by the spec's clause id
and judged by the spec's own functions: the file kinds and the reading (``codec``), the usage
(LIMIT-1), the threat scan (``threats``), the names of a root's files (``root_files``). Read
only: nothing here writes.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memspec.doctor.hermes import hermes_drift, hermes_entries, hermes_hidden
from memspec.spec.codec import (
    BOM,
    classify_bytes,
    decode,
    is_delimiter_line,
    normalize_newlines,
    parse_text,
    serialize,
    usage,
)
from memspec.spec.root_files import file_kind
from memspec.spec.snapshot import BLOCKED_PREFIX
from memspec.spec.targets import FILENAMES, TARGETS
from memspec.spec.threats import find_threats

HERMES_TEMP = re.compile(r"^\.mem_[a-z0-9_]{8}\.tmp$")
"""The temp files Hermes' store writes before its rename (``tempfile.mkstemp``'s eight
characters between its prefix and suffix)."""
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
    linked = path.is_symlink()
    if linked:
        problems.append(Problem(
            "FILES-4", "warning", name,
            f"is a symbolic link to {os.readlink(path)}: a store that follows the spec reads "
            "through it but refuses every write (E_IO); Hermes 0.19 replaces the link with a "
            "regular file at its next write",
            "make it a regular file (copy the target over the link), or check that every tool "
            "writing it keeps the link",
        ))  # fmt: skip
    try:
        info = path.stat()
    except FileNotFoundError:
        return state, problems
    except OSError as error:
        state.kind = "unopenable"
        return state, [*problems, _unopenable(path, error)]
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
        return state, [*problems, _unopenable(path, error)]
    problems += _mode([path], info.st_mode)
    file_state = classify_bytes(data, limit)
    state.kind = file_state.kind
    text = decode(data)
    if file_state.entries is None or text is None:
        return state, [*problems, _undecodable(name, data)]
    entries = file_state.entries
    state.entries, state.usage = len(entries), usage(entries)
    if "\x00" in text:
        problems.append(_nul(name, text))
    elif file_state.kind == "foreign":
        problems.append(_foreign(name, text, entries, limit))
    elif file_state.kind == "cosmetic":
        problems += _cosmetic(name, text, entries, limit, fixable=not linked)
    if state.usage > limit and file_state.kind != "foreign":
        problems.append(Problem(
            "LIMIT-4", "warning", name,
            f"uses {state.usage:,} of its {limit:,} characters: every add is refused (E_LIMIT) "
            "until entries are removed or shortened",
            "remove or shorten entries with the memory tool (remove, replace)",
        ))  # fmt: skip
    problems += _duplicates(name, entries)
    problems += _threats(name, entries, limit)
    return state, problems


def _unopenable(path: Path, error: OSError) -> Problem:
    if error.errno == errno.ELOOP:
        repair = f"the link loops: replace {path.name} with a regular file"
    elif error.errno == errno.EACCES:
        repair = f"give it back to its owner: chmod 600 {shlex.quote(str(path))}"
    else:
        repair = "check the file and the disk it is on"
    return Problem(
        "READ-7", "error", path.name,
        f"cannot be read ({error.strerror or error}): a store must refuse to write it rather "
        "than start it empty",
        repair,
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


def _nul(name: str, text: str) -> Problem:
    count = text.count("\x00")
    whole = count == len(text)
    return Problem(
        "CRASH-1", "error", name,
        f"holds {count:,} NUL byte(s){' and nothing else' if whole else ''}: what a crash "
        "leaves of a file written in place, not text anyone wrote",
        "restore it from a backup (a store's MEMORY.md.bak.*, an editor's, the system's); "
        "a store that renames a whole new file in (ATOMIC-2) never leaves this",
    )  # fmt: skip


def _mode(paths: Sequence[Path], mode: int) -> list[Problem]:
    if not mode & 0o077:
        return []
    names = ", ".join(p.name for p in paths[:3]) + (" …" if len(paths) > 3 else "")
    return [Problem(
        "FILES-1", "warning", names,
        f"{'is' if len(paths) == 1 else 'are'} readable or writable by others (mode "
        f"{stat.S_IMODE(mode):04o}); a store creates its files 0600",
        "chmod 600 " + " ".join(shlex.quote(str(p)) for p in paths),
    )]  # fmt: skip


def _foreign(name: str, text: str, entries: Sequence[str], limit: int) -> Problem:
    """An entry over the limit (DRIFT-2): a paste with no ``§`` line, or a lowered limit."""
    over = [(i, len(e)) for i, e in enumerate(entries) if len(e) > limit]
    index, size = over[0]
    pasted = "§" not in text
    return Problem(
        "DRIFT-2", "error", name,
        f"entry {index + 1} is {size:,} characters, over the limit of {limit:,}"
        + (" (the file has no § line: it looks pasted)" if pasted else "")
        + f"{f' and {len(over) - 1} more' if len(over) > 1 else ''}: a store refuses every "
        "write to the file (E_DRIFT) rather than lose it",
        f"split it into entries on lines of their own with § between them, or move it out "
        f"with {MOVE} (a byte-exact backup keeps it)",
        fix=MOVE,
    )  # fmt: skip


def _cosmetic(
    name: str, text: str, entries: Sequence[str], limit: int, *, fixable: bool
) -> list[Problem]:
    """The anomalies a reader tolerates and a writer never makes (FORMAT-4), each by its
    clause, as bad as what they do to Hermes' reading: a warning when Hermes reads other
    entries or refuses to edit the file, a note when every reader agrees."""
    lines = normalize_newlines(text.removeprefix(BOM)).split("\n")
    chunks = "\n".join("§" if is_delimiter_line(line) else line for line in lines)
    found = []
    if text.startswith(BOM):
        found.append(("READ-1", "a byte order mark at its start"))
    if "\r" in text:
        found.append(("READ-2", "CR LF or CR line ends"))
    if any(is_delimiter_line(line) and line != "§" for line in lines):
        found.append(("READ-3", "spaces around a § line"))
    if chunks != serialize(entries):
        starts = any(c.strip().startswith(BOM) for c in chunks.split("\n§\n") if c.strip(" \t\n"))
        found.append(("READ-4", "a U+FEFF at an entry's start" if starts else
                      "blank lines, empty entries or spaces around entries"))  # fmt: skip
    hermes = hermes_entries(text)
    if hermes != list(entries):
        severity = "warning"
        if len(hermes) != len(entries):
            effect = f"Hermes 0.19 reads {count(len(hermes), 'entry')} where the spec reads "
            effect += f"{len(entries)}"
        else:
            at = next(i for i, (h, e) in enumerate(zip(hermes, entries, strict=True)) if h != e)
            effect = f"Hermes 0.19 reads entry {at + 1} as {_short(hermes[at], raw=True)}, not "
            effect += _short(entries[at], raw=True)
            if hermes[at].startswith(BOM):
                effect += ", and its scan blocks it"
    elif hermes_drift(text, limit):
        severity = "warning"
        effect = (
            "Hermes 0.19 takes the file for one edited elsewhere: it refuses every replace "
            "and remove, with a new backup each time"
        )
    else:
        severity = "note"
        effect = "readers agree on its entries, and a store writes it canonical at its next write"
    repair = f"{FIX} rewrites it in the canonical form (a byte-exact backup first)"
    if not fixable:
        repair = "rewrite the link's target in the canonical form; --fix leaves links alone"
    return [Problem(
        clause, severity, name, f"holds {words}, which no store writes (FORMAT-4): {effect}",
        repair, fix=FIX if fixable else "",
    ) for clause, words in found]  # fmt: skip


def count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number:,} {noun if number == 1 else plural}"


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


def _threats(name: str, entries: Sequence[str], limit: int) -> list[Problem]:
    """The entries the threat scan blocks (SCAN-6), those that forge a placeholder (SCAN-8), and
    those Hermes' scan blocks for a character the spec keeps (a note for Hermes users). An
    entry over the limit is DRIFT-2's and is not scanned."""
    problems = []
    for index, entry in enumerate(entries):
        if len(entry) > limit:
            continue
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
    scanned = [e if len(e) <= limit else "" for e in entries]
    for index, chars in hermes_hidden(scanned):
        if find_threats(entries[index]):
            continue
        problems.append(Problem(
            "SCAN-4", "note", name,
            f"entry {index + 1} ({_short(entries[index])}) holds {', '.join(chars)}, ordinary "
            "text the spec keeps (emoji sequences, Persian and Hindi need joiners), which Hermes "
            "0.19's scan blocks: a Hermes agent sees a [BLOCKED: placeholder instead",
            "nothing to do for a store that follows the spec; for Hermes, reword the entry "
            "without the character if the model must see it",
        ))  # fmt: skip
    return problems


def diagnose_others(directory: Path) -> tuple[list[str], list[Problem]]:
    """The files beside the data files: temps a crash left (CRASH-2), backups (DRIFT-3,
    FILES-1), the locks (LOCK-1, FILES-3) and files that belong to no store (FILES-5)."""
    lines: list[str] = []
    problems: list[Problem] = []
    backups: dict[str, list[Path]] = {}
    temps: list[str] = []
    others: list[str] = []
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        kind = file_kind(entry.name)
        if kind == "data":
            continue
        if is_stray_temp(entry):
            temps.append(entry.name)
        elif kind == "backup" and entry.is_file(follow_symlinks=False):
            backups.setdefault(entry.name.split(".bak.", 1)[0], []).append(Path(entry.path))
        elif kind == "lock":
            problems += _lock(entry, lines)
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
    for owner, paths in sorted(backups.items()):
        lines.append(_backups(directory / owner, paths))
        shared = [p for p in paths if p.lstat().st_mode & 0o077]
        problems += _mode(shared, shared[0].lstat().st_mode) if shared else []
    return lines, problems


def unusable_lock(lock: Path) -> tuple[str, str] | None:
    """Returns the clause and the reason when ``lock`` is a lock file no store can take: a
    symbolic link (FILES-3) or not a regular file (LOCK-1); ``None`` when it can be taken."""
    if lock.is_symlink():
        return "FILES-3", "is a symbolic link, which a store opens with O_NOFOLLOW and cannot lock"
    if lock.exists() and not lock.is_file():
        return "LOCK-1", "is not a regular file: no store can take its lock, so every write fails"
    return None


def is_stray_temp(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is a temp file a writer left (CRASH-2): a regular file named as the
    spec names temps, or as Hermes' ``mkstemp`` does."""
    named = file_kind(entry.name) == "temp" or HERMES_TEMP.match(entry.name) is not None
    return named and entry.is_file(follow_symlinks=False)


def _lock(entry: os.DirEntry[str], lines: list[str]) -> list[Problem]:
    unusable = unusable_lock(Path(entry.path))
    if unusable is None:
        lines.append(f"lock file {entry.name}")
        return []
    clause, why = unusable
    return [Problem(
        clause, "error", entry.name, why, f"move {entry.name} away; a store creates it again",
    )]  # fmt: skip


def _backups(data_path: Path, paths: Sequence[Path]) -> str:
    """One line on a data file's backups (DRIFT-3): how many, their size, the oldest, and which
    hold text the data file no longer has, the ones to keep."""
    stats = [p.lstat() for p in paths]
    oldest = time.strftime("%Y-%m-%d", time.localtime(min(s.st_mtime for s in stats)))
    line = (
        f"{len(paths)} backup(s) of {data_path.name}, {sum(s.st_size for s in stats):,} bytes, "
        f"the oldest from {oldest} (DRIFT-3): "
    )
    current = _entries_of(data_path)
    if current is None:
        return line + f"keep them until {data_path.name} reads again"
    held = {p.name: _entries_of(p) for p in paths}  # None: unreadable, kept to be safe
    keep = [name for name, entries in held.items() if entries is None or not entries <= current]
    if not keep:
        return line + f"each holds only text {data_path.name} still has; they can go"
    them = "it" if len(keep) == 1 else "them"
    named = ", ".join(keep[:3]) + (" …" if len(keep) > 3 else "")
    rest = "; the others can go" if len(keep) < len(paths) else ""
    return (
        line
        + f"{len(keep)} hold(s) text {data_path.name} no longer has, keep {them} ({named}){rest}"
    )


def _entries_of(path: Path) -> set[str] | None:
    """Returns the entries of a file as the spec reads them; ``None`` when it cannot be read."""
    try:
        text = decode(path.read_bytes())
    except FileNotFoundError:
        return set()
    except OSError:
        return None
    return None if text is None else set(parse_text(text))


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


def _short(text: str, width: int = 40, *, raw: bool = False) -> str:
    """Returns ``text`` quoted and cut to ``width``; its whitespace folded unless ``raw``."""
    flat = text if raw else " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 1] + "…")
