"""Backends broken on purpose for the areas the other zoo modules leave open: format, limits,
matching, duplicates, replace, batch, snapshot and scanning.

Each is one defect, written against the contract: either the naive store
(``tests/backends/naive.py``) with one of its steps overridden, or the reference store behind a
wrapper (``tests/backends/fuzzbroken.py``) that decides a few calls itself with the spec's pure
rules before it delegates. Each docstring names the defect and the clause it breaks; the zoo
(``tests/zoo.py``) lists them with the checks that catch them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memspec.spec import codes
from memspec.spec.codec import (
    FileState,
    classify_bytes,
    encode_entries,
    is_encodable,
    normalize_content,
    serialize,
)
from memspec.spec.operations import Add, Batch, Mutation, Remove, Replace, thaw
from memspec.spec.rules import Outcome, argument_error, choose_entry, decide
from memspec.spec.snapshot import render_snapshot
from memspec.spec.targets import FILENAMES
from memspec.spec.threats import find_threats
from tests.backends import factory_of
from tests.backends.fuzzbroken import Wrapper
from tests.backends.naive import NaiveStore

# --- the naive store with one step changed ------------------------------------------------------


class TrailingNewline(NaiveStore):
    """Ends every data file it writes with a line feed: not the canonical form (FORMAT-4)."""

    def write_file(self, path: Path, data: bytes) -> None:
        extra = b"\n" if data and path.name in FILENAMES.values() else b""
        super().write_file(path, data + extra)


class OverwritesTakenBackup(NaiveStore):
    """Writes a backup under its content-addressed name even when other bytes hold that name,
    overwriting them (DRIFT-4)."""

    def write_backup(self, path: Path, data: bytes) -> Path:
        backup = self.backup_path(path, data)
        if self.read_bytes(backup) != data:
            self.write_file(backup, data)
        return backup


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


# --- the reference store behind a wrapper -------------------------------------------------------


def _read(store: Wrapper, target: str) -> bytes | None:
    """The target's bytes; ``None`` when absent, ``b"\\xff"`` (undecodable) when unreadable, so
    that a call on an unreadable file is left to the reference store (READ-7)."""
    try:
        return store.read(target)
    except OSError:
        return b"\xff"


class Deciding(Wrapper):
    """A wrapper that reads the file and asks the spec's rules before it delegates."""

    def state(self, target: str) -> FileState:
        return classify_bytes(_read(self, target), self.limits[target])

    def entries_now(self, target: str) -> tuple[str, ...]:
        return self.state(target).entries or ()

    def refuse(self, code: str, **extra: Any) -> dict[str, Any]:
        return {"ok": False, "code": code, "message": "refused by the zoo store", **extra}

    def passes(self, op: Mutation) -> bool:
        """Whether ``op`` has valid arguments and a readable file with delimited entries."""
        state = self.state(op.target) if argument_error(op) is None else None
        return state is not None and state.kind in ("absent", "canonical", "cosmetic")

    def replaced_entry(self, op: Mutation) -> tuple[Replace, tuple[str, ...], int] | None:
        """For a Replace that :meth:`passes` and whose ``old_text`` picks one entry: the op, the
        entries and the index of the one it picks."""
        if not (isinstance(op, Replace) and self.passes(op)):
            return None
        current = self.entries_now(op.target)
        index, refusal = choose_entry(current, op.old_text)
        return None if refusal is not None or index is None else (op, current, index)


class KeepsBomOnRead(Wrapper):
    """Reads a leading byte order mark as part of the first entry (READ-1, hermes-agent
    #10878)."""

    def entries(self, target: str) -> list[str]:
        found = list(self.inner.entries(target))
        data = _read(self, target) or b""
        if found and data.startswith(b"\xef\xbb\xbf"):
            found[0] = "\ufeff" + found[0]
        return found


class CountsBytes(Deciding):
    """Counts the limit in UTF-8 bytes instead of code points (LIMIT-1)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if self.passes(op):
            state = self.state(op.target)
            _, result = decide(op, state, self.limits[op.target])
            used = len(encode_entries(result or ()))
            if result is not None and used > self.limits[op.target] >= len(serialize(result)):
                return self.refuse(codes.E_LIMIT)
        return super().mutate(op)


class RefusesExactLimit(Deciding):
    """Refuses a result that uses exactly the limit: an off-by-one (LIMIT-2)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if self.passes(op):
            state = self.state(op.target)
            _, result = decide(op, state, self.limits[op.target])
            if result is not None and len(serialize(result)) == self.limits[op.target]:
                return self.refuse(codes.E_LIMIT)
        return super().mutate(op)


class StuckWhenFull(Deciding):
    """Refuses every mutation, removes included, while the file is over its limit, so a store
    others filled can never be brought back (LIMIT-4, LIMIT-5)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if self.passes(op) and len(serialize(self.entries_now(op.target))) > self.limits[op.target]:
            return self.refuse(codes.E_LIMIT)
        return super().mutate(op)


class SharedLimit(Wrapper):
    """Applies the memory limit to both targets, ignoring ``user_char_limit`` (LIMIT-6)."""

    def __init__(self, root: Path, **limits: int) -> None:
        limits["user_char_limit"] = limits.get("memory_char_limit", 2200)
        super().__init__(root, **limits)


class DuplicateRefusedWhenFull(Deciding):
    """Refuses an exact duplicate ``add`` with ``E_LIMIT`` when the entry would not fit again
    (DUP-2)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Add) and self.passes(op):
            current = self.entries_now(op.target)
            text = normalize_content(op.content)
            if text in current and len(serialize((*current, text))) > self.limits[op.target]:
                return self.refuse(codes.E_LIMIT)
        return super().mutate(op)


class CaseInsensitiveDuplicates(Deciding):
    """Takes an ``add`` that differs from an entry only in case for a duplicate no-op (DUP-3)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Add) and self.passes(op):
            text = normalize_content(op.content)
            current = self.entries_now(op.target)
            if text not in current and text.casefold() in (e.casefold() for e in current):
                return {"ok": True, "code": codes.OK, "duplicate": True}
        return super().mutate(op)


class FirstOfAmbiguous(Deciding):
    """Acts on the first entry containing ``old_text`` instead of refusing distinct matches as
    ambiguous (MATCH-5)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        if answer["code"] != codes.E_AMBIGUOUS or not isinstance(op, Replace | Remove):
            return answer
        needle = normalize_content(op.old_text)
        first = next(e for e in self.entries_now(op.target) if needle in e)
        if isinstance(op, Replace):
            return self.inner.replace(op.target, first, op.new_content)
        return self.inner.remove(op.target, first)


class NoExactPreference(Deciding):
    """Refuses as ambiguous an ``old_text`` that equals one entry and is contained in another,
    so a short entry inside a longer one can never be addressed (MATCH-3, hermes-agent
    #109177)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Replace | Remove) and self.passes(op):
            needle = normalize_content(op.old_text)
            found = list(dict.fromkeys(e for e in self.entries_now(op.target) if needle in e))
            if len(found) > 1 and needle in found:
                return self.refuse(codes.E_AMBIGUOUS, matches=[e[:80] for e in found])
        return super().mutate(op)


class ReplacesSubstring(Deciding):
    """Replaces only the matched ``old_text`` inside the entry, not the whole entry
    (REPLACE-1)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if picked := self.replaced_entry(op):
            replace, current, index = picked
            needle, chosen = normalize_content(replace.old_text), current[index]
            spliced = chosen.replace(needle, normalize_content(replace.new_content), 1)
            return self.inner.replace(op.target, chosen, spliced)
        return super().mutate(op)


class ReplaceMovesToEnd(Deciding):
    """Replaces by removing the entry and appending the new one: other entries are reordered
    (REPLACE-4)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if picked := self.replaced_entry(op):
            replace, current, index = picked
            removed = self.inner.remove(op.target, current[index])
            return self.inner.add(op.target, replace.new_content) if removed["ok"] else removed
        return super().mutate(op)


class BatchItemByItem(Deciding):
    """Applies a batch one item at a time and stops at the first refusal, keeping the items
    before it: not all-or-nothing (BATCH-2)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if not isinstance(op, Batch) or argument_error(op) is not None:
            return super().mutate(op)
        answer: dict[str, Any] = {"ok": True, "code": codes.OK}
        for item in thaw(op.operations):
            action = item["action"]
            if action == "add":
                answer = self.inner.add(op.target, item["content"])
            elif action == "replace":
                answer = self.inner.replace(op.target, item["old_text"], item["content"])
            else:
                answer = self.inner.remove(op.target, item["old_text"])
            if not answer["ok"]:
                return answer
        return answer


class BatchLimitPerItem(Deciding):
    """Checks the limit after every item of a batch instead of once on the final result
    (BATCH-4)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Batch) and self.passes(op):
            state = self.state(op.target)
            limit = self.limits[op.target]
            for end in range(1, len(op.operations)):
                outcome, _ = decide(Batch(op.target, op.operations[:end]), state, limit)
                if outcome.code == codes.E_LIMIT:
                    return self.refuse(codes.E_LIMIT)
        return super().mutate(op)


class RaisesOnSurrogate(Wrapper):
    """Encodes content before checking it, so a lone surrogate raises out of ``add`` instead of
    being refused with ``E_DELIMITER`` (ENTRY-4, CONTRACT-6: invalid UTF-8 crashed Hermes'
    write path)."""

    def add(self, target: Any, content: Any) -> dict[str, Any]:
        if isinstance(content, str) and not is_encodable(content):
            content.encode("utf-8")
        return super().add(target, content)


class LiveSnapshot(Wrapper):
    """Renders the snapshot from the live entries at every call instead of freezing it at
    ``load()``: each write changes the prompt and breaks the prefix cache (SNAP-1)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is not None and "[UNREADABLE:" in block:
            return block
        live = self.inner.entries(target)
        return render_snapshot(target, live, self.limits[target], find_threats)


class PlainNumbers(Wrapper):
    """Writes the header's numbers without thousands separators: ``1364/2200`` (SNAP-7)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is None:
            return None
        head, rest = block.split("\n", 2)[:2], block.split("\n", 2)[2]
        head[1] = re.sub(r"(\d),(\d{3})", r"\1\2", head[1])
        return "\n".join([*head, rest])


class EmptyBlock(Wrapper):
    """Answers a block with an empty body for a target without entries, instead of null
    (SNAP-3)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is not None:
            return block
        return render_snapshot(target, [""], self.limits[target], find_threats)


class MisnamedCore(Wrapper):
    """Claims ``Core`` instead of ``core``: every check that needs ``core`` is skipped, so only a
    check of the claim itself can fail it (CONTRACT-19)."""

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.features = tuple("Core" if f == "core" else f for f in self.inner.features)


trailing_newline = factory_of(TrailingNewline)
overwrites_taken_backup = factory_of(OverwritesTakenBackup)
scans_without_nfkc = factory_of(ScansWithoutNfkc)
batch_skips_scan = factory_of(BatchSkipsScan)
trusts_blocked_prefix = factory_of(TrustsBlockedPrefix)
no_load_scan = factory_of(NoLoadScan)
keeps_bom_on_read = factory_of(KeepsBomOnRead)
counts_bytes = factory_of(CountsBytes)
refuses_exact_limit = factory_of(RefusesExactLimit)
stuck_when_full = factory_of(StuckWhenFull)
shared_limit = factory_of(SharedLimit)
duplicate_refused_when_full = factory_of(DuplicateRefusedWhenFull)
case_insensitive_duplicates = factory_of(CaseInsensitiveDuplicates)
first_of_ambiguous = factory_of(FirstOfAmbiguous)
no_exact_preference = factory_of(NoExactPreference)
replaces_substring = factory_of(ReplacesSubstring)
replace_moves_to_end = factory_of(ReplaceMovesToEnd)
batch_item_by_item = factory_of(BatchItemByItem)
batch_limit_per_item = factory_of(BatchLimitPerItem)
raises_on_surrogate = factory_of(RaisesOnSurrogate)
live_snapshot = factory_of(LiveSnapshot)
plain_numbers = factory_of(PlainNumbers)
empty_block = factory_of(EmptyBlock)
misnamed_core = factory_of(MisnamedCore)
