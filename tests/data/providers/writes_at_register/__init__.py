"""A plugin whose ``register(ctx)`` loads Hermes' config and then writes a state file of its own
into the Hermes home: loading writes (PLUGIN-1), whatever Hermes set up before it."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider


class EagerProvider(MemoryProvider):
    @property
    def name(self) -> str:
        return "eager"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        pass

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []


def register(ctx: Any) -> None:
    from hermes_cli.config import load_config
    from hermes_constants import get_hermes_home

    load_config()
    (get_hermes_home() / "eager-state.json").write_text("{}", encoding="utf-8")
    ctx.register_memory_provider(EagerProvider())
