"""The root of every exception memspec raises on purpose, and the two kinds everyone shares.

One tree, so a caller catches one type (``memspec.MemspecError``): a :class:`UsageError` is the
user's mistake (the commands exit 2); a :class:`SpecError` is a bug in SPEC.md (a malformed clause,
example or version line); every way a check can stop short of passing is a ``Finding`` of the
verdict package (``memspec.conformance.verdict.findings``), and ``doctor``'s and the Hermes
support's own errors derive from this root too. It lives in ``spec`` because ``spec`` imports
nothing else of memspec and every other package imports ``spec``.
"""

from __future__ import annotations


class MemspecError(Exception):
    """The root of every exception memspec raises on purpose."""


class UsageError(MemspecError, ValueError):
    """memspec was asked for something impossible (a bad backend name, a bad flag value, a file
    that is not what it should be). The message says what was given and what is expected; the
    commands exit with status 2."""


class SpecError(MemspecError, ValueError):
    """SPEC.md is malformed — a clause stated twice, an example that does not parse, no version
    line: a bug in the spec, not in a backend. Fix SPEC.md; the message names its line."""
