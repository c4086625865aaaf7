"""A plugin whose ``register(ctx)`` registers a class of its own that mirrors part of Hermes'
interface without subclassing ``MemoryProvider`` (as hermes-local-memory 0.3.1's shim does):
Hermes 0.19.0 takes it; it fails PLUGIN-1 alone, each hook it lacks answered by the interface's
default."""

from __future__ import annotations

from typing import Any


class Lookalike:
    @property
    def name(self) -> str:
        return "lookalike"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        pass

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def shutdown(self) -> None:
        pass


def register(ctx: Any) -> None:
    ctx.register_memory_provider(Lookalike())
