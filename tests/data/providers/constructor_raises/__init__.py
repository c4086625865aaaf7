"""A plugin folder whose provider's constructor raises (a missing API key, read too early)."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider


class NeedsAKey(MemoryProvider):
    def __init__(self) -> None:
        raise RuntimeError("MY_PROVIDER_API_KEY is not set")

    @property
    def name(self) -> str:
        return "needs-a-key"

    def is_available(self) -> bool:
        return False

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        pass

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []
