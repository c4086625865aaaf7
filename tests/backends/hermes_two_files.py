"""Hermes-shaped classes in the other shapes copies take, for ``certify --hermes-class``.

:class:`TwoFileStore` has the shape of agent-kai's ``MemoryStore`` (written here, not copied):
its constructor takes the two files, ``memory_path`` and ``user_path``, not a directory; its
mutations answer typed result objects instead of Hermes' dicts; its one snapshot method,
``snapshot_for_prompt()``, takes no target and answers both blocks. It keeps Hermes' wording
(:data:`~tests.backends.hermes_shaped.HERMES_WORDS`) over the reference store, so with the rules
file of ``tests/data/hermes-shaped.rules`` it certifies as :class:`ShapedStore` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.backends.hermes_shaped import ShapedStore


@dataclass(frozen=True)
class MemoryResult:
    """What a mutation answers: Hermes' result dict as an object, ``None`` for a field it lacks."""

    success: bool
    message: str | None = None
    error: str | None = None
    usage: str | None = None
    matches: list[str] | None = None
    drift_backup: str | None = None


class TwoFileStore(ShapedStore):
    """Takes its two files, not a directory; answers :class:`MemoryResult` objects; renders
    both snapshot blocks at once (``snapshot_for_prompt()``)."""

    def __init__(
        self,
        memory_path: str | Path,
        user_path: str | Path,
        memory_char_limit: int = 2200,
        user_char_limit: int = 1375,
    ) -> None:
        memory, user = Path(memory_path), Path(user_path)
        if (memory.name, user.name) != ("MEMORY.md", "USER.md") or memory.parent != user.parent:
            raise ValueError(f"expected MEMORY.md and USER.md side by side, got {memory}, {user}")
        super().__init__(memory.parent, memory_char_limit, user_char_limit)

    def _result(self, target: Any, outcome: dict[str, Any]) -> MemoryResult:  # type: ignore[override]
        return MemoryResult(**super()._result(target, outcome))

    format_for_system_prompt = None  # type: ignore[assignment]  # this shape has none

    def snapshot_for_prompt(self) -> dict[str, str | None]:
        return {target: self._session().snapshot(target) for target in ("memory", "user")}


class NeedsClientStore(TwoFileStore):
    """Its constructor also needs a client memspec cannot make: not certifiable as it is."""

    def __init__(
        self, memory_path: str, user_path: str, client: object, memory_char_limit: int = 2200,
        user_char_limit: int = 1375,
    ) -> None:  # fmt: skip
        super().__init__(memory_path, user_path, memory_char_limit, user_char_limit)
        self.client = client
