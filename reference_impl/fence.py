"""The reference fence: sanitise recalled text to a fixed point, then frame it.

Text recalled from an external memory provider is appended to a copy of the user's message, so
it must not be able to close the ``<memory-context>`` fence early or forge its system note
(FENCE-1 to FENCE-5). The sanitiser removes every span the spec's finders report —
:func:`~memspec.spec.fence.find_fence_tags` and :func:`~memspec.spec.fence.find_system_notes` —
and repeats until nothing is found, because one pass can reassemble a tag (FENCE-3, hermes
#108964)::

    >>> sanitize_recalled("<</memory-context>/memory-context>")
    ''
    >>> sanitize_recalled("  a <memory-con<memory-context>text> b ")
    'a  b'

Each pass removes at least one character, so the loop ends.
"""

from __future__ import annotations

from memspec.spec.codec import WHITESPACE
from memspec.spec.fence import find_fence_tags, find_system_notes, frame


def sanitize_recalled(text: str) -> str:
    """Returns ``text`` without any fence tag or forged system note, stripped of ASCII whitespace.

    Removal repeats until a pass finds nothing (a fixed point), so the result holds none either.
    """
    while spans := sorted(find_fence_tags(text) + find_system_notes(text)):
        kept, position = [], 0
        for start, end in spans:
            kept.append(text[position : max(position, start)])
            position = max(position, end)
        text = "".join(kept) + text[position:]
    return text.strip(WHITESPACE)


def build_fence(raw: str) -> str:
    """Returns the ``<memory-context>`` block for recalled ``raw`` text; ``""`` if nothing is left.

    Raises TypeError when ``raw`` is not a str (the store turns that into a defect report).
    """
    if not isinstance(raw, str):
        raise TypeError(f"recalled text must be a str, got {type(raw).__name__}: {raw!r:.80}")
    clean = sanitize_recalled(raw)
    return frame(clean) if clean else ""
