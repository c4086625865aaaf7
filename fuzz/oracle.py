"""What the spec allows a backend to answer: the model's outcome and the spec's sanctioned
alternatives, and the judge of snapshots (CONTRACT-5, SCAN-2, BATCH-8, CONTRACT-19, SNAP-*); the
clause a wrong answer breaks is :mod:`memspec.conformance.verdict.blame`'s. More in
docs/architecture.md, "Module notes"."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from memspec.conformance.transport.wire import Answer, Request
from memspec.conformance.verdict.findings import HarnessError
from memspec.spec import codes, model
from memspec.spec.codec import FileState, classify_bytes, encode_entries
from memspec.spec.model import State
from memspec.spec.operations import Batch, ExternalWrite, Mutation, Remove
from memspec.spec.rules import Outcome, argument_error, decide
from memspec.spec.snapshot import (
    BLOCKED_PREFIX,
    block_clause,
    duplicates_difference,
    load_block,
    shown_entries,
    snapshot_difference,
    split_block,
    state_difference,
)
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES
from memspec.spec.threats import find_threats

ARGUMENT_CODES = frozenset(
    (codes.E_TARGET, codes.E_INVALID, codes.E_EMPTY, codes.E_DELIMITER, codes.E_THREAT)
)
"""Codes decided from the arguments alone, before the disk is touched (CONTRACT-5)."""


class SpecInconsistency(HarnessError):
    """A bug in the spec's model, not a failure of the backend: the model's own decision breaks
    a clause (its accepted result does not read back as the entries it decided; FORMAT-4,
    FORMAT-5). Report it against SPEC.md and ``memspec.spec``; the message shows the example."""


def _model_round_trip(state: State, op: Mutation, after: State) -> None:
    """Raises SpecInconsistency when the model writes entries that do not read back as such."""
    data = model.disk(state, op.target)
    limit = model.limit_of(state, op.target)
    _, result = decide(op, classify_bytes(data, limit), limit)
    if result is None:
        return
    written = model.disk(after, op.target)
    if model.entries_on_disk(after, op.target) != tuple(result):
        raise SpecInconsistency(
            f"the spec's model: {op!r} on {data!r} decides the entries {list(result)!r}, "
            f"writes them as {written!r}, and that reads back as "
            f"{model.entries_on_disk(after, op.target)!r} (FORMAT-4, FORMAT-5)"
        )


@dataclass(frozen=True)
class Allowed:
    """An Allowed answer: the outcome, the model state after it, and which rule allows it."""

    outcome: Outcome
    state: State
    why: str


def whole_entry(request: Request) -> str | None:
    """Returns the content a request stores as one whole entry — an add's ``content``, a
    replace's ``new_content`` — or ``None`` (a patch's content is a span of an entry, a batch's
    items are many)."""
    content = {"add": request.get("content"), "replace": request.get("new_content")}.get(
        request["op"]
    )
    return content if isinstance(content, str) else None


def _has_content(op: Mutation) -> bool:
    """Returns whether ``op`` carries content a scanner reads (``remove`` carries none)."""
    if isinstance(op, Batch):
        return any(item.get("action") in ("add", "replace") for item in op.operations)
    return not isinstance(op, Remove)


def _decide(state: State, op: Mutation, *, scan: bool, guard: bool) -> tuple[Outcome, State]:
    """Returns the model's decision for a store that scans (or not) and guards drift (or not)."""
    if scan and guard:
        return model.step(state, op)
    refusal = argument_error(op, scan=scan)
    if refusal is not None:
        return refusal, state
    data = model.disk(state, op.target)
    limit = model.limit_of(state, op.target)
    met = classify_bytes(data, limit)
    file = FileState("cosmetic", met.entries) if met.kind == "foreign" and not guard else met
    outcome, result = decide(op, file, limit, scan=scan)
    # DRIFT-3, DRIFT-5: a refused or rewritten foreign file is kept in a backup, guard or not.
    if data is not None and model.needs_backup(met, outcome, result):
        state = replace(state, backups=state.backups | {(op.target, data)})
    if result is not None:
        _, state = model.step(state, ExternalWrite(op.target, encode_entries(result)))
    return outcome, state


def allowed_answers(state: State, op: Mutation, features: Collection[str]) -> list[Allowed]:
    """Returns every answer the spec allows to ``op`` in ``state``, the model's first."""
    scans, guards = "threat-scan" in features, "drift-guard" in features
    outcome, after = model.step(state, op)
    if outcome.ok and argument_error(op) is None:
        _model_round_trip(state, op, after)
    found = [Allowed(outcome, after, "the model")]
    if not scans and outcome.code == codes.E_THREAT:
        alt, alt_state = _decide(state, op, scan=False, guard=guards)
        found.append(Allowed(alt, alt_state, "no threat-scan claimed: content is plain text"))
    if not guards and codes.E_DRIFT in (outcome.code, found[-1].outcome.code):
        alt, alt_state = _decide(state, op, scan=scans, guard=False)
        found.append(Allowed(alt, alt_state, "no drift-guard claimed: a foreign file is read"))
    if scans and outcome.code not in ARGUMENT_CODES and _has_content(op):
        found.append(Allowed(Outcome(codes.E_THREAT), state, "SCAN-2: a superset of patterns"))
    if isinstance(op, Batch) and outcome.ok:
        before = model.entries_on_disk(state, op.target)
        if before and not model.entries_on_disk(after, op.target):
            found.append(Allowed(Outcome(codes.E_INVALID), state, "BATCH-8: refuse emptying"))
    return found


def match_answer(
    allowed: Sequence[Allowed], answer: Answer, disk_after: bytes | None, target: str
) -> Allowed | None:
    """Returns the allowed answer ``answer`` is, preferring one whose file bytes agree."""
    same_code = [a for a in allowed if a.outcome.code == answer.get("code")]
    for candidate in same_code:
        if model.disk(candidate.state, target) == disk_after:
            return candidate
    return same_code[0] if same_code else None


def expected_block(
    target: str, entries: Sequence[str] | None, limit: int, *, scan: bool = True
) -> str | None:
    """Returns the block a load renders from ``entries`` (``None``: the file is unreadable)."""
    return load_block(target, entries, limit, find_threats if scan else lambda _: ())


def _stricter_block_problem(
    target: str, entries: Sequence[str], limit: int, actual: str
) -> str | None:
    """Returns why ``actual`` is not the block with some extra entries blocked (SCAN-2)."""
    expected = expected_block(target, entries, limit)
    if expected is None:
        return "expected no block"
    want_head, _ = split_block(expected)
    got_head, _ = split_block(actual, expected)
    got = shown_entries(actual, expected)
    if want_head != got_head or len(got) != len(entries):
        return "the header or the number of entries differs"
    for entry, shown in zip(entries, got, strict=True):
        blocked = shown.startswith(BLOCKED_PREFIX) and FILENAMES[target] in shown
        if shown != entry and not (blocked and entry not in shown):
            return f"entry {entry!r} is shown as {shown!r}"
        if shown == entry and find_threats(entry):
            return f"the threat entry {entry!r} is shown raw"
    return None


def snapshot_problem(
    target: str,
    entries: Sequence[str] | None,
    actual: object,
    features: Collection[str],
    limit: int | None = None,
) -> str | None:
    """Returns why ``actual`` is not a block the spec allows for a load that read ``entries``
    (``None`` for an unreadable file), or ``None`` when it is (SNAP-2 to SNAP-9, SCAN-6)."""
    limit = DEFAULT_LIMITS[target] if limit is None else limit
    hidden = [entry for entry in entries or () if find_threats(entry)]
    expected = expected_block(target, entries, limit)
    problem = snapshot_difference(expected, actual, target, hidden)
    if problem is None or not isinstance(actual, str) or entries is None:
        return problem
    if "threat-scan" not in features:
        plain = expected_block(target, entries, limit, scan=False)
        if snapshot_difference(plain, actual, target) is None:
            return None
    elif _stricter_block_problem(target, entries, limit, actual) is None:
        return None
    return problem


def snapshot_clause(
    target: str, entries: Sequence[str] | None, actual: object, limit: int | None = None
) -> str:
    """Returns the clause a block :func:`snapshot_problem` refused breaks: SNAP-9 for a file
    that cannot be read (``entries`` None), a part's own when only one part differs (SNAP-5 to
    SNAP-8, SCAN-6), READ-5 for a block of the entries without their duplicates, SNAP-3 for a
    block with no entries where none belongs, else SNAP-2."""
    if entries is None:
        return "SNAP-9"
    limit = DEFAULT_LIMITS[target] if limit is None else limit
    hidden = [entry for entry in entries or () if find_threats(entry)]
    expected = expected_block(target, entries, limit)
    # with no live block known, only SNAP-3's part is told: a block with no entries
    state = duplicates_difference(entries, actual, target, limit, find_threats) or (
        state_difference(expected, actual, live=expected)
    )
    return block_clause(expected, actual, target, hidden, state[0] if state else "SNAP-2")
