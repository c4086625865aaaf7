"""The worker side of a scheduled run: every interposed call waits for its turn (LOCK-2, LOCK-3).

Before each file-system call on the root a :class:`TurnHook` reports
:class:`~memspec.conformance.tamper.calls.Parked` and blocks until the harness's scheduler
(:mod:`memspec.conformance.schedule.schedule`) sends ``go``; after it, it reports
:class:`~memspec.conformance.tamper.calls.Returned`. One worker holds a turn at a time, so the
harness decides the whole interleaving.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from memspec.conformance.core.waits import TURN_TIMEOUT
from memspec.conformance.tamper.calls import CallRecord, Parked, Returned
from memspec.conformance.tamper.interpose import Hook, PlanHook

EXIT_NO_TURN = 4
"""Exit status of a worker that waited :data:`TURN_TIMEOUT` seconds for a turn in vain."""


def _inode(call: CallRecord) -> int | None:
    """Returns the inode a locking call acts on (read through its descriptor), if known."""
    fd = call.details.fd
    if fd is None:
        return None
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


class TurnHook(Hook):
    """Parks the worker before each interposed call until the harness grants it the turn: ``emit``
    sends records, ``turnstile`` receives ``go``, the worker sets ``op``; ``inner`` (optional), the
    hook of the job's plan, is told about each call after its turn has come."""

    def __init__(
        self,
        emit: Callable[[Parked | Returned], None],
        turnstile: Any,
        inner: PlanHook | None = None,
    ) -> None:
        self.emit = emit
        self.turnstile = turnstile
        self.inner = inner
        self.op: int | None = None

    def before(self, call: CallRecord) -> None:
        """Reports the call as parked and waits for ``go`` (exits if it never comes)."""
        locking = call.name in ("flock", "lockf", "close")
        self.emit(Parked(replace(call, op=self.op), _inode(call) if locking else None))
        try:
            ready = self.turnstile.poll(TURN_TIMEOUT)
            message = self.turnstile.recv() if ready else None
        except (EOFError, OSError):
            message = None
        if message != "go":
            os._exit(EXIT_NO_TURN)
        if self.inner is not None:
            self.inner.op = self.op
            self.inner.before(call)

    def after(self, call: CallRecord, error: BaseException | None) -> None:
        """Reports that the call returned (with its errno when it failed)."""
        if self.inner is not None:
            self.inner.after(call, error)
        number = getattr(error, "errno", None) if error is not None else None
        self.emit(Returned(error is not None, number))
