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
    "tool_schema": (),
    "tool_call": ("arguments",),
}
"""Each op of a session and the fields of its request, in argument order: the store calls of
CONTRACT-2 under the names CONTRACT-13 gives them, and ``patch`` (PATCH-1), the op spec v2 adds;
``tool_schema`` and ``tool_call`` (TOOL-1), the ops of the ``tool`` feature."""

OPS: Final[tuple[str, ...]] = tuple(OP_FIELDS)
