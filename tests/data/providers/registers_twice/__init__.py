"""A plugin whose ``register(ctx)`` registers two providers: Hermes keeps the second and drops
the first without a word (PLUGIN-1)."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider


class First(MemoryProvider):
    @property
    def name(self) -> str:
        return "first"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        pass

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []


class Second(First):
    @property
    def name(self) -> str:
        return "second"


def register(ctx: Any) -> None:
    ctx.register_memory_provider(First())
    ctx.register_memory_provider(Second())
