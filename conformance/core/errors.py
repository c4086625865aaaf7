"""The root of memspec's exceptions, and the user's error.

A :class:`UsageError` is the user's mistake (exit 2). Every way a check can stop short of passing is
a ``Finding`` (``core/findings.py``) under the same root; a ``HarnessError`` among them is memspec's
own bug, counted apart from the backend's failures (exit 3).
"""

from __future__ import annotations

BUG_PREFIX = "BUG IN MEMSPEC: "


class MemspecError(Exception):
    """The root of every exception memspec raises on purpose."""


class UsageError(MemspecError, ValueError):
    """The harness was asked for something impossible (a bad backend name, a bad flag value).

    The message says what was given and what is expected; the CLI exits with status 2.
    """


def bug_message(message: str) -> str:
    """Returns ``message`` opening with :data:`BUG_PREFIX` once."""
    return message if message.startswith(BUG_PREFIX) else BUG_PREFIX + message
