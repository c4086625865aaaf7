"""The world an example runs in (:class:`Driver`): sessions, the disk and the backups, and what
the spec's rules give beside them. The spec model is one driver, a backend on a root another
(``examples/drivers.py``)."""

from __future__ import annotations

from typing import Protocol

from memspec.conformance.transport.wire import Answer, Fields
from memspec.spec.rules import Outcome


class Driver(Protocol):
    """A Driver is the world an example runs in: sessions, the disk, the backups."""

    def put(self, target: str, data: bytes | None) -> None:
        """Another writer puts ``data`` in the file (``None`` deletes it)."""
        ...

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Sends one contract request in ``session`` and returns the answer."""
        ...

    def disk(self, target: str) -> bytes | None:
        """Returns the file's bytes (``None`` when absent)."""
        ...

    def backups(self, target: str) -> list[bytes]:
        """Returns the contents of the target's backup files."""
        ...

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the entries the spec's rules give ``session`` now (``None``: none known)."""
        ...

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the file's bytes as the spec's rules leave them (``None``: absent, or no
        model is known)."""
        ...

    def spec_outcome(self) -> Outcome | None:
        """Returns the spec's outcome of the last mutation, with the clause that decided a
        refusal (``None``: no model is known)."""
        ...
