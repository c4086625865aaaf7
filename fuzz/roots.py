"""One fresh root per Hypothesis example, with the sessions opened on it, seen from outside.

Properties talk to a backend only through the contract (CONTRACT-*): :meth:`FuzzRoot.request` sends
requests, and the files are read and written straight from the root. A session is opened, and loads,
the first time it is named; all are closed and the root removed when the example ends.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from memspec.conformance.core.registry import CheckContext
from memspec.conformance.transport.backend import BackendDefect, Session
from memspec.conformance.transport.wire import Answer
from memspec.spec import model
from memspec.spec.root_files import file_kind
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES


class FuzzRoot:
    """A FuzzRoot is a fresh root under the check's scratch directory and its sessions."""

    def __init__(self, ctx: CheckContext, limits: Mapping[str, int] | None = None) -> None:
        self.ctx = ctx
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        self.root = Path(tempfile.mkdtemp(prefix="root-", dir=ctx.scratch))
        self.sessions: dict[str, Session] = {}

    def __enter__(self) -> FuzzRoot:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes every session (a broken backend's errors are ignored) and removes the root."""
        for session in self.sessions.values():
            with contextlib.suppress(Exception):
                session.close()
        self.sessions.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def session(self, name: str = "a") -> Session:
        """Returns session ``name``, opening it and loading it the first time (CONTRACT-7)."""
        if name not in self.sessions:
            session = self.ctx.session(self.limits, root=self.root)
            self.sessions[name] = session
            session.request("load")
        return self.sessions[name]

    @property
    def features(self) -> frozenset[str]:
        """The features the backend claims (read from session ``a``)."""
        return frozenset(self.session("a").features)

    def request(self, name: str, op: str, **fields: Any) -> Answer:
        """Sends one protocol request in session ``name`` and returns the answer."""
        return self.session(name).request(op, **fields)

    def entries(self, name: str, target: str) -> list[str]:
        """Returns ``entries(target)`` as session ``name`` reports it."""
        answer = self.request(name, "entries", target=target)
        if not answer.get("ok"):
            raise BackendDefect(f"entries({target!r}) was refused", {"op": "entries"}, answer)
        return list(answer["entries"])

    def snapshot(self, name: str, target: str) -> str | None:
        """Returns ``snapshot(target)`` as session ``name`` holds it."""
        answer = self.request(name, "snapshot", target=target)
        if not answer.get("ok"):
            raise BackendDefect(f"snapshot({target!r}) was refused", {"op": "snapshot"}, answer)
        return answer.get("snapshot")

    def path(self, target: str) -> Path:
        """Returns the data file of ``target``."""
        return self.root / FILENAMES[target]

    def disk(self, target: str) -> bytes | None:
        """Returns the bytes of ``target``'s file, ``None`` when there is none."""
        try:
            return self.path(target).read_bytes()
        except FileNotFoundError:
            return None

    def model_state(self) -> model.State:
        """Returns the model state of what is on disk now (no session has loaded in it)."""
        return model.initial_state(
            self.limits["memory"], self.limits["user"], self.disk("memory"), self.disk("user")
        )

    def put(self, target: str, data: bytes | None) -> None:
        """Writes ``data`` as ``target``'s file in place, as an editor would (``None``: delete)."""
        if data is None:
            self.path(target).unlink(missing_ok=True)
        else:
            self.path(target).write_bytes(data)

    def backups(self, target: str) -> dict[str, bytes]:
        """Returns ``target``'s backups, ``NAME.bak.<suffix>``, by file name (CONTRACT-11)."""
        return {
            path.name: path.read_bytes()
            for path in sorted(self.root.iterdir())
            if file_kind(path.name, FILENAMES[target]) == "backup" and path.is_file()
        }

    def other_files(self) -> list[str]:
        """Returns the names in the root that are neither data files nor backups (FILES-5)."""
        return sorted(
            path.name
            for path in self.root.iterdir()
            if file_kind(path.name) not in ("data", "backup")
        )
