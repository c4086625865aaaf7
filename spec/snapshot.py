"""The frozen system-prompt block of a store and how a backend's block is compared.

A block is a bar of 46 ``═``, a header line with the usage, another bar, then the entries joined by
the delimiter. The percentage is integer arithmetic, capped at 100 (29 of 100 reads ``29%``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memspec.spec.codec import DELIMITER, serialize
from memspec.spec.targets import FILENAMES, HEADERS

BAR = "═" * 46
BLOCKED_PREFIX = "[BLOCKED:"
UNREADABLE_PREFIX = "[UNREADABLE:"

Scanner = Callable[[str], tuple[str, ...]]


def usage_label(used: int, limit: int) -> str:
    """Returns the usage shown in a header and in Outcome ``usage`` fields (SNAP-11): the
    integer percent ⌊100 × used / limit⌋ capped at 100 (SNAP-6), then ``USED/LIMIT chars`` with
    comma-grouped numbers (SNAP-5, SNAP-7)."""
    percent = min(100, used * 100 // limit) if limit > 0 else 100
    return f"{percent}% — {used:,}/{limit:,} chars"


def blocked_placeholder(target: str, names: Sequence[str]) -> str:
    """Returns the text shown instead of an entry that matches threat patterns: it starts
    ``[BLOCKED:``, names the file and does not contain the entry (SCAN-6, CONTRACT-9); the rest
    is this implementation's wording, which SNAP-12 leaves free."""
    return (
        f"{BLOCKED_PREFIX} {FILENAMES[target]} entry matched threat pattern(s): "
        f"{', '.join(names)}; it is kept on disk — remove it with the memory tool]"
    )


def _block(target: str, status: str, body: str) -> str:
    """Returns a block: bar, header with the title and status, bar, body (SNAP-4, SNAP-5)."""
    return f"{BAR}\n{HEADERS[target]} [{status}]\n{BAR}\n{body}"


def render_snapshot(target: str, entries: Sequence[str], limit: int, scan: Scanner) -> str | None:
    """Returns the block for ``entries``, or ``None`` when there are none (SNAP-3, SNAP-4). Entries
    ``scan`` flags are shown as ``[BLOCKED: ...]`` (SCAN-6) while the usage counts their real text
    (SNAP-8); the entries keep the raw text (SCAN-7)."""
    if not entries:
        return None
    shown = []
    for entry in entries:
        names = scan(entry)
        shown.append(blocked_placeholder(target, names) if names else entry)
    return _block(target, usage_label(len(serialize(entries)), limit), serialize(shown))


def load_block(target: str, entries: Sequence[str] | None, limit: int, scan: Scanner) -> str | None:
    """Returns the block a load renders from the entries it read off an existing file, ``None``
    for one that cannot be read or decoded (SNAP-9): no entries, no block (SNAP-3)."""
    if entries is None:
        return render_unreadable(target)
    return render_snapshot(target, entries, limit, scan)


def render_unreadable(target: str) -> str:
    """Returns the block of a file that exists but cannot be read or decoded: never null, the
    header ends in ``[unreadable]`` and the only line starts ``[UNREADABLE:`` (SNAP-9,
    CONTRACT-9)."""
    name = FILENAMES[target]
    body = (
        f"{UNREADABLE_PREFIX} {name} could not be read or decoded; "
        "writes are refused until it is repaired]"
    )
    return _block(target, "unreadable", body)


_HEADER = re.compile(
    r"(?P<title>.*) \[(?P<percent>\d+)% — (?P<used>[\d,]+)/(?P<limit>[\d,]+) chars\]"
)


def header_clauses(expected: str, actual: str) -> tuple[str, ...]:
    """Returns the clauses that own the difference between two header lines: SNAP-9 for an
    unreadable file's header, SNAP-8 for the used number (the percent follows it), SNAP-6 for
    the percent alone, SNAP-7 for the grouping of the digits, SNAP-5 for the rest — the title,
    the brackets, the dash, the word ``chars``, the limit."""
    if expected.endswith(" [unreadable]"):
        same_title = actual.rsplit(" [", 1)[0] == expected.rsplit(" [", 1)[0]
        return ("SNAP-9",) if same_title else ("SNAP-5",)
    want, got = _HEADER.fullmatch(expected), _HEADER.fullmatch(actual)
    if want is None or got is None:
        return ("SNAP-5",)
    clauses = []
    other_limit = _holds_another_limit(want, got)
    if other_limit:
        clauses.append("LIMIT-6")
    if want["title"] != got["title"] or (
        _number(want["limit"]) != _number(got["limit"]) and not other_limit
    ):
        clauses.append("SNAP-5")
    if _number(want["used"]) != _number(got["used"]):
        clauses.append("SNAP-8")
    elif want["percent"] != got["percent"] and not other_limit:
        clauses.append("SNAP-6")
    if (want["used"], want["limit"]) != (got["used"], got["limit"]) and (
        _number(want["used"]),
        _number(want["limit"]),
    ) == (_number(got["used"]), _number(got["limit"])):
        clauses.append("SNAP-7")
    return tuple(clauses) or ("SNAP-5",)


def _holds_another_limit(want: re.Match[str], got: re.Match[str]) -> bool:
    """Whether ``got`` (a header or label) counts what ``want`` counts against another limit,
    with the percent SNAP-6 gives for the limit it states: the store holds that limit for the
    target, whose own limit is LIMIT-6's; its usage is shown as it should be."""
    used, limit = _number(got["used"]), _number(got["limit"])
    return (
        limit != _number(want["limit"])
        and used == _number(want["used"])
        and int(got["percent"]) == (min(100, used * 100 // limit) if limit > 0 else 100)
    )


def label_clauses(expected: str, actual: object) -> tuple[str, ...]:
    """Returns the clauses that own the difference between two ``usage`` labels (SNAP-11):
    LIMIT-6 when ``actual`` states another limit than the target's, shown as SNAP-11 says;
    SNAP-11 for any other difference; ``()`` when they are the same."""
    if actual == expected:
        return ()
    want = _HEADER.fullmatch(f"x [{expected}]")
    got = _HEADER.fullmatch(f"x [{actual}]") if isinstance(actual, str) else None
    if want and got and _holds_another_limit(want, got):
        return ("LIMIT-6",)
    return ("SNAP-11",)


def label_limit(label: object) -> int | None:
    """Returns the limit a ``usage`` label (:func:`usage_label`) states, or None for anything
    that is not such a label."""
    found = _HEADER.fullmatch(f"x [{label}]") if isinstance(label, str) else None
    return _number(found["limit"]) if found else None


def _number(digits: str) -> int:
    return int(digits.replace(",", ""))


def header_difference(
    expected: str | None, actual: object, target: str, raw_entries: Sequence[str] = ()
) -> tuple[str, ...]:
    """Returns the clauses that own the difference when ``actual`` differs from the block
    ``expected`` in its header alone — its body, found after a header worded the backend's own
    way (:func:`split_block`), is the expected one: SNAP-4 when the header is not a line between
    two bars of 46 ``═``, and :func:`header_clauses` for its line; else ``()`` (the difference
    is the block's, and every clause the comparison serves owns it)."""
    if not isinstance(expected, str) or not isinstance(actual, str):
        return ()
    want_head, _ = split_block(expected)
    got_head, _ = split_block(actual, expected)
    if got_head == want_head:
        return ()
    body = actual.split("\n")[len(got_head) :]
    if snapshot_difference(expected, "\n".join([*want_head, *body]), target, raw_entries):
        return ()
    barred = len(got_head) == 3 and got_head[0] == got_head[2] == BAR
    titles = [line for line in got_head if line != BAR]
    found: tuple[str, ...] = () if barred else ("SNAP-4",)
    if len(titles) == 1 and titles[0] != want_head[1]:
        found += header_clauses(want_head[1], titles[0])
    elif len(titles) != 1:
        found += ("SNAP-5",)
    return tuple(dict.fromkeys(found))


def unscanned_difference(
    expected: str | None, actual: object, target: str, raw_entries: Sequence[str] = ()
) -> tuple[str, ...]:
    """Returns ``("SCAN-6",)`` when ``actual`` differs from the block ``expected`` only where an
    expected ``[BLOCKED:`` placeholder stands and the block shows, instead, an entry as it is on
    disk among ``raw_entries`` (those with threats): no scan at load replaced it. Else ``()``."""
    if not isinstance(expected, str) or not isinstance(actual, str):
        return ()
    want_head, want = _segments(expected)
    _, got = _segments(actual, expected)
    if len(want) != len(got):
        return ()
    shown = [
        w if w.startswith(BLOCKED_PREFIX) and w != g and g in raw_entries else g
        for w, g in zip(want, got, strict=True)
    ]
    # an entry that itself starts like a placeholder is a forged one (SCAN-8): shown as it is,
    # it tells a store that scans nothing at load only beside a plain entry shown as it is
    plain = [g for g, s in zip(got, shown, strict=True) if s != g]
    if not any(not g.startswith(BLOCKED_PREFIX) for g in plain):
        return ()
    patched = "\n".join([*want_head, DELIMITER.join(shown)])
    unscanned = snapshot_difference(expected, patched, target, raw_entries) is None
    return ("SCAN-6",) if unscanned else ()


def part_difference(
    expected: str | None, actual: object, target: str, raw_entries: Sequence[str] = ()
) -> tuple[str, ...]:
    """Returns the clauses that own a block's difference when one part of it alone differs: the
    header's (:func:`header_difference`) or an unscanned entry's (:func:`unscanned_difference`);
    else ``()``."""
    return header_difference(expected, actual, target, raw_entries) or unscanned_difference(
        expected, actual, target, raw_entries
    )


def duplicates_difference(
    entries: Sequence[str] | None, actual: object, target: str, limit: int, scan: Scanner
) -> tuple[str, ...]:
    """Returns ``("READ-5",)`` when ``actual`` shows the entries a load read, ``entries``, with
    their duplicates dropped, whatever its header says: the read behind the block lost them,
    not the rendering. Else ``()``."""
    if entries is None or not isinstance(actual, str) or len(set(entries)) == len(entries):
        return ()
    unique = render_snapshot(target, list(dict.fromkeys(entries)), limit, scan)
    if unique is None:
        return ()
    with_its_header = "\n".join(actual.split("\n")[:3] + unique.split("\n")[3:])
    hidden = [entry for entry in entries if scan(entry)]
    dropped = snapshot_difference(with_its_header, actual, target, hidden) is None
    return ("READ-5",) if dropped else ()


def state_difference(expected: str | None, actual: object, live: str | None) -> tuple[str, ...]:
    """Returns the clauses that own a block's difference when the block shows another state than
    the one frozen at the last load: SNAP-9 for null where an unreadable file's block belongs,
    with CONTRACT-9, which says the same of the contract's ``snapshot`` ("instead of None");
    SNAP-1 when it is ``live``, the block of the file as it is now, which ``expected`` is not;
    SNAP-3 when a block with no entries stands where no block belongs; else ``()``."""
    if actual is None and isinstance(expected, str) and UNREADABLE_PREFIX in expected:
        return ("SNAP-9", "CONTRACT-9")  # an unreadable file's block, never null
    if actual == live and expected != live:
        return ("SNAP-1",)
    if expected is None and isinstance(actual, str) and not serialize(_segments(actual)[1]):
        return ("SNAP-3",)
    return ()


def block_clause(
    expected: str | None, actual: object, target: str, raw_entries: Sequence[str], clause: str
) -> str:
    """Returns the clause a block that differs from ``expected`` breaks: the part's own when one
    part alone differs (:func:`part_difference`), else ``clause``."""
    return (part_difference(expected, actual, target, raw_entries) or (clause,))[0]


def shown_entries(block: str, expected: str | None = None) -> list[str]:
    """Returns the entries a block shows, as shown (placeholders included), its body found after
    its header as :func:`split_block` finds it."""
    return _segments(block, expected)[1]


HEADER_LINES = 3
"""A block's header is three lines (SNAP-4): a bar of 46 ``═``, the header line, a bar."""


def split_block(block: str, expected: str | None = None) -> tuple[list[str], str]:
    """Returns the header lines of a block and its body. The spec's header is a line between two
    bars (SNAP-4); a block whose header is worded the backend's own way — one line in another
    language, no bars — is split where its body, the body of the block ``expected``, begins, so
    that its entries are judged as entries and its header by the header's clauses. Without a
    match, a header that does not open with a bar is taken to be one line."""
    lines = block.split("\n")
    if len(lines) >= HEADER_LINES and lines[0] == lines[2] == BAR:
        size = HEADER_LINES
    else:
        size = _body_start(lines, expected)
    return lines[:size], "\n".join(lines[size:])


def _body_start(lines: list[str], expected: str | None) -> int:
    """Returns where the body of a block without the spec's bars begins: after the lines that
    make its body the expected one, else before the first line that opens the expected first
    entry (a placeholder by its prefix), else after one header line."""
    if expected is not None:
        want = expected.split("\n")[HEADER_LINES:]
        first = want[0] if want else ""
        for size in range(min(HEADER_LINES, len(lines)) + 1):
            if lines[size:] == want:
                return size
        for size in range(min(HEADER_LINES, len(lines))):
            line = lines[size]
            placeholder = next(
                (p for p in (BLOCKED_PREFIX, UNREADABLE_PREFIX) if first.startswith(p)), None
            )
            if line == first or (placeholder is not None and line.startswith(placeholder)):
                return size
    return min(1, len(lines))


def _segments(block: str, expected: str | None = None) -> tuple[list[str], list[str]]:
    head, body = split_block(block, expected)
    return head, body.split(DELIMITER)


def snapshot_difference(
    expected: str | None, actual: object, target: str, raw_entries: Sequence[str] = ()
) -> str | None:
    """Returns why ``actual`` is not the block ``expected``, or ``None`` when it is (SNAP-4,
    CONTRACT-9): byte for byte, except that an expected ``[BLOCKED:`` or ``[UNREADABLE:``
    placeholder matches any that starts the same way, names the file and holds none of
    ``raw_entries`` (SNAP-12)."""
    if expected is None:
        return None if actual is None else f"expected null (no block), got {actual!r}"
    if actual is None:
        head = expected.split("\n")
        title = head[1] if len(head) > 2 else expected
        return f"expected the block headed {title!r}, got null"
    if not isinstance(actual, str):
        return f"expected a str snapshot, got {type(actual).__name__} {actual!r}"
    if expected == actual:
        return None
    name = FILENAMES[target]
    want_head, want = _segments(expected)
    got_head, got = _segments(actual, expected)
    if want_head != got_head:
        rules_kept = len(got_head) == 3 and (want_head[0], want_head[2]) == (
            got_head[0],
            got_head[2],
        )
        if rules_kept:  # the title line alone: the rules of 46 '═' would hide the difference
            said = f"header differs: expected {want_head[1]!r}, got {got_head[1]!r}"
        else:
            said = f"header differs: expected {want_head!r}, got {got_head!r}"
        # what else differs is said first: a header's figure often only follows from it
        same_head = "\n".join([*want_head, *actual.split("\n")[len(got_head) :]])
        rest = snapshot_difference(expected, same_head, target, raw_entries)
        return said if rest is None else f"{rest}; the {said}"
    if len(want) != len(got):
        return f"expected {len(want)} entries in the block, got {len(got)}: {actual!r}"
    for index, (w, g) in enumerate(zip(want, got, strict=True)):
        if w == g:
            continue
        prefix = next((p for p in (BLOCKED_PREFIX, UNREADABLE_PREFIX) if w.startswith(p)), None)
        if prefix is None:
            return f"entry {index} of the block: expected {w!r}, got {g!r}"
        if not g.startswith(prefix) or name not in g:
            return (
                f"entry {index}: expected a placeholder starting {prefix!r} naming {name}, "
                f"got {g!r}"
            )
        if prefix == UNREADABLE_PREFIX and "\n" in g:
            return f"entry {index}: the {prefix} line must be one line, got {g!r}"
        leaked = [raw for raw in raw_entries if raw and raw in g]
        if leaked:
            return f"entry {index}: the placeholder contains the hidden entry {leaked[0]!r}"
    return None
