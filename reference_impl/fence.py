"""The reference fence: sanitise recalled text to a fixed point, then frame it.

The sanitiser removes every span the spec's finders report (FENCE-1, FENCE-2, FENCE-4, FENCE-5) and
repeats until nothing is found, because one pass can reassemble a tag (FENCE-3, hermes #108964).
Each pass removes at least one character, so the loop ends; after the first pass it searches near
the joins first, so nested input costs a short search per layer.

    >>> sanitize_recalled("<</memory-context>/memory-context>")
    ''
"""

from __future__ import annotations

from memspec.spec.codec import WHITESPACE
from memspec.spec.fence import find_fence_tags, find_system_notes, frame

NEAR_A_JOIN = 320  # characters each side of a join searched before the whole text


def _spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    return find_fence_tags(text, start, end) + find_system_notes(text, start, end)


def _remove(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """Returns ``text`` without ``spans`` (which may overlap) and where the pieces were joined."""
    kept: list[str] = []
    joins: list[int] = []
    position = length = 0
    for start, end in sorted(spans):
        if end > position:
            piece = text[position : max(position, start)]
            kept.append(piece)
            length += len(piece)
            joins.append(length)
            position = end
    kept.append(text[position:])
    return "".join(kept), joins


def _spans_near(text: str, joins: list[int]) -> list[tuple[int, int]]:
    """Returns the tags and notes found within :data:`NEAR_A_JOIN` characters of a join."""
    found: list[tuple[int, int]] = []
    windows: list[list[int]] = []
    for join in joins:
        low, high = max(0, join - NEAR_A_JOIN), join + NEAR_A_JOIN
        if windows and low <= windows[-1][1]:
            windows[-1][1] = high
        else:
            windows.append([low, high])
    for low, high in windows:
        found += _spans(text, low, high)
    return found


def sanitize_recalled(text: str) -> str:
    """Returns ``text`` without any fence tag or forged system note in any disguise (FENCE-2,
    FENCE-4), removed to a fixed point (FENCE-3), stripped of ASCII whitespace."""
    spans = _spans(text)
    while spans:
        text, joins = _remove(text, spans)
        spans = _spans_near(text, joins) or _spans(text)
    return text.strip(WHITESPACE)


def build_fence(raw: str) -> str:
    """Returns the ``<memory-context>`` block for recalled ``raw`` text; ``""`` if nothing is left
    (FENCE-1, FENCE-5, CONTRACT-10). Raises TypeError when ``raw`` is not a str."""
    if not isinstance(raw, str):
        raise TypeError(f"recalled text must be a str, got {type(raw).__name__}: {raw!r:.80}")
    clean = sanitize_recalled(raw)
    return frame(clean) if clean else ""
