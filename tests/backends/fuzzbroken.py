"""Backends broken on purpose for the property checks of :mod:`memspec.fuzz`.

Each is the reference store behind a thin wrapper, written against the contract: it changes what
is answered or written, never the reference's internals. Each docstring names the defect and the
clause it breaks; ``tests/test_fuzz_power.py`` proves the ``ci`` profile catches it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from memspec.reference_impl import open_store
from memspec.spec import codes
from memspec.spec.codec import WHITESPACE, classify_bytes, encode_entries
from memspec.spec.fence import find_fence_tags, find_system_notes, frame
from memspec.spec.operations import Add, Batch, Mutation, Remove, Replace, thaw
from memspec.spec.rules import argument_error, decide
from memspec.spec.targets import FILENAMES, is_target


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
        return self.mutate(Add(target, content))

    def replace(self, target: Any, old_text: Any, new_content: Any) -> dict[str, Any]:
        return self.mutate(Replace(target, old_text, new_content))

    def remove(self, target: Any, old_text: Any) -> dict[str, Any]:
        return self.mutate(Remove(target, old_text))

    def batch(self, target: Any, operations: Any) -> dict[str, Any]:
        return self.mutate(Batch(target, operations))

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


class SplitsOnBareSection(Wrapper):
    """Reads entries by splitting on every ``§``, not only on a line that is ``§`` alone, so
    ``"Fee: 5 § per unit"`` comes back as two entries (FORMAT-3, FORMAT-5)."""

    def entries(self, target: str) -> list[str]:
        pieces = (piece.strip(WHITESPACE) for e in self.inner.entries(target) for piece in
                  e.split("§"))  # fmt: skip
        return [piece for piece in pieces if piece]


class AcceptsDelimiterLine(Wrapper):
    """Stores content holding a line that is ``§`` alone as it is (hermes-agent #54403): the file
    then reads back as several entries (ENTRY-3, FORMAT-5)."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        answer = super().mutate(op)
        if answer["code"] != codes.E_DELIMITER or not isinstance(op, Add | Replace):
            return answer
        content = op.content if isinstance(op, Add) else op.new_content
        current = self.read(op.target) or b""
        raw = content.strip(WHITESPACE).encode("utf-8", "replace")
        self.path(op.target).write_bytes(current + (b"\n\xc2\xa7\n" if current else b"") + raw)
        return {"ok": True, "code": codes.OK}


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


class SinglePassFence(Wrapper):
    """Strips fence tags and forged notes in one pass, so ``<</memory-context>/memory-context>``
    reassembles into a live closing tag (FENCE-3, hermes-agent #108964)."""

    def fence(self, raw: str) -> str:
        spans = sorted(find_fence_tags(raw) + find_system_notes(raw))
        kept, position = [], 0
        for start, end in spans:
            kept.append(raw[position : max(position, start)])
            position = max(position, end)
        clean = ("".join(kept) + raw[position:]).strip(WHITESPACE)
        return frame(clean) if clean else ""


# --- Not broken: the choices the spec leaves open, which every property must accept ---------


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


def refuses_emptying_batch(root: Path, **limits: int) -> RefusesEmptyingBatch:
    return RefusesEmptyingBatch(root, **limits)


def stricter_scanner(root: Path, **limits: int) -> StricterScanner:
    return StricterScanner(root, **limits)


def splits_on_bare_section(root: Path, **limits: int) -> SplitsOnBareSection:
    return SplitsOnBareSection(root, **limits)


def accepts_delimiter_line(root: Path, **limits: int) -> AcceptsDelimiterLine:
    return AcceptsDelimiterLine(root, **limits)


def raw_bytes_drift_guard(root: Path, **limits: int) -> RawBytesDriftGuard:
    return RawBytesDriftGuard(root, **limits)


def rewrites_without_backup(root: Path, **limits: int) -> RewritesWithoutBackup:
    return RewritesWithoutBackup(root, **limits)


def single_pass_fence(root: Path, **limits: int) -> SinglePassFence:
    return SinglePassFence(root, **limits)
