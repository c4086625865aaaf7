"""The store calls of the backend contract and the fields each request carries (CONTRACT-13).

One table serves the JSON Lines protocol, the in-process transport and the JSON dump of the
spec's examples, so that a request's field names are stated once.
"""

from __future__ import annotations

from typing import Final

MUTATIONS: Final[tuple[str, ...]] = ("add", "replace", "remove", "patch", "batch")

OP_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "load": (),
    "add": ("target", "content"),
    "replace": ("target", "old_text", "new_content"),
    "remove": ("target", "old_text"),
    "patch": ("target", "old_text", "content"),
    "batch": ("target", "operations"),
    "entries": ("target",),
    "snapshot": ("target",),
    "fence": ("raw",),
    "agent_start": ("base", "providers"),
    "agent_turn": ("user", "reply"),
    "agent_rebuild": ("point",),
    "tool_schema": (),
    "tool_call": ("arguments",),
}
"""Each op of a session and the fields of its request, in argument order: the store calls of
CONTRACT-2 under the names CONTRACT-13 gives them, and what spec v2 adds: ``patch`` (PATCH-1),
the ``agent`` ops of the AGENT area, and ``tool_schema`` and ``tool_call`` (TOOL-1)."""

OPS: Final[tuple[str, ...]] = tuple(OP_FIELDS)
