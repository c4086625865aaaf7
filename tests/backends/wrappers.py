"""Backends broken on purpose: the reference store behind a :class:`Wrapper`, one defect each.

A wrapper delegates every contract method to a reference store on the same root and changes
what is answered or written around it, never the reference's internals: it reads or rewrites the
files, or decides a call itself with the spec's pure rules before it delegates
(:class:`Deciding`). Each docstring names the defect and the clause it breaks; the zoo
(``tests/zoo.py``) lists them with the check that catches each, and the power tests
(``tests/power/``) prove it. A few at the end are not defects of the spec but misbehave for the
harness's own tests (a hang, a raise, a thread-bound store) or take a choice the spec leaves
open, which every check must accept.

A wrapper can only change what the reference answers and the files around it. The defects of a
step inside a store are built on the two other bases, each by design: ``naive_broken.py``
overrides one step of the naive store (``naive.py``, a store written from the contract alone,
one method per file step) and ``procs.py`` one step of :class:`~tests.backends.procs.FileStore`
(a store claiming multi-process, crash-safe and durable, for the process checks).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from pathlib import Path
from typing import Any

from memspec.reference_impl import files, open_store
from memspec.spec import codes
from memspec.spec.codec import (
    DELIMITER,
    WHITESPACE,
    FileState,
    classify_bytes,
    decode,
    encode_entries,
    has_delimiter_line,
    is_encodable,
    normalize_content,
    parse_text,
    serialize,
)
from memspec.spec.operations import Add, Batch, Mutation, Remove, Replace, thaw
from memspec.spec.rules import argument_error, choose_entry, decide
from memspec.spec.snapshot import render_snapshot, usage_label
from memspec.spec.targets import FILENAMES, is_target
from memspec.spec.threats import find_threats
from tests.backends import factory_of

# --- the base -----------------------------------------------------------------------------------


class ReadFailed(OSError):
    """The wrapper's own read of the file failed: the mutation answers ``E_UNREADABLE``."""


class Wrapper:
    """Delegates every contract method to a reference store on the same root."""

    def __init__(self, root: Path, **limits: int) -> None:
        self.root = Path(root)
        self.limits = {"memory": limits.get("memory_char_limit", 2200),
                       "user": limits.get("user_char_limit", 1375)}  # fmt: skip
        self.inner = open_store(root, **limits)
        self.features = self.inner.features

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add(self, target: Any, content: Any) -> dict[str, Any]:
        return self.answer(Add(target, content))

    def replace(self, target: Any, old_text: Any, new_content: Any) -> dict[str, Any]:
        return self.answer(Replace(target, old_text, new_content))

    def remove(self, target: Any, old_text: Any) -> dict[str, Any]:
        return self.answer(Remove(target, old_text))

    def batch(self, target: Any, operations: Any) -> dict[str, Any]:
        return self.answer(Batch(target, operations))

    def answer(self, op: Mutation) -> dict[str, Any]:
        """Answers one mutation by :meth:`mutate`; a read of the file by the wrapper itself that
        fails refuses it with ``E_UNREADABLE``, as the store must (READ-7): the fault was meant
        for the store's read, which the wrapper's own read took."""
        try:
            return self.mutate(op)
        except ReadFailed as error:
            return {"ok": False, "code": codes.E_UNREADABLE, "message": f"cannot read: {error}"}

    def mutate(self, op: Mutation) -> dict[str, Any]:
        """Sends ``op`` to the reference store (a subclass changes what happens around it)."""
        if isinstance(op, Add):
            return self.inner.add(op.target, op.content)
        if isinstance(op, Replace):
            return self.inner.replace(op.target, op.old_text, op.new_content)
        if isinstance(op, Remove):
            return self.inner.remove(op.target, op.old_text)
        return self.inner.batch(op.target, thaw(op.operations))

    def path(self, target: str) -> Path:
        return self.root / FILENAMES[target]

    def read(self, target: str) -> bytes | None:
        try:
            return self.path(target).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise ReadFailed(error.errno, error.strerror, error.filename) from error


class Deciding(Wrapper):
    """A wrapper that reads the file and asks the spec's rules before it delegates."""

    def state(self, target: str) -> FileState:
        return classify_bytes(self.read(target), self.limits[target])

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


# --- format and reading -------------------------------------------------------------------------


class SplitsOnBareSection(Wrapper):
    """Reads entries by splitting on every ``§``, not only on a line that is ``§`` alone, so
    ``"Fee: 5 § per unit"`` comes back as two entries (FORMAT-3, FORMAT-5)."""

    def entries(self, target: str) -> list[str]:
        pieces = (piece.strip(WHITESPACE) for e in self.inner.entries(target) for piece in
                  e.split("§"))  # fmt: skip
        return [piece for piece in pieces if piece]


class KeepsCarriageReturns(Wrapper):
    """Holds added content with its CR LF and lone CR, as given (Hermes does, a Deviations
    row): it reports such an entry so while its file reads back with line feeds. That is one
    fault, ENTRY-1's (content is stored normalised), not FORMAT-5's beside it."""

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.as_given: dict[str, str] = {}

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        content = op.content if isinstance(op, Add) else None
        if answer["ok"] and isinstance(content, str) and "\r" in content:
            self.as_given[normalize_content(content)] = content.strip(WHITESPACE)
        return answer

    def entries(self, target: str) -> list[str]:
        return [self.as_given.get(entry, entry) for entry in self.inner.entries(target)]


class AcceptsDelimiterLine(Wrapper):
    """Adds content holding a line that is ``§`` alone as it is (hermes-agent #54403): the file
    then reads back as several entries (ENTRY-3, FORMAT-5)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        content = op.content if isinstance(op, Add) else None
        if answer["code"] != codes.E_DELIMITER or not isinstance(content, str):
            return answer
        if not has_delimiter_line(content):
            return answer  # a lone surrogate (ENTRY-4) is refused with the same code
        path = self.path(op.target)
        with files.locked(path) as lock:
            current = self.read(op.target) or b""
            raw = content.strip(WHITESPACE).encode("utf-8", "replace")
            new = current + (b"\n\xc2\xa7\n" if current else b"") + raw
            files.atomic_write(path, new)
            # recorded as the store's own write, as the store records its own: only the
            # delimiter line is wrong here, not who wrote the file (no backups, DRIFT-5)
            files.record_digest(lock, files.digest(new))
        return {"ok": True, "code": codes.OK}


class KeepsBomOnRead(Wrapper):
    """Reads a leading byte order mark as part of the first entry (READ-1, hermes-agent
    #10878)."""

    def entries(self, target: str) -> list[str]:
        found = list(self.inner.entries(target))
        with contextlib.suppress(OSError):  # entries() is the session's view: no read error
            if found and (self.read(target) or b"").startswith(b"\xef\xbb\xbf"):
                found[0] = "\ufeff" + found[0]
        return found


class DedupOnRead(Wrapper):
    """Drops duplicate entries when reading (Hermes' silent dedup; READ-5, DUP-4)."""

    def entries(self, target: str) -> list[str]:
        return list(dict.fromkeys(self.inner.entries(target)))


class RaisesOnSurrogate(Wrapper):
    """Encodes content before checking it, so a lone surrogate raises out of ``add`` instead of
    being refused with ``E_DELIMITER`` (ENTRY-4, CONTRACT-6: invalid UTF-8 crashed Hermes'
    write path)."""

    def add(self, target: Any, content: Any) -> dict[str, Any]:
        if isinstance(content, str) and not is_encodable(content):
            content.encode("utf-8")
        return super().add(target, content)


# --- limits and duplicates ----------------------------------------------------------------------


class TruncatesToFit(Wrapper):
    """Cuts content down to fit instead of refusing it (LIMIT-3)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        answer = self.inner.add(target, content)
        while answer["code"] == "E_LIMIT" and len(content) > 1:
            content = content[: len(content) // 2]
            answer = self.inner.add(target, content)
        return answer


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


# --- matching, replace and batch ----------------------------------------------------------------


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
    """Carries out a replace the spec accepts as one batch that removes the entry and appends the
    new one: the other entries are reordered (REPLACE-4)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if picked := self.replaced_entry(op):
            replace, current, index = picked
            outcome, result = decide(replace, self.state(op.target), self.limits[op.target])
            if outcome.code == codes.OK and result is not None:
                items = [{"action": "remove", "old_text": current[index]},
                         {"action": "add", "content": replace.new_content}]  # fmt: skip
                return self.inner.batch(op.target, items)
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


# --- snapshot -----------------------------------------------------------------------------------


class FloatPercent(Wrapper):
    """Computes the header percent with float division (29/100 shows 28%; SNAP-6)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is None:
            return None

        def redo(match: re.Match[str]) -> str:
            used, limit = (int(n.replace(",", "")) for n in match.group(2, 3))
            return f"[{int(used / limit * 100 * 0.999999)}% — {match.group(2)}/{match.group(3)}"

        return re.sub(r"\[(\d+)% — ([\d,]+)/([\d,]+)", redo, block, count=1)


class LiveSnapshot(Wrapper):
    """Renders the snapshot from the live entries at every call instead of freezing it at
    ``load()``: each write changes the prompt and breaks the prefix cache (SNAP-1)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is not None and "[UNREADABLE:" in block:
            return block
        live = self.inner.entries(target)
        return render_snapshot(target, live, self.limits[target], find_threats)


class DedupBlock(Wrapper):
    """Renders the block frozen at ``load()`` from the entries it read with duplicates dropped,
    as agent-os' curated store does; ``entries`` keeps them (READ-5)."""

    def load(self) -> None:
        self.inner.load()
        self.frozen = {
            target: render_snapshot(
                target, list(dict.fromkeys(self.inner.entries(target))), limit, find_threats
            )
            for target, limit in self.limits.items()
        }

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is None or "[UNREADABLE:" in block:
            return block
        return self.frozen.get(target, block)


class _ShowsItsBlocksInPrompt(Wrapper):
    """Puts in the agent's system prompt the blocks it shows in ``snapshot``, as a port that
    renders its blocks one way for both would: :meth:`_in_prompt` changes each answer's."""

    def _in_prompt(self, answer: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def agent_start(self, base: str, providers: list[Any]) -> dict[str, Any]:
        return self._in_prompt(self.inner.agent_start(base, providers))

    def agent_turn(self, user: str, reply: str) -> dict[str, Any]:
        return self._in_prompt(self.inner.agent_turn(user, reply))

    def agent_rebuild(self, point: str) -> dict[str, Any]:
        return self._in_prompt(self.inner.agent_rebuild(point))


class _RewritesHeaders(_ShowsItsBlocksInPrompt):
    """Rewrites the header line of every block it shows — in ``snapshot`` and in the agent's
    system prompt alike, as a port that renders its own header would — with :meth:`header`."""

    def header(self, line: str, body: str) -> str:
        raise NotImplementedError

    def _rewrite(self, block: str) -> str:
        bar, line, rest = block.split("\n", 2)
        body = rest.split("\n", 1)[1] if "\n" in rest else ""
        return "\n".join([bar, self.header(line, body), rest])

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        return None if block is None else self._rewrite(block)

    def _in_prompt(self, answer: dict[str, Any]) -> dict[str, Any]:
        for target in FILENAMES:
            block = self.inner.snapshot(target)
            if block and isinstance(answer.get("system"), str):
                answer["system"] = answer["system"].replace(block, self._rewrite(block))
        return answer


class PlainNumbers(_RewritesHeaders):
    """Writes the header's numbers without thousands separators, ``1364/2200``, in ``snapshot``
    and in the agent's prompt alike (SNAP-7)."""

    def header(self, line: str, body: str) -> str:
        return re.sub(r"(\d),(\d{3})", r"\1\2", line)


class OtherHeaderWording(_RewritesHeaders):
    """Titles the memory block ``MEMORY (personal notes)``: the header's wording only (SNAP-5);
    every other clause holds, and no other may fail."""

    def header(self, line: str, body: str) -> str:
        return line.replace("MEMORY (your personal notes)", "MEMORY (personal notes)")


class UsageWithoutDelimiters(_RewritesHeaders):
    """Shows as used the entries' characters without the delimiters between them, as a port
    did: the header's usage figure only (SNAP-8); every other clause holds."""

    def header(self, line: str, body: str) -> str:
        found = re.search(r"\[\d+% — ([\d,]+)/([\d,]+) chars\]$", line)
        if found is None:
            return line  # [unreadable]
        used, limit = (int(number.replace(",", "")) for number in found.groups())
        used -= len(DELIMITER) * body.count(DELIMITER)
        return line[: found.start()] + f"[{usage_label(used, limit)}]"


class EmptyBlock(_ShowsItsBlocksInPrompt):
    """Answers a block with an empty body for a target without entries, instead of null, in
    ``snapshot`` and in the agent's prompt alike (SNAP-3)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is not None:
            return block
        return render_snapshot(target, [""], self.limits[target], find_threats)

    def _in_prompt(self, answer: dict[str, Any]) -> dict[str, Any]:
        """Puts each empty block where the store's block goes, memory's before user's."""
        system = answer.get("system")
        if not isinstance(system, str):
            return answer
        user = self.inner.snapshot("user")
        if self.inner.snapshot("memory") is None:
            empty = self.snapshot("memory") or ""
            at = system.rfind(user) if user else -1
            system = (
                system[:at] + empty + "\n\n" + system[at:] if at >= 0 else system + "\n\n" + empty
            )
        if user is None:
            system += "\n\n" + (self.snapshot("user") or "")
        return {**answer, "system": system}


# --- drift --------------------------------------------------------------------------------------


class RawBytesDriftGuard(Wrapper):
    """Guards drift by comparing the file's raw bytes with the bytes it last wrote, so a BOM,
    CRLF or a blank line around ``§`` is refused as drift (DRIFT-1, hermes-agent #61523 and
    #42874). The last written bytes are kept in a sidecar ``NAME.written``; a foreign file is
    left to the inner store, so this is the one defect."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if argument_error(op) is not None or not is_target(op.target):
            return super().mutate(op)
        sidecar = self.root / (FILENAMES[op.target] + ".written")
        current = self.read(op.target)
        written = sidecar.read_bytes() if sidecar.exists() else None
        kind = classify_bytes(current, self.limits[op.target]).kind
        if current and current != written and kind in ("canonical", "cosmetic"):
            backup = self.path(op.target).with_name(
                f"{FILENAMES[op.target]}.bak.{hashlib.sha256(current).hexdigest()[:16]}"
            )
            if not backup.exists():
                backup.write_bytes(current)
            return {"ok": False, "code": codes.E_DRIFT, "backup": str(backup),
                    "message": "the file changed since this store wrote it"}  # fmt: skip
        answer = super().mutate(op)
        after = self.read(op.target)
        if after is not None:
            sidecar.write_bytes(after)
        return answer


class CosmeticLosesFirstEntry(Wrapper):
    """Misreads a cosmetic file (a BOM, CRLF, blank lines around ``§``): a mutation that
    succeeds on one writes the entries back without the first (DRIFT-1). On a canonical file it
    is the reference, so the difference is the cosmetic file's alone."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if not is_target(op.target):
            return super().mutate(op)
        before = self.read(op.target)
        cosmetic = classify_bytes(before, self.limits[op.target]).kind == "cosmetic"
        answer = super().mutate(op)
        text = decode(self.read(op.target) or b"")
        if cosmetic and answer.get("ok") and text is not None:
            self.path(op.target).write_bytes(encode_entries(parse_text(text)[1:]))
        return answer


class RewritesWithoutBackup(Wrapper):
    """Does not recognise a foreign file: before a mutation it cuts every entry over the limit
    down to the limit and rewrites the file, keeping no copy, so text appended without
    delimiters is silently destroyed (DRIFT-2, DRIFT-5, hermes-agent #26045)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if argument_error(op) is None and is_target(op.target):
            data = self.read(op.target)
            state = classify_bytes(data, self.limits[op.target])
            if state.kind == "foreign" and state.entries is not None:
                limit = self.limits[op.target]
                fixed = [entry[:limit].strip(WHITESPACE) for entry in state.entries]
                self.path(op.target).write_bytes(encode_entries([e for e in fixed if e]))
        return super().mutate(op)


# --- the contract -------------------------------------------------------------------------------


class MisnamedCore(Wrapper):
    """Claims ``Core`` instead of ``core``: every check that needs ``core`` is skipped, so only a
    check of the claim itself can fail it (CONTRACT-19)."""

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.features = tuple("Core" if f == "core" else f for f in self.inner.features)


class RaisesOnAdd(Wrapper):
    """Raises out of ``add`` instead of answering (CONTRACT-6)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        raise RuntimeError("boom: add is broken")


# --- misbehaving for the harness's own tests: hangs, threads, feature claims --------------------


class HangsOnAdd(Wrapper):
    """Never returns from ``add`` (a hung backend must not hang the harness)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        time.sleep(3600)
        return {}


class HangsOnClose(Wrapper):
    """Never returns from ``close``."""

    def close(self) -> None:
        time.sleep(3600)


class ThreadBound(Wrapper):
    """A correct store whose resources belong to the thread that opened it, as a ``sqlite3``
    connection's do: a call from any other thread raises."""

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.owner = threading.get_ident()

    def on_the_owner(self, name: str) -> None:
        if threading.get_ident() != self.owner:
            raise RuntimeError(f"{name} called from a thread that did not open the store")

    def mutate(self, op: Mutation) -> dict[str, Any]:
        self.on_the_owner(type(op).__name__.lower())
        return super().mutate(op)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if not callable(found):
            return found

        def on_the_owner(*args: Any, **kwargs: Any) -> Any:
            self.on_the_owner(name)
            return found(*args, **kwargs)

        return on_the_owner


class ClaimsNoBatch(Wrapper):
    """A correct store that claims only ``core`` (feature-gated checks must be skipped)."""

    features = ("core",)

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.features = ("core",)


class RefusesReplace(Wrapper):
    """Refuses ``replace``, alone or in a batch, with ``E_UNSUPPORTED`` and offers ``patch``, as
    the 0.22 Hermes line does ("use 'patch'"): it breaks CONTRACT-2 and REPLACE-1, and every
    clause a check or example drives through ``replace`` is not verified, never failed."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        items = thaw(op.operations) if isinstance(op, Batch) else ()
        if isinstance(op, Replace) or any(
            isinstance(item, dict) and item.get("action") == "replace" for item in items
        ):
            return {"ok": False, "code": codes.E_UNSUPPORTED,
                    "message": "'replace' is not available; use 'patch'"}  # fmt: skip
        return super().mutate(op)


class RefusesReplaceLosesBytes(RefusesReplace):
    """Refuses ``replace`` as :class:`RefusesReplace` does, and deletes every backup once a
    mutation is answered, so another writer's bytes that a rewrite dropped are lost (DRIFT-5):
    DRIFT-5's checks must fail it through ``patch``, not stop at the ``replace`` it refuses
    (CONTRACT-2's)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        for backup in self.root.glob("*.bak.*"):
            backup.unlink()
        return answer


def factory_raises(root: Path, **limits: int) -> Wrapper:
    raise OSError("cannot open the store")


# --- not broken: the choices the spec leaves open, which every property must accept -------------


class ReplaceFindsNothing(Wrapper):
    """Answers every ``replace`` ``E_NOMATCH`` and changes nothing: MATCH's business, which its
    own checks fail; a check that builds on a replace (the crash checks) cannot judge and says
    its clauses are not verified, never failed."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Replace):
            return {"ok": False, "code": codes.E_NOMATCH, "message": "no entry matches"}
        return super().mutate(op)


class RefusesEmptyingBatch(Wrapper):
    """Not broken: takes the MAY of BATCH-8 and refuses, with ``E_INVALID`` and without writing, a
    batch that would leave a target that has entries with none."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if isinstance(op, Batch) and argument_error(op) is None:
            limit = self.limits[op.target]
            state = classify_bytes(self.read(op.target), limit)
            if state.entries and state.kind in ("canonical", "cosmetic"):
                outcome, result = decide(op, state, limit)
                if outcome.ok and result == ():
                    return {"ok": False, "code": codes.E_INVALID,
                            "message": "refusing a batch that empties the store"}  # fmt: skip
        return super().mutate(op)


class StricterScanner(Wrapper):
    """Not broken: its threat patterns are a superset of the spec's (SCAN-2 says "at least"): it
    also refuses content naming ``zsh`` and blocks such entries in the snapshot."""

    WORD = "zsh"

    def mutate(self, op: Mutation) -> dict[str, Any]:
        if argument_error(op) is None and any(self.WORD in text for text in _contents(op)):
            return {"ok": False, "code": codes.E_THREAT, "message": "local pattern"}
        return super().mutate(op)

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is None or "[UNREADABLE:" in block:
            return block
        head, body = block.split("\n", 3)[:3], block.split("\n", 3)[3]
        placeholder = f"[BLOCKED: {FILENAMES[target]} entry matched a local pattern]"
        shown = [placeholder if self.WORD in e else e for e in body.split("\n§\n")]
        return "\n".join([*head, "\n§\n".join(shown)])


def _contents(op: Mutation) -> list[str]:
    if isinstance(op, Add):
        return [op.content]
    if isinstance(op, Replace):
        return [op.new_content]
    if isinstance(op, Batch):
        return [item.get("content", "") for item in op.operations]
    return []


splits_on_bare_section = factory_of(SplitsOnBareSection)
accepts_delimiter_line = factory_of(AcceptsDelimiterLine)
keeps_carriage_returns = factory_of(KeepsCarriageReturns)
keeps_bom_on_read = factory_of(KeepsBomOnRead)
dedup_on_read = factory_of(DedupOnRead)
raises_on_surrogate = factory_of(RaisesOnSurrogate)
truncates_to_fit = factory_of(TruncatesToFit)
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
float_percent = factory_of(FloatPercent)
dedup_block = factory_of(DedupBlock)
live_snapshot = factory_of(LiveSnapshot)
plain_numbers = factory_of(PlainNumbers)
other_header_wording = factory_of(OtherHeaderWording)
usage_without_delimiters = factory_of(UsageWithoutDelimiters)
empty_block = factory_of(EmptyBlock)
raw_bytes_drift_guard = factory_of(RawBytesDriftGuard)
cosmetic_loses_first_entry = factory_of(CosmeticLosesFirstEntry)
rewrites_without_backup = factory_of(RewritesWithoutBackup)
misnamed_core = factory_of(MisnamedCore)
raises_on_add = factory_of(RaisesOnAdd)
hangs_on_add = factory_of(HangsOnAdd)
hangs_on_close = factory_of(HangsOnClose)
thread_bound = factory_of(ThreadBound)
core_only = factory_of(ClaimsNoBatch)
refuses_replace = factory_of(RefusesReplace)
refuses_replace_loses_bytes = factory_of(RefusesReplaceLosesBytes)
replace_finds_nothing = factory_of(ReplaceFindsNothing)
refuses_emptying_batch = factory_of(RefusesEmptyingBatch)
stricter_scanner = factory_of(StricterScanner)
