"""A sound provider plugin loaded through ``register(ctx)``: turns kept in a file under
``hermes_home``, recalled by the words they share with the query. No tools, no mirroring."""

from __future__ import annotations

from typing import Any

from agent.memory_provider import MemoryProvider

from .notes import Notes


class NotesProvider(MemoryProvider):
    """Keeps every turn of the primary agent as a note."""

    def __init__(self) -> None:
        self._notes: Notes | None = None
        self._writes = False

    @property
    def name(self) -> str:
        return "notes-plugin"

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._notes = Notes(kwargs["hermes_home"])
        self._writes = kwargs.get("agent_context", "primary") == "primary"

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        found = self._notes.search(query) if self._notes else []
        return "\n".join(found)[:4000]

    def sync_turn(
        self, user_content: str, assistant_content: str, *, session_id: str = "", messages=None
    ) -> None:
        if self._notes is not None and self._writes:
            self._notes.add(f"{user_content} {assistant_content}")


def register(ctx: Any) -> None:
    """Called by Hermes' plugin loader with its collector."""
    ctx.register_memory_provider(NotesProvider())
