"""A plugin whose ``register(ctx)`` loads Hermes' config, as recall-memory-hermes 0.3.0's does:
in Hermes the home that call sets up (its folders and ``SOUL.md``) was set up at Hermes' start,
so loading writes nothing of the provider's own (PLUGIN-1)."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider


class ConfiguredProvider(MemoryProvider):
    def __init__(self, config: dict[str, Any]) -> None:
        self._memory = (config.get("memory") or {}) if isinstance(config, dict) else {}

    @property
    def name(self) -> str:
        return "configured"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        pass

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []


def register(ctx: Any) -> None:
    from hermes_cli.config import load_config

    ctx.register_memory_provider(ConfiguredProvider(load_config()))
