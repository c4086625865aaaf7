"""The rules that decide one mutation: arguments, matching, limits.

Pure functions over entry tuples, each citing the clause ids it decides; the model composes them
into ``step``, and a store may call them directly so that each rule lives in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memspec.spec import codes
from memspec.spec.codec import (
    FileState,
    classify_bytes,
    has_delimiter_line,
    is_encodable,
    normalize_content,
    serialize,
    starts_with_bom,
)
from memspec.spec.codec import usage as usage_of
from memspec.spec.operations import Add, Batch, FrozenMapping, Mutation, Patch, Remove, Replace
from memspec.spec.snapshot import usage_label
from memspec.spec.targets import is_target
from memspec.spec.threats import find_threats

Entries = tuple[str, ...]
PREVIEW_LENGTH = 80


@dataclass(frozen=True)
class Outcome:
    """An Outcome is the model's answer to one operation: a code, ``ok`` exactly for ``OK``
    (CONTRACT-3, CONTRACT-4); ``item`` is the index of the batch item that decided a refusal."""

    code: str
    duplicate: bool = False
    matches: tuple[str, ...] = ()
    usage: str | None = None
    threats: tuple[str, ...] = ()
    item: int | None = None
    rule: str = field(default="", compare=False)
    """The clause whose condition decided a refusal (``ENTRY-3`` for a delimiter line), or ""
    where no one clause does; what a backend that answers otherwise has broken."""

    @property
    def ok(self) -> bool:
        """Whether the operation took effect or was an accepted no-op."""
        return self.code == codes.OK


def preview(entry: str) -> str:
    """Returns an entry's preview in an ambiguity answer: 80 code points, then ``...`` (MATCH-6)."""
    return entry if len(entry) <= PREVIEW_LENGTH else entry[:PREVIEW_LENGTH] + "..."


def content_error(content: object, *, scan: bool = True) -> Outcome | None:
    """Returns the refusal for new entry text, or ``None`` when it may be stored: in that order
    ENTRY-7 (``E_INVALID``), ENTRY-2 (``E_EMPTY``), ENTRY-3 and ENTRY-4 (``E_DELIMITER``), SCAN-1
    (``E_THREAT``, only for a store that scans: ``scan``, the ``threat-scan`` feature); every
    other character is stored as given (ENTRY-5)."""
    if not isinstance(content, str):
        return Outcome(codes.E_INVALID, rule="ENTRY-7")
    text = normalize_content(content)
    if not text:
        return Outcome(codes.E_EMPTY, rule="ENTRY-2")
    if has_delimiter_line(text) or starts_with_bom(text):
        return Outcome(codes.E_DELIMITER, rule="ENTRY-3")
    if not is_encodable(text):
        return Outcome(codes.E_DELIMITER, rule="ENTRY-4")
    threats = find_threats(text) if scan else ()
    if threats:
        # SCAN-1 for the content of add, replace and patch; a batch item's is BATCH-7's and a
        # patch's result PATCH-6's (their callers say so)
        return Outcome(codes.E_THREAT, threats=threats, rule="SCAN-1")
    return None


def old_text_error(old_text: object) -> Outcome | None:
    """Returns the refusal for an ``old_text`` argument, or ``None``: not a string is
    ``E_INVALID`` (ENTRY-7), empty after normalisation ``E_EMPTY``, and nothing else is checked
    (ENTRY-6)."""
    if not isinstance(old_text, str):
        return Outcome(codes.E_INVALID, rule="ENTRY-7")
    if not normalize_content(old_text):
        return Outcome(codes.E_EMPTY, rule="ENTRY-6")
    return None


def patch_content_error(content: object, *, scan: bool = True) -> Outcome | None:
    """Returns the refusal for the ``content`` of a patch, or ``None``: not a string is
    ``E_INVALID`` (ENTRY-7); empty after normalisation is allowed, since it deletes the span;
    anything else is checked like the content of ``add`` (PATCH-5)."""
    if not isinstance(content, str):
        return Outcome(codes.E_INVALID, rule="ENTRY-7")
    return content_error(content, scan=scan) if normalize_content(content) else None


_ITEM_FIELDS = {"add": ("content",), "replace": ("old_text", "content"), "remove": ("old_text",)}


def batch_item_error(item: object, *, scan: bool = True) -> Outcome | None:
    """Returns the refusal for one batch item's arguments, or ``None``: an object with a known
    ``action`` and string fields (BATCH-5), its contents checked like those of ``add``
    (BATCH-7), the first code of ``E_INVALID``, ``E_EMPTY``, ``E_DELIMITER``, ``E_THREAT``
    deciding (BATCH-6)."""
    if not isinstance(item, FrozenMapping):
        return Outcome(codes.E_INVALID, rule="BATCH-5")
    action = item.get("action")
    if not isinstance(action, str) or action not in _ITEM_FIELDS:
        return Outcome(codes.E_INVALID, rule="BATCH-5")
    fields = _ITEM_FIELDS[action]
    if any(not isinstance(item.get(name), str) for name in fields):
        return Outcome(codes.E_INVALID, rule="BATCH-5")
    errors = [old_text_error(item.get("old_text"))] if "old_text" in fields else []
    if "content" in fields:
        errors.append(content_error(item.get("content"), scan=scan))
    refusals = [error for error in errors if error is not None]
    if not refusals:
        return None
    first = min(refusals, key=lambda o: codes.PRECEDENCE.index(o.code))
    # BATCH-7: an item's content passes the scan of add's; a threat in it is BATCH-7's refusal
    return replace(first, rule="BATCH-7") if first.code == codes.E_THREAT else first


def argument_error(op: Mutation, *, scan: bool = True) -> Outcome | None:
    """Returns the refusal decided from the arguments alone, before the disk is touched, in the
    precedence order of CONTRACT-5 (REPLACE-2, PATCH-5, PATCH-10, BATCH-5; the first bad batch item
    decides, BATCH-6); contents are scanned for threats only when ``scan`` (the store claims
    ``threat-scan``, SCAN-1)."""
    if not is_target(op.target):
        return Outcome(codes.E_TARGET, rule="CONTRACT-4")
    if isinstance(op, Add):
        return content_error(op.content, scan=scan)
    if isinstance(op, Replace):
        if not isinstance(op.old_text, str) or not isinstance(op.new_content, str):
            return Outcome(codes.E_INVALID, rule="ENTRY-7")
        return old_text_error(op.old_text) or content_error(op.new_content, scan=scan)
    if isinstance(op, Remove):
        return old_text_error(op.old_text)
    if isinstance(op, Patch):
        if not isinstance(op.old_text, str) or not isinstance(op.content, str):
            return Outcome(codes.E_INVALID, rule="ENTRY-7")
        return old_text_error(op.old_text) or patch_content_error(op.content, scan=scan)
    if not isinstance(op.operations, tuple):
        return Outcome(codes.E_INVALID, rule="BATCH-5")
    if not op.operations:
        return Outcome(codes.E_EMPTY, rule="BATCH-5")
    for index, item in enumerate(op.operations):
        error = batch_item_error(item, scan=scan)
        if error is not None:
            return replace(error, matches=(), item=index)
    return None


def choose_entry(entries: Sequence[str], old_text: str) -> tuple[int | None, Outcome | None]:
    """Returns the index of the entry ``old_text`` identifies, or the refusal: candidates contain
    the normalised text (MATCH-1), none is ``E_NOMATCH`` (MATCH-2, REMOVE-3), an equal entry wins
    (MATCH-3), candidates of one text act on the first (MATCH-4), distinct texts are ``E_AMBIGUOUS``
    (MATCH-5)."""
    needle = normalize_content(old_text)
    for index, entry in enumerate(entries):
        if entry == needle:
            return index, None
    found = [index for index, entry in enumerate(entries) if needle in entry]
    if not found:
        return None, Outcome(codes.E_NOMATCH, rule="MATCH-2" if entries else "REMOVE-3")
    distinct = list(dict.fromkeys(entries[index] for index in found))
    if len(distinct) > 1:
        matches = tuple(preview(e) for e in distinct)
        return None, Outcome(codes.E_AMBIGUOUS, matches=matches, rule="MATCH-5")
    return found[0], None


def span_starts(entry: str, span: str) -> int:
    """Returns at how many positions ``span`` starts in ``entry``, overlapping occurrences
    included: ``"00"`` starts twice in ``"1000"`` (PATCH-3)."""
    return sum(entry.startswith(span, index) for index in range(len(entry) - len(span) + 1))


def patch_entry(entry: str, old_text: str, content: str, *, scan: bool = True) -> str | Outcome:
    """Returns ``entry`` with the span ``old_text`` replaced by ``content``, or the refusal
    (ENTRY-6, PATCH-3, PATCH-4, PATCH-5, PATCH-6): ``patch_entry("Drinks tea daily", "tea ",
    "coffee")`` is ``"Drinks coffee daily"``."""
    span = normalize_content(old_text)
    if span_starts(entry, span) != 1:
        return Outcome(codes.E_AMBIGUOUS, matches=(preview(entry),), rule="PATCH-3")
    start = entry.index(span)
    result = normalize_content(
        entry[:start] + normalize_content(content) + entry[start + len(span) :]
    )
    refusal = content_error(result, scan=scan)
    return result if refusal is None else replace(refusal, rule="PATCH-6")


def _apply_one(
    entries: Entries, action: str, content: str, old_text: str, *, scan: bool = True
) -> Entries | Outcome:
    """Returns the entries after one add, replace, remove or patch, or its refusal (DUP-1, DUP-3,
    REPLACE-1, REPLACE-4, REMOVE-1, PATCH-2, PATCH-4; a patch's result scanned only when
    ``scan``, PATCH-6)."""
    if action == "add":
        text = normalize_content(content)
        return entries if text in entries else (*entries, text)
    index, refusal = choose_entry(entries, old_text)
    if refusal is not None:
        return refusal
    assert index is not None
    if action == "replace":
        return (*entries[:index], normalize_content(content), *entries[index + 1 :])
    if action == "patch":
        patched = patch_entry(entries[index], old_text, content, scan=scan)
        if isinstance(patched, Outcome):
            return patched
        return (*entries[:index], patched, *entries[index + 1 :])
    return entries[:index] + entries[index + 1 :]


def apply_step(entries: Entries, action: str, content: str, old_text: str) -> Entries | Outcome:
    """Returns the entries after one add, replace, patch or remove item whose arguments passed,
    or its refusal (the step a batch applies to its working copy, BATCH-3)."""
    return _apply_one(entries, action, content, old_text)


def steps(op: Mutation) -> list[tuple[str, str, str]]:
    """Returns the ``(action, content, old_text)`` steps of a mutation, in order: one for an
    add, replace, remove or patch, one per item of a batch (BATCH-3), a missing field read as
    ``""``. For example ``steps(Replace("user", "tea", "Drinks coffee"))`` is
    ``[("replace", "Drinks coffee", "tea")]``."""
    if isinstance(op, Add):
        return [("add", op.content, "")]
    if isinstance(op, Replace):
        return [("replace", op.new_content, op.old_text)]
    if isinstance(op, Remove):
        return [("remove", "", op.old_text)]
    if isinstance(op, Patch):
        return [("patch", op.content, op.old_text)]
    return [
        (item.get("action"), item.get("content", ""), item.get("old_text", ""))
        for item in op.operations
    ]


def exceeds_limit(result: Sequence[str], current: Sequence[str], limit: int) -> bool:
    """Returns whether ``result`` must be refused with ``E_LIMIT`` (LIMIT-2, REPLACE-3): growth past
    the limit is, a result no larger than the current state is not (LIMIT-4, LIMIT-5)."""
    used = usage_of(result)
    return used > limit and used > usage_of(current)


def grows(result: Sequence[str], current: Sequence[str]) -> bool:
    """Returns whether ``result`` uses more code points than ``current`` (LIMIT-1): the test
    that decides which mutations of a foreign file go through (DRIFT-2, DRIFT-7)."""
    return usage_of(result) > usage_of(current)


def _apply_all(op: Mutation, current: Entries, *, scan: bool = True) -> Entries | Outcome:
    """Returns the entries after every step of ``op`` applied in order to a working copy
    (BATCH-3), or the refusal of the first step that does not apply (BATCH-2)."""
    result = current
    for index, (action, content, old_text) in enumerate(steps(op)):
        applied = _apply_one(result, action, content, old_text, scan=scan)
        if isinstance(applied, Outcome):
            item = index if isinstance(op, Batch) else None
            return replace(applied, item=item)
        result = applied
    return result


LIMIT_RULES = {
    Add: "LIMIT-2",
    Replace: "REPLACE-3",
    Remove: "LIMIT-5",
    Patch: "PATCH-7",
    Batch: "BATCH-4",
}
"""The clause whose limit check refuses each operation (LIMIT-2, REPLACE-3, PATCH-7, BATCH-4;
a remove never grows a target, LIMIT-5)."""

LIMIT_RULES_BY_OP = {kind.__name__.lower(): rule for kind, rule in LIMIT_RULES.items()}
""":data:`LIMIT_RULES` by the ``op`` of a request."""


def limit_rule(
    op: Mutation, result: Sequence[str], current: Sequence[str], other: int | None
) -> str:
    """Returns the clause that decides an ``E_LIMIT`` refusal of ``op``: LIMIT-6 when the result
    would fit the other target's limit ``other`` (each target has its own limit), else the
    operation's own limit clause (:data:`LIMIT_RULES`)."""
    if other is not None and not exceeds_limit(result, current, other):
        return "LIMIT-6"
    return LIMIT_RULES[type(op)]


def decide(
    op: Mutation,
    file: FileState,
    limit: int,
    other_limit: int | None = None,
    *,
    scan: bool = True,
) -> tuple[Outcome, Entries | None]:
    """Returns the outcome of a mutation whose arguments passed, and the entries to write (``None``
    when nothing is to be written: a refusal, or an unchanged result, FORMAT-6); ``scan`` says
    whether the store scans for threats (the ``threat-scan`` feature: a patch's result is scanned
    only then, PATCH-6, as content is, SCAN-1).

    Rules decided here: the no-op duplicate add (DUP-1, DUP-2); the ``usage`` label as the operation
    leaves the target (SNAP-11); unreadable files (READ-6, READ-7); working on the file's entries as
    they are (DRIFT-1, DUP-4, SCAN-9); batches (BATCH-2, BATCH-3, BATCH-4, LIMIT-3); removal
    (REMOVE-2, MATCH-2, REMOVE-3); patches (PATCH-7, PATCH-8, PATCH-9, PATCH-10). A foreign file
    refuses with ``E_DRIFT`` every mutation that fails to apply or would make it larger
    (CONTRACT-5), and lets one through that does not, so the model can always repair it (DRIFT-2,
    DRIFT-7); the store backs the file up first, not this rule.
    """
    if file.entries is None:
        return Outcome(codes.E_UNREADABLE, rule="READ-6"), None
    current: Entries = file.entries
    result = _apply_all(op, current, scan=scan)
    if file.kind == "foreign" and (isinstance(result, Outcome) or grows(result, current)):
        return Outcome(codes.E_DRIFT, rule="DRIFT-2"), None
    if isinstance(result, Outcome):
        return result, None
    if result == current:
        duplicate = isinstance(op, Add)
        return Outcome(
            codes.OK, duplicate=duplicate, usage=usage_label(usage_of(current), limit)
        ), None
    if exceeds_limit(result, current, limit):
        # how usage is counted (LIMIT-1) is told by the examples that cite it
        rule = limit_rule(op, result, current, other_limit)
        return Outcome(codes.E_LIMIT, usage=usage_label(usage_of(current), limit), rule=rule), None
    # a batch's limit is its final result's (BATCH-4), whatever refused it on the way
    rule = "" if isinstance(op, Batch) else acceptance_limit_rule(result, current, limit)
    return Outcome(codes.OK, usage=usage_label(usage_of(result), limit), rule=rule), result


def acceptance_limit_rule(result: Sequence[str], current: Sequence[str], limit: int) -> str:
    """Returns the clause a store breaks by refusing with ``E_LIMIT`` a mutation that grows the
    target to ``result`` within ``limit``: LIMIT-2 when the result uses exactly the limit (which
    is accepted), LIMIT-1 when it fits in code points but not in UTF-8 bytes or in UTF-16 code
    units (the store counted usage otherwise); "" for any other result, whose refusal the
    operation's limit clause owns. For example, with a limit of 6, ``["😀😀", "é"]`` (6 code
    points) is LIMIT-2's and ``["😀", "é"]`` (5 code points, 8 bytes) LIMIT-1's."""
    text = serialize(result)
    used = len(text)
    if used <= usage_of(current):
        return ""  # a refusal of a result no larger is LIMIT-4's or LIMIT-5's
    if used == limit:
        return "LIMIT-2"
    if 4 * used <= limit:
        return ""  # no count of it, in bytes or UTF-16 units, reaches the limit
    units = used + sum(1 for c in text if ord(c) > 0xFFFF)  # UTF-16: astral ones take two
    counted = max(len(text.encode("utf-8", "surrogatepass")), units)
    return "LIMIT-1" if used < limit < counted else ""


ACTION_CLAUSES = {
    Replace: ("REPLACE-1", "REPLACE-4"),
    Patch: ("PATCH-4", "PATCH-4"),
    Remove: ("REMOVE-1", "REMOVE-1"),
}
"""Per action that edits one chosen entry: the clause that owns what it writes in that entry's
place, and the clause that owns the other entries (REPLACE-1, REPLACE-4, PATCH-4, REMOVE-1)."""


@dataclass(frozen=True)
class Misapplied:
    """A write the spec's rules blame on an action's own clause (:func:`misapplied_write`):
    ``clause``, and the entries the file held before and after it."""

    clause: str
    before: tuple[str, ...]
    after: tuple[str, ...]


def misapplied_write(
    op: Mutation,
    accepted: bool,
    files: tuple[bytes | None, bytes | None],
    want: Sequence[str] | None,
    limit: int,
) -> Misapplied | None:
    """Returns the clause of :func:`misapplied_clause` for a write that turned the bytes
    ``files[0]`` into ``files[1]`` where the spec's rules give the entries ``want``, the file's
    kind read off the bytes before it; ``None`` when either file is unreadable, ``want`` is
    unknown, or no clause of the action is broken."""
    start, got = classify_bytes(files[0], limit), classify_bytes(files[1], limit).entries
    if start.entries is None or got is None or want is None or tuple(got) == tuple(want):
        return None
    foreign = start.kind == "foreign"
    clause = misapplied_clause(op, accepted, foreign, start.entries, want, got)
    return None if clause is None else Misapplied(clause, start.entries, tuple(got))


def misapplied_clause(
    op: Mutation,
    accepted: bool,
    foreign: bool,
    before: Sequence[str],
    want: Sequence[str],
    got: Sequence[str],
) -> str | None:
    """Returns the clause ``op`` broke when it turned ``before`` into ``got`` where the spec's
    rules give ``want``. A refused batch that changed anything broke BATCH-2. Of an accepted
    action that edits the entry ``old_text`` chooses: the action's own clause for that entry when
    only it came out wrong, its clause for the others when they were merged, dropped or reordered
    (:data:`ACTION_CLAUSES`), unless the file was ``foreign``: which entries a rewrite of a
    foreign file keeps is the drift guard's business (DRIFT-2, DRIFT-5). A result that is the
    spec's with the duplicates already in the file dropped, or the action's on the file with them
    dropped, broke DUP-4, whatever the action.

    ``None`` when ``got`` is ``want``; when nothing changed (whether an acknowledged change
    reached the file is ATOMIC-5's business); when another entry than the chosen one was edited
    or removed (which entry ``old_text`` chooses is MATCH-1 to MATCH-5's and PATCH-2's); and for
    the other actions. For example, with ``before`` ``("a", "b", "c")``, a
    ``Replace("memory", "b", "x")`` that gives ``("a", "c", "x")`` broke ``"REPLACE-4"``."""
    if not accepted:
        return "BATCH-2" if isinstance(op, Batch) and list(got) != list(before) else None
    clauses = ACTION_CLAUSES.get(type(op))
    if clauses is None or list(got) in (list(want), list(before)):
        return None
    on_unique = _apply_all(op, tuple(dict.fromkeys(before)))
    dropped = [list(dict.fromkeys(want))]
    if not isinstance(on_unique, Outcome):
        dropped.append(list(on_unique))
    if len(set(before)) < len(before) and list(got) in dropped:
        return "DUP-4"  # the file's duplicates dropped, after the action or before it
    index, _ = choose_entry(before, getattr(op, "old_text", ""))
    if index is None:
        return None
    chosen_clause, others_clause = clauses
    if isinstance(op, Remove):
        others_removed = [[*before[:k], *before[k + 1 :]] for k in range(len(before))]
        return None if list(got) in others_removed or foreign else others_clause
    edited = [k for k in range(len(before)) if len(got) == len(before) and got[k] != before[k]]
    if edited == [index]:
        return chosen_clause
    return None if len(edited) == 1 or foreign else others_clause
