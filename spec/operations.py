"""Operations of the model: the store calls of the contract, a load, and an outside writer.

Operations are frozen values, so a history of them can be hashed and memoised by the
linearizability checker. Arguments are kept exactly as a caller passed them (a target may be
any value, content may be a non-string): deciding what is malformed is the model's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def freeze(value: Any) -> Any:
    """Returns a hashable copy of a JSON-like value (dicts become sorted item tuples)."""
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda pair: str(pair[0]))
        return FrozenMapping(tuple((key, freeze(item)) for key, item in items))
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Returns the JSON-like value that :func:`freeze` made hashable."""
    if isinstance(value, FrozenMapping):
        return {key: thaw(item) for key, item in value.items}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


@dataclass(frozen=True)
class FrozenMapping:
    """A FrozenMapping is a batch item or other mapping kept hashable, its items sorted by key."""

    items: tuple[tuple[Any, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        """Returns the value under ``key``, or ``default``."""
        return next((value for k, value in self.items if k == key), default)

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self.items)


@dataclass(frozen=True)
class Load:
    """A session reads both files and captures its frozen snapshot (SNAP-1)."""

    session: str = "a"


@dataclass(frozen=True)
class Add:
    """``add(target, content)``: append one entry."""

    target: Any
    content: Any
    session: str = "a"


@dataclass(frozen=True)
class Replace:
    """``replace(target, old_text, new_content)``: swap the entry old_text identifies."""

    target: Any
    old_text: Any
    new_content: Any
    session: str = "a"


@dataclass(frozen=True)
class Remove:
    """``remove(target, old_text)``: delete the entry old_text identifies."""

    target: Any
    old_text: Any
    session: str = "a"


@dataclass(frozen=True)
class Patch:
    """``patch(target, old_text, content)``: replace exactly the span old_text inside the one
    entry that holds it, keeping the rest of the entry (feature ``patch``, PATCH-1)."""

    target: Any
    old_text: Any
    content: Any
    session: str = "a"


@dataclass(frozen=True)
class Batch:
    """``batch(target, operations)``: all-or-nothing list of add/replace/remove items."""

    target: Any
    operations: Any
    session: str = "a"

    def __post_init__(self) -> None:
        object.__setattr__(self, "operations", freeze(self.operations))


@dataclass(frozen=True)
class ExternalWrite:
    """Another writer (an editor, ``cat >>``) puts ``data`` in the file (``None`` deletes it)."""

    target: str
    data: bytes | None


Mutation = Add | Replace | Remove | Patch | Batch
Operation = Load | Mutation | ExternalWrite
