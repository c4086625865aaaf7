"""The store calls of the backend contract and the fields each request carries (CONTRACT-13).

One table serves the JSON Lines protocol, the in-process transport and the JSON dump of the
spec's examples, so that a request's field names are stated once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from memspec.spec.operations import Add, Batch, Load, Mutation, Patch, Remove, Replace

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


def operation_of(op: str, fields: Mapping[str, Any], session: str = "a") -> Load | Mutation:
    """Returns the model's operation for a ``load`` or a mutation request of ``session``, its
    arguments under their protocol field names (CONTRACT-13): ``operation_of("add", {"target":
    "memory", "content": "x"})`` is ``Add("memory", "x", "a")``."""
    if op == "load":
        return Load(session)
    target = fields["target"]
    if op == "add":
        return Add(target, fields["content"], session)
    if op == "replace":
        return Replace(target, fields["old_text"], fields["new_content"], session)
    if op == "remove":
        return Remove(target, fields["old_text"], session)
    if op == "patch":
        return Patch(target, fields["old_text"], fields["content"], session)
    if op == "batch":
        return Batch(target, fields["operations"], session)
    raise ValueError(f"{op!r} is not a load or a mutation")


def mutation_of(op: str, fields: Mapping[str, Any], session: str = "a") -> Mutation:
    """Returns the model's operation for a mutation request (:func:`operation_of`)."""
    operation = operation_of(op, fields, session)
    if isinstance(operation, Load):
        raise ValueError("a load is not a mutation")
    return operation
