"""Classes with Hermes' ``MemoryStore`` shape, as ports copy it, for ``certify --hermes-class``.

Each keeps Hermes' methods (``load_from_disk``, ``add`` / ``replace`` / ``remove`` /
``apply_batch`` returning result dicts, the live ``memory_entries`` / ``user_entries``, a
snapshot method, ``reset_consolidation_failures``) over the reference store, and words its
refusals as Hermes does, except two Hermes never says: a delimiter line in content and a failed
write. ``tests/data/hermes-shaped.rules`` maps those two. The variants differ where ports
differ: where the directory comes from, the snapshot method's name, the refusals' language.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from memspec.reference_impl import open_store

HERMES_WORDS = {
    "E_TARGET": "Invalid target '{target}'. Use 'memory' or 'user'.",
    "E_INVALID": "Unknown action in the operations list.",
    "E_EMPTY": "Content cannot be empty.",
    "E_THREAT": "Blocked: content matches a threat pattern.",
    "E_UNREADABLE": "Refusing to write {file}: the file exists on disk but could not be read.",
    "E_DRIFT": "Refusing to write {file}: file on disk has content this session did not write.",
    "E_NOMATCH": "No entry matched the text.",
    "E_AMBIGUOUS": "Multiple entries matched the text. Be more specific.",
    "E_LIMIT": "Memory at {usage} chars. Adding this entry would exceed the limit.",
    "E_DELIMITER": "Content holds a line of its own with the entry delimiter.",
    "E_IO": "The memory file could not be written.",
}
"""Hermes' wording, but for the last two codes, which its table does not know."""

GERMAN_WORDS = {
    **HERMES_WORDS,
    "E_NOMATCH": "Kein Eintrag passt zum Text.",
    "E_AMBIGUOUS": "Mehrere Einträge passen zum Text.",
}
"""A port that says two refusals in German."""


class ShapedStore:
    """Hermes' shape, with its directory as a constructor argument (as agent-os' port)."""

    words = HERMES_WORDS

    def __init__(
        self, memory_dir: Path, memory_char_limit: int = 2200, user_char_limit: int = 1375
    ) -> None:
        self._memory_dir = Path(memory_dir)
        self.memory_char_limit = memory_char_limit
        self.user_char_limit = user_char_limit
        self.memory_entries: list[str] = []
        self.user_entries: list[str] = []
        self._store: Any = None
        self.turns = 0

    def _directory(self) -> Path:
        return self._memory_dir

    def _session(self) -> Any:
        if self._store is None:
            self._store = open_store(
                self._directory(),
                memory_char_limit=self.memory_char_limit,
                user_char_limit=self.user_char_limit,
            )
        return self._store

    def load_from_disk(self) -> None:
        self._session().load()
        self._refresh()

    def reset_consolidation_failures(self) -> None:
        self.turns += 1

    def _refresh(self) -> None:
        for target in ("memory", "user"):
            setattr(self, f"{target}_entries", self._session().entries(target))

    def _result(self, target: Any, outcome: dict[str, Any]) -> dict[str, Any]:
        self._refresh()
        if outcome["ok"]:
            message = (
                "Entry already exists (no duplicate added)."
                if outcome.get("duplicate")
                else "Done."
            )
            result: dict[str, Any] = {"success": True, "message": message}
        else:
            file = "USER.md" if target == "user" else "MEMORY.md"
            usage = re.search(r"[\d,]+/[\d,]+", str(outcome.get("usage", "")))
            text = self.words[outcome["code"]].format(
                target=target, file=file, usage=usage[0] if usage else "?"
            )
            result = {"success": False, "error": text}
        if "usage" in outcome:
            result["usage"] = outcome["usage"]
        if "matches" in outcome:
            result["matches"] = outcome["matches"]
        if "backup" in outcome:
            result["drift_backup"] = outcome["backup"]
        return result

    def add(self, target: str, content: str) -> dict[str, Any]:
        return self._result(target, self._session().add(target, content))

    def replace(self, target: str, old_text: str, new_content: str) -> dict[str, Any]:
        return self._result(target, self._session().replace(target, old_text, new_content))

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        return self._result(target, self._session().remove(target, old_text))

    def apply_batch(self, target: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        return self._result(target, self._session().batch(target, operations))

    def format_for_system_prompt(self, target: str) -> str | None:
        return self._session().snapshot(target)


class GermanStore(ShapedStore):
    """Says "no match" and "several matches" in German: a rules file maps them."""

    words = GERMAN_WORDS


def get_memory_dir() -> Path:
    """Hermes' way: the directory comes from the profile's home, read when it is needed."""
    return Path(os.environ.get("HERMES_HOME", ".")) / "memories"


class ProfileStore(ShapedStore):
    """Takes no directory: like Hermes' own store it asks :func:`get_memory_dir` each time."""

    def __init__(self, memory_char_limit: int = 2200, user_char_limit: int = 1375) -> None:
        super().__init__(Path("."), memory_char_limit, user_char_limit)

    def _directory(self) -> Path:
        return get_memory_dir()


class AttributeStore(ShapedStore):
    """Takes no directory argument: it sets a path attribute, which a caller may change."""

    def __init__(self, memory_char_limit: int = 2200, user_char_limit: int = 1375) -> None:
        super().__init__(Path.home() / ".attribute-store", memory_char_limit, user_char_limit)
        self.base_path = Path.home() / ".attribute-store"

    def _directory(self) -> Path:
        return self.base_path


class BlockStore(ShapedStore):
    """Names its snapshot method its own way (``render_block``): ``--hermes-snapshot``."""

    def format_for_system_prompt(self, target: str) -> str | None:  # type: ignore[override]
        raise AssertionError("not the snapshot method of this port")

    def render_block(self, target: str) -> str | None:
        return self._session().snapshot(target)


class ReadOnlyStore:
    """Not Hermes-shaped: it reads entries but has no ``add``."""

    def __init__(self, memory_dir: Path, memory_char_limit: int, user_char_limit: int) -> None:
        self.memory_entries: list[str] = []
        self.user_entries: list[str] = []

    def load_from_disk(self) -> None:
        pass

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        return {"success": False, "error": "read only"}


class TurnStore(ShapedStore):
    """Answers a mutation only in a turn its agent started (``start_turn``), as ports that count
    per turn do: ``--hermes-between start_turn``."""

    def start_turn(self) -> None:
        self.in_turn = True

    def _result(self, target: Any, outcome: dict[str, Any]) -> dict[str, Any]:
        if not getattr(self, "in_turn", False):
            return {"success": False, "error": "No turn was started."}
        self.in_turn = False
        return super()._result(target, outcome)


CHINESE_TITLES = {"memory": "长期记忆（你的笔记）", "user": "用户画像（用户是谁）"}


class ChineseHeaderStore(ShapedStore):
    """Heads its snapshot block with one line of its own, in Chinese, and no bars of ``═``: the
    entries under it are the spec's, so only the header's clauses (SNAP-4, SNAP-5) may fail."""

    def format_for_system_prompt(self, target: str) -> str | None:
        block = self._session().snapshot(target)
        if block is None:
            return None
        lines = block.split("\n")
        usage = re.search(r"\[(\d+)% — ([\d,]+)/([\d,]+) chars\]", lines[1])
        figures = f"{usage[1]}%，已用 {usage[2]}/{usage[3]} 字" if usage else "无法读取"
        return "\n".join([f"{CHINESE_TITLES[target]}【{figures}】", *lines[3:]])
