"""The Unicode sets the spec names, read from their one source, ``spec/data/unicode.json``.

The model, the reference, the judges and a port in another language read this file rather than their
runtime's idea of a property (runtimes disagree on what ``strip`` removes). Ranges are written as in
the Unicode Character Database, ``FIRST..LAST`` in hexadecimal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

Ranges = tuple[tuple[int, int], ...]


def _data() -> dict[str, Any]:
    """Returns the parsed ``spec/data/unicode.json`` of the installed package, found beside
    this module: every backend process served by ``memspec serve`` loads it, and
    ``importlib.resources`` would add a tenth to that process's start-up."""
    path = Path(__file__).with_name("data") / "unicode.json"
    return json.loads(path.read_text(encoding="utf-8"))


def code_point_ranges(specs: Iterable[str]) -> Ranges:
    """Returns ``(first, last)`` pairs for UCD-style ranges (``"00AD"``, ``"2066..2069"``)."""
    pairs = []
    for spec in specs:
        first, _, last = spec.partition("..")
        pairs.append((int(first, 16), int(last or first, 16)))
    return tuple(pairs)


def characters(ranges: Ranges) -> frozenset[str]:
    """Returns every character of ``ranges``."""
    return frozenset(chr(code) for low, high in ranges for code in range(low, high + 1))


def regex_class(ranges: Ranges) -> str:
    """Returns the body of a regex character class holding ``ranges`` (``\\U0000200b-...``)."""
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


DATA: Final = _data()
UNICODE_VERSION: Final[str] = DATA["unicode_version"]
"""The Unicode version the sets are taken from; NFKC is that of this version or a later one
(SCAN-3)."""

WHITE_SPACE_RANGES: Final = code_point_ranges(DATA["white_space"]["ranges"])
WHITE_SPACE: Final[str] = "".join(sorted(characters(WHITE_SPACE_RANGES)))
"""The 25 code points with Unicode's ``White_Space`` property, the set every strip of the spec
removes (ENTRY-1, READ-4)."""

INVISIBLE_THREAT_RANGES: Final = code_point_ranges(DATA["invisible_threats"]["ranges"])
INVISIBLE_CONTENT_RANGES: Final = code_point_ranges(DATA["invisible_content"]["ranges"])

_TAGS: Final = DATA["emoji_tag_sequence"]


def _repeat(part: dict[str, Any]) -> str:
    return f"[{regex_class(code_point_ranges(part['ranges']))}]{{{part['min']},{part['max']}}}"


EMOJI_TAG_SEQUENCE: Final[str] = (
    f"\\U{int(_TAGS['base'], 16):08x}{_repeat(_TAGS['region'])}{_repeat(_TAGS['suffix'])}"
    f"\\U{int(_TAGS['end'], 16):08x}"
)
"""The regex source of a subdivision flag, the only place a tag character is not a threat
(SCAN-4): U+1F3F4, two tag letters, one to four tag letters or digits, U+E007F."""
