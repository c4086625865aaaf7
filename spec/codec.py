"""The file format: parse, serialize and classify the bytes of a memory file.

A memory file is its entries joined by ``"\\n§\\n"`` (FORMAT-2). Readers are tolerant and writers
canonical (READ-1, READ-2, READ-3, READ-4, READ-5, FORMAT-4). Every strip removes the 25 characters
of :data:`WHITESPACE` (Unicode's ``White_Space``, listed in ``spec/data/unicode.json``), whatever a
language's own ``strip`` does (ENTRY-1, READ-4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from memspec.spec.problems import Problem
from memspec.spec.unicode_sets import WHITE_SPACE

DELIMITER: Final = "\n§\n"
DELIMITER_MARK: Final = "§"
WHITESPACE: Final = WHITE_SPACE
BOM: Final = "\ufeff"

FileKind = Literal["absent", "canonical", "cosmetic", "foreign", "unreadable"]


def normalize_newlines(text: str) -> str:
    """Returns ``text`` with CRLF and lone CR turned into LF (ENTRY-1, READ-2)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_content(text: str) -> str:
    """Returns content as it will be stored: LF line ends, then Unicode whitespace
    (:data:`WHITESPACE`) stripped from both ends (ENTRY-1).

    >>> normalize_content("\\u00a0spaced\\u3000\\r\\n")
    'spaced'
    """
    return normalize_newlines(text).strip(WHITESPACE)


def is_delimiter_line(line: str) -> bool:
    """Returns whether one line (without its newline) reads as an entry delimiter: ``§`` alone
    once Unicode whitespace (:data:`WHITESPACE`) is stripped from both ends (READ-3); ``§`` with
    other text on its line is ordinary text (FORMAT-3)."""
    return line.strip(WHITESPACE) == DELIMITER_MARK


def starts_with_bom(text: str) -> bool:
    """Returns whether normalised content begins with U+FEFF, which a reader would take for a
    byte order mark and drop (ENTRY-3)."""
    return text.startswith(BOM)


def has_delimiter_line(text: str) -> bool:
    """Returns whether any line of ``text`` (after newline normalisation) is a delimiter line
    (ENTRY-3)."""
    return any(is_delimiter_line(line) for line in normalize_newlines(text).split("\n"))


def is_encodable(text: str) -> bool:
    """Returns whether ``text`` can be written as UTF-8 (no lone surrogates; ENTRY-4)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def decode(data: bytes) -> str | None:
    """Returns the text of a file's bytes (strict UTF-8), or ``None`` when undecodable: such a file
    is unreadable, never empty (READ-6). A leading BOM is kept (:func:`parse_text` drops it,
    READ-1)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse_text(text: str) -> list[str]:
    """Returns the entries of a file's text, read tolerantly (FORMAT-3, READ-3): split at lines that
    are ``§`` alone, chunks stripped of :data:`WHITESPACE` (ENTRY-1) and empty ones dropped, a
    U+FEFF at a chunk's start dropped (READ-4), a leading BOM dropped (READ-1), CR LF and CR read as
    LF (READ-2), duplicates kept in file order (READ-5, DUP-4).

    >>> parse_text("\\ufeffa \\r\\n  §  \\r\\n\\r\\nb\\n")
    ['a', 'b']
    """
    text = normalize_newlines(text.removeprefix(BOM))
    entries: list[str] = []
    chunk: list[str] = []
    for line in [*text.split("\n"), DELIMITER_MARK]:
        if is_delimiter_line(line):
            entry = "\n".join(chunk).lstrip(WHITESPACE + BOM).rstrip(WHITESPACE)
            if entry:
                entries.append(entry)
            chunk = []
        else:
            chunk.append(line)
    return entries


def serialize(entries: Sequence[str]) -> str:
    """Returns the canonical text of ``entries``: joined by the delimiter, nothing else
    (FORMAT-2)."""
    return DELIMITER.join(entries)


def encode_entries(entries: Sequence[str]) -> bytes:
    """Returns the canonical bytes of a file holding ``entries``: UTF-8, no BOM, LF only, nothing
    around the delimiters (FORMAT-4); ``b""`` for none, the zero-byte file that removing the last
    entry leaves (REMOVE-2)."""
    return serialize(entries).encode("utf-8")


def only_not_canonical(expected: bytes | None, actual: bytes | None) -> bool:
    """Whether ``actual`` holds the entries of the canonical file ``expected`` in other bytes:
    the writer is not canonical (FORMAT-4), and nothing else is wrong with the file."""
    if expected is None or actual is None or actual == expected:
        return False
    want, got = decode(expected), decode(actual)
    if want is None or got is None or encode_entries(parse_text(want)) != expected:
        return False
    return parse_text(got) == parse_text(want)


def read_back_problem(reported: Sequence[str], read_back: Sequence[str]) -> Problem | None:
    """Returns what is wrong when a store reports ``reported`` where its file reads back as
    ``read_back``, or ``None`` when they are the same entries in the same order (FORMAT-5).

    A store that holds content as it was given, not normalised, reports entries its own file
    does not read back as; the one fault is then ENTRY-1's (content is stored normalised),
    never FORMAT-5's as well.

    >>> read_back_problem(["a\\r\\nb"], ["a\\nb"]).clause
    'ENTRY-1'
    """
    reported, read_back = list(reported), list(read_back)
    if reported == read_back:
        return None
    if held_as_given(reported, read_back):
        return Problem(
            "ENTRY-1",
            f"the store holds {reported!r}, not normalised; its file reads back as {read_back!r}",
        )
    return Problem(
        "FORMAT-5", f"the store reports {reported!r}, but its file reads back as {read_back!r}"
    )


def held_as_given(reported: Sequence[str], read_back: Sequence[str]) -> bool:
    """Whether ``reported`` differs from ``read_back`` only in content held as it was given,
    not normalised (ENTRY-1): normalising each reported entry gives the entries read back."""
    return list(reported) != list(read_back) and [
        normalize_content(entry) for entry in reported
    ] == list(read_back)


def usage(entries: Sequence[str]) -> int:
    """Returns the size the limit applies to: code points of the serialized form, not bytes or
    UTF-16 units (LIMIT-1)."""
    return len(serialize(entries))


@dataclass(frozen=True)
class FileState:
    """A FileState is what a store sees in one file's bytes (READ-6, DRIFT-1, DRIFT-2): ``kind`` is
    ``absent``, ``unreadable`` (not UTF-8), ``foreign`` (an entry alone exceeds the limit),
    ``canonical`` or ``cosmetic``; ``entries`` is ``None`` only when unreadable."""

    kind: FileKind
    entries: tuple[str, ...] | None

    @property
    def readable(self) -> bool:
        """Whether the entries could be read."""
        return self.entries is not None


def classify_bytes(data: bytes | None, limit: int) -> FileState:
    """Returns the :class:`FileState` of a file's bytes for a store of ``limit`` code points
    (READ-6, DRIFT-2, DRIFT-1, LIMIT-4)."""
    if data is None:
        return FileState("absent", ())
    text = decode(data)
    if text is None:
        return FileState("unreadable", None)
    entries = tuple(parse_text(text))
    if any(len(entry) > limit for entry in entries):
        return FileState("foreign", entries)
    kind: FileKind = "canonical" if encode_entries(entries) == data else "cosmetic"
    return FileState(kind, entries)
