"""A provider plugin with no ``register``: Hermes finds its ``MemoryProvider`` subclass and
instantiates it with no arguments."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider


class QuietProvider(MemoryProvider):
    """A context-only provider that remembers nothing and says so."""

    @property
    def name(self) -> str:
        return "quiet-plugin"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._session = session_id

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []
