"""Differences a person can read: invisible and ambiguous characters escaped, and the first
position where what a backend gave differs from what the spec expects.

A byte order mark, a no-break space, a zero-width joiner or a CR prints as nothing or as a
plain space, so that a received value and an expected one look the same on the screen. Every
such character is shown as its JSON escape (``\\ufeff``, ``\\u00a0``, ``\\r``); the letters of
every script, emoji and symbols are shown as they are.
"""

from __future__ import annotations

import unicodedata
from typing import Any

ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Control, format (zero-width characters, U+FEFF, bidirectional marks), surrogate, private-use
and unassigned code points, and every separator but the space itself."""
SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
CONTEXT = 12
"""Code points of context shown on each side of a first difference."""


def _escaped(char: str) -> str:
    if char in SHORT_ESCAPES:
        return SHORT_ESCAPES[char]
    if char == " " or unicodedata.category(char) not in ESCAPED_CATEGORIES:
        return char
    point = ord(char)
    if point > 0xFFFF:
        return f"\\U{point:08x}"
    return f"\\u{point:04x}"


def visible(text: str) -> str:
    """Returns ``text`` with every invisible or ambiguous character written as its escape
    (line feeds too, so that the result is one line)."""
    return "".join(_escaped(char) for char in text)


def quoted(text: str) -> str:
    """Returns ``text`` in single quotes, :func:`visible`."""
    return "'" + visible(text).replace("'", "\\'") + "'"


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def _text_difference(want: str, got: str) -> str:
    index = next(
        (i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g),
        min(len(want), len(got)),
    )
    start = max(0, index - CONTEXT)
    lead = "…" if start else ""
    want_part = lead + want[start : index + CONTEXT]
    got_part = lead + got[start : index + CONTEXT]
    want_shown = quoted(want_part) + ("…" if index + CONTEXT < len(want) else "")
    got_shown = quoted(got_part) + ("…" if index + CONTEXT < len(got) else "")
    return f"code point {index}: expected {want_shown}, received {got_shown}"


def _bytes_difference(want: bytes, got: bytes) -> str:
    index = next(
        (i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g),
        min(len(want), len(got)),
    )
    start = max(0, index - CONTEXT)
    return (
        f"byte {index}: expected {want[start : index + CONTEXT].hex(' ')}, "
        f"received {got[start : index + CONTEXT].hex(' ')}"
    )


def first_difference(expected: Any, received: Any) -> str:
    """Returns where ``received`` first differs from ``expected``, with a little context on
    each side, every invisible character escaped: a position in a text or in bytes, an entry
    of a list (and the position inside it), or the two values when they are of other kinds.
    Returns "" when they are equal."""
    if expected == received:
        return ""
    want, got = _decoded(expected), _decoded(received)
    if isinstance(want, str) and isinstance(got, str):
        return "first difference at " + _text_difference(want, got)
    if isinstance(want, bytes) and isinstance(got, bytes):
        return "first difference at " + _bytes_difference(want, got)
    if isinstance(want, list) and isinstance(got, list):
        for index, (w, g) in enumerate(zip(want, got, strict=False)):
            if w != g:
                if isinstance(w, str) and isinstance(g, str):
                    return f"first difference in entry {index}, at " + _text_difference(w, g)
                return f"first difference in entry {index}: expected {w!r}, received {g!r}"
        if len(want) != len(got):
            longer, side = (got, "received") if len(got) > len(want) else (want, "expected")
            extra = longer[min(len(want), len(got))]
            shown = quoted(extra) if isinstance(extra, str) else repr(extra)
            counts = f"{len(want)} entries expected, {len(got)} received"
            return f"{counts}; the first only {side}: {shown}"
    return ""
