"""How Hermes' own store (hermes-agent 0.19) reads a memory file, where it differs from the spec:
the consequences doctor names for a Hermes user. Facts from Hermes' source (its memory tool and
threat patterns), held against the real store by tests/integration/test_doctor_hermes.py.
"""

from __future__ import annotations

from collections.abc import Sequence

HERMES_DELIMITER = "\n§\n"
"""Hermes splits a file on this exact text only, once Python's reading has made CR LF and CR
line feeds: no spaces around ``§`` (READ-3), and it keeps a byte order mark (READ-1)."""
HERMES_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff")
"""The invisible characters Hermes' threat scan blocks an entry for that the spec's scan keeps
as ordinary text (SCAN-4: emoji sequences, Persian and Hindi need joiners); the bidi controls it
also blocks, the spec's scan blocks too."""


def _as_read(text: str) -> str:
    """Returns a file's text as Hermes reads it (``Path.read_text``'s universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def hermes_entries(text: str) -> list[str]:
    """Returns the entries Hermes reads from a file's text."""
    parts = _as_read(text).split(HERMES_DELIMITER)
    return [part.strip() for part in parts if part.strip()]


def hermes_drift(text: str, limit: int) -> bool:
    """Returns whether Hermes' drift guard takes the file for one edited elsewhere: it then
    refuses every replace and remove of the target, saving a new backup each time."""
    entries = hermes_entries(text)
    longest = max((len(entry) for entry in entries), default=0)
    return _as_read(text).strip() != HERMES_DELIMITER.join(entries) or longest > limit


def hermes_hidden(entries: Sequence[str]) -> list[tuple[int, list[str]]]:
    """Returns, per entry Hermes' scan blocks for a character the spec keeps, its index and the
    characters (``U+200D``…)."""
    found = []
    for index, entry in enumerate(entries):
        chars = sorted({f"U+{ord(c):04X}" for c in entry if c in HERMES_INVISIBLE})
        if chars:
            found.append((index, chars))
    return found
