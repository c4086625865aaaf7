"""The step interpreter of SPEC.md's examples: :func:`run_example` runs each step in a driver and
returns the first difference, with the clauses that own it (the judges of ``spec/`` and
``verdict/blame.py`` decide which)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from memspec.conformance.examples.failure import (
    ExampleFailure,
    Fail,
    failure_factory,
    model_entries,
    plain,
    step_fields,
)
from memspec.conformance.examples.tool_calls import ToolOffer, run_tool_step
from memspec.conformance.examples.world import Driver
from memspec.conformance.transport.backend import BackendDefect
from memspec.conformance.transport.wire import Answer, Fields
from memspec.conformance.verdict.blame import Answered, blame
from memspec.conformance.verdict.diffs import first_difference
from memspec.conformance.verdict.findings import DEFECT_CLAUSE, Refusal
from memspec.spec import codes
from memspec.spec.codec import (
    classify_bytes,
    only_not_canonical,
)
from memspec.spec.examples import Example, Step
from memspec.spec.operations import (
    Mutation,
)
from memspec.spec.requests import MUTATIONS, operation_of
from memspec.spec.rules import misapplied_write
from memspec.spec.snapshot import (
    BLOCKED_PREFIX,
    duplicates_difference,
    load_block,
    part_difference,
    render_snapshot,
    shown_entries,
    snapshot_difference,
    state_difference,
)
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS, is_target
from memspec.spec.threats import find_threats


def _alone(
    step: Step, answer: Answer, failure: ExampleFailure, driver: Driver
) -> tuple[str, str, Fields] | None:
    """Returns, for a refusal an example of the order of conditions expected and another refusal
    came instead, the clause deciding the expected one, its code and an ``add`` that meets that
    condition alone: a bad target (CONTRACT-4) or the step's content (ENTRY-2, ENTRY-3,
    ENTRY-4, ENTRY-7); ``None`` for any other condition."""
    code = step.expect["code"]
    ordered = codes.PRECEDENCE_CLAUSES & set(failure.clauses)
    if not ordered or answer.get("code") in (codes.OK, code):
        return None
    fields = step_fields(step)
    target = fields["target"]  # a mutation step names its target first (parse_step)
    if code == codes.E_TARGET:
        return "CONTRACT-4", code, {"target": target, "content": "User prefers tabs"}
    expected = driver.spec_outcome()
    rule = expected.rule if expected is not None else ""
    if step.op not in ("add", "replace") or rule not in CONTENT_RULES or not is_target(target):
        return None
    content = fields["new_content"] if step.op == "replace" else fields["content"]
    return rule, code, {"target": target, "content": content}


def _over_the_limit_first(
    step: Step, answer: Answer, failure: ExampleFailure, driver: Driver
) -> str:
    """Returns, for an ``E_LIMIT`` an example of the order of conditions got where it expected a
    refusal that comes before the limit (CONTRACT-5), the clause deciding the expected one: the
    limit may be judged too early, or the expected condition may not be judged at all, which a
    run within limits no step reaches tells; "" for anything else."""
    code = step.expect["code"]
    if not codes.PRECEDENCE_CLAUSES & set(failure.clauses) or answer.get("code") != codes.E_LIMIT:
        return ""
    expected = driver.spec_outcome()
    if expected is None or expected.code != code or code in (codes.OK, codes.E_LIMIT):
        return ""
    return expected.rule or ""


CONTENT_RULES = frozenset({"ENTRY-2", "ENTRY-3", "ENTRY-4", "ENTRY-7"})
"""The clauses that decide a refusal of content for what it is, whatever the file holds."""


def _outcome_problem(step: Step, answer: Mapping[str, object]) -> str | None:
    want = step.expect
    if answer.get("code") != want["code"]:
        return f"expected code {want['code']}, got {answer.get('code')}"
    for name, value in want.items():
        if name == "code" or name not in answer:
            continue
        if plain(answer[name]) != value:
            return f"expected {name} {value!r}, got {answer[name]!r}"
    return None


def run_example(example: Example, driver: Driver) -> ExampleFailure | None:
    """Runs every step of ``example`` in ``driver``; returns the first failure or ``None``.

    A :class:`BackendDefect` (the backend raised or answered garbage) is a failure too. A
    difference that a part of the expectation blames on its own clauses (a snapshot header)
    does not stop the example: when nothing else differs, the first such failure is returned,
    blaming every clause those parts named, with ``completed`` set.
    """
    opened: set[str] = set()
    offers: dict[str, ToolOffer] = {}
    partial: list[ExampleFailure] = []
    limits = {**DEFAULT_LIMITS, **example.limits}
    for step in example.steps:
        if step.op != "put" and step.session not in opened:
            # a session loads when it first appears: a crash there is the load's, not that of a
            # mutation that needed the session; a read (load, entries, snapshot) owns it
            opened.add(step.session)
            crashed = _opening_crash(step, driver, example)
            if crashed is not None:
                return _found_before([*partial, crashed], completed=False) if partial else crashed
        fail = failure_factory(example, step)
        try:
            if step.op == "put":
                driver.put(step.args[0], step.args[1])
                continue
            if step.op == "tool":
                problem = run_tool_step(step, driver, fail, limits, example.clauses, offers)
            else:
                problem = _run_step(step, driver, fail, limits, example.clauses)
            if step.given and problem is None:
                problem = _given_state_problem(step, driver, fail)
        except Refusal as refused:
            if not partial:
                raise
            found = _found_before(partial, completed=False)  # what was found before stands
            text = f"{refused.text}; before it, {found.reason} ({', '.join(found.blamed)})"
            raise Refusal(refused.action, (*refused.clauses, *found.blamed), text) from None
        except BackendDefect as defect:
            return _defect_failure(step, defect, fail, example)
        if problem is None:
            continue
        if problem.blamed and not problem.stops:
            partial.append(problem)
            continue
        if step.given and not problem.blamed:
            # the state was never set up: what was found before stands, nothing more is judged
            return (
                _found_before(partial, completed=False) if partial else replace(problem, given=True)
            )
        return _found_before([*partial, problem], completed=False) if partial else problem
    return _found_before(partial, completed=True) if partial else None


def _defect_failure(
    step: Step, defect: BackendDefect, fail: Fail, example: Example
) -> ExampleFailure:
    """Returns the failure of a step the backend broke at: the evidence is the raise (CONTRACT-6)
    or the malformed answer (CONTRACT-2); a raise where the example expects a refusal, a load or
    a read also misses what its clauses ask of that step, if the raise is that step's own
    (:func:`~memspec.conformance.examples.probes.run_on_backend` asks)."""
    failure = fail(defect.sent, defect.received, step.expect, str(defect))
    failure = replace(failure, detail=defect.detail, blamed=(defect.clause,))
    crashed = defect.clause == DEFECT_CLAUSE and not step.given
    return replace(
        failure,
        unless_raised_anyway=() if not crashed or _expects_success(step) else example.clauses,
    )


READS = frozenset({"load", "entries", "snapshot"})
"""The steps that read what a session loads: a crash of the load that opens their session is
theirs, what their clauses ask of reading that state."""


def _opening_crash(step: Step, driver: Driver, example: Example) -> ExampleFailure | None:
    """Opens ``step``'s session with its first load; returns the failure of a backend that broke
    there: ``step``'s own when it reads (:data:`READS`), else that load's (CONTRACT-6, described
    as the load before ``step``), never a failure of the mutation that was not sent."""
    try:
        driver.request(step.session, "load", {})
    except BackendDefect as defect:
        if step.op in READS:
            return _defect_failure(step, defect, failure_factory(example, step), example)
        opening = replace(step, op="load", args=(), expect={"code": codes.OK}, given=False)
        failure = _defect_failure(opening, defect, failure_factory(example, opening), example)
        said = f"load (opening session {step.session}, before line {step.line})"
        return replace(failure, step=said)
    return None


def _found_before(found: list[ExampleFailure], completed: bool) -> ExampleFailure:
    """Returns the first of the differences an example found, blaming every clause they name
    (one that names none, the example's) and telling each with its clauses; ``completed`` when
    it ran to its end, so that its other clauses held."""
    blamed = tuple(dict.fromkeys(c for failure in found for c in failure.blamed or failure.clauses))
    later = [
        f"then {failure.step} → {failure.reason} ({', '.join(failure.blamed or failure.clauses)})"
        for failure in found[1:]
    ]
    reason = "; ".join([f"{found[0].reason} ({', '.join(found[0].blamed or found[0].clauses)})",
                        *later]) if later else found[0].reason  # fmt: skip
    shown = tuple(dict.fromkeys(pair for failure in found for pair in failure.shown_threats))
    reasons: dict[str, str] = {}
    for failure in found:
        for clause in failure.blamed or failure.clauses:
            reasons.setdefault(clause, failure.summary())
    return replace(
        found[0], blamed=blamed, completed=completed, reason=reason, shown_threats=shown,
        clause_reasons=tuple(reasons.items()),
    )  # fmt: skip


def _expects_success(step: Step) -> bool:
    """Whether a mutation step expects ``OK``, or a tool step a result that is not a failure."""
    expect = step.expect if isinstance(step.expect, dict) else {}
    result = expect.get("result")
    if not isinstance(result, dict):
        result = {}
    return expect.get("code") == codes.OK or (
        step.op == "tool" and result.get("success") is not False
    )


def _given_state_problem(step: Step, driver: Driver, fail: Fail) -> ExampleFailure | None:
    """Returns how the entries after a ``given`` mutation differ from the spec's, read with the
    backend's own ``entries``: a store that answered as expected but changed something else
    (moved an entry, dropped a duplicate) has not set up what the example judges."""
    target = step.args[0] if step.op in MUTATIONS else None
    if target not in TARGETS:
        return None
    want = driver.spec_entries(step.session, target)
    if want is None:
        return None
    got = driver.request(step.session, "entries", {"target": target}).get("entries")
    if got == want:
        return None
    reason = f"the entries then read {got!r}, where the spec's rules give {want!r}"
    return fail({"op": "entries", "target": target}, got, want, reason)


def _run_step(
    step: Step,
    driver: Driver,
    fail: Fail,
    limits: Mapping[str, int],
    step_clauses: tuple[str, ...],
) -> ExampleFailure | None:
    """Runs one step that is not a tool call; returns how it went wrong, with the clauses that
    own the difference (``step_clauses``, the example's, own what the judges leave to them)."""
    if step.op == "load":
        driver.request(step.session, "load", {})
        return None
    if step.op in MUTATIONS:
        fields = step_fields(step)
        target = str(fields.get("target"))
        before = (driver.disk(target), driver.spec_disk(target)) if target in TARGETS else None
        kind = classify_bytes(before[0], limits[target]).kind if before else ""
        answer = driver.request(step.session, step.op, fields)
        problem = _outcome_problem(step, answer)
        seen = Answered(
            {"op": step.op, **fields}, answer, driver.spec_outcome(), kind, cited=step_clauses
        )
        blamed = () if problem is None else tuple(dict.fromkeys(p.clause for p in blame(seen)))
        if (problem is None or blamed == ("SNAP-11",)) and before and not step.given:
            # an answer as the spec's, or one whose usage differs because the file does
            misapplied = _misapplied(step, answer, before, limits[target], driver, fail)
            if misapplied is not None:
                return misapplied
        if problem is None:
            return None
        failure = fail({"op": step.op, **fields}, answer, step.expect, problem)
        # another code than the spec's sends the example's state another way: it stops there
        diverged = answer.get("code") != step.expect["code"]
        if diverged and step.given:
            return failure  # the state the example judges was never set up: nothing is judged
        if diverged and (alone := _alone(step, answer, failure, driver)):
            return replace(failure, blamed=blamed, unless_refused_alone=alone)
        if diverged and (rule := _over_the_limit_first(step, answer, failure, driver)):
            return replace(failure, blamed=blamed, stops=True, unless_within_limits=rule)
        return replace(failure, blamed=blamed, stops=diverged and bool(blamed))
    target = step.args[0]
    want = step.expect.get("value")
    if step.op == "entries":
        answer = driver.request(step.session, "entries", {"target": target})
        got = answer.get("entries")
        if got != want:
            why = "; ".join(filter(None, ("entries differ", first_difference(want, got))))
            failure = fail({"op": "entries", "target": target}, got, want, why)
            blamed = _duplicates_dropped(want, got, driver.disk(target))
            # a write that dropped them left another file: what follows reads that one
            return replace(
                failure,
                blamed=blamed or _read_clauses(failure, want, driver.disk(target)),
                stops=blamed == ("DUP-4",),
            )
        return None
    if step.op == "snapshot":
        answer = driver.request(step.session, "snapshot", {"target": target})
        block = answer.get("snapshot")
        data = driver.disk(target)
        entries = model_entries(data)
        hidden = [e for e in entries or [] if find_threats(e)]
        problem = snapshot_difference(want, block, target, hidden)
        if problem is None:
            return None
        failure = fail({"op": "snapshot", "target": target}, block, want, problem)
        live = None if data is None else load_block(target, entries, limits[target], find_threats)
        blamed = (
            part_difference(want, block, target, hidden)
            or duplicates_difference(entries, block, target, limits[target], find_threats)
            or state_difference(want, block, live)
            or _shows_the_session(want, block, live, step, driver, limits[target])
            or _state_clauses(failure)
        )
        shown = (
            tuple((target, text) for text in _threats_shown(block)) if "SCAN-6" in blamed else ()
        )
        # no block where one belongs: no part of it was compared, so the example's own clauses
        # were not judged here (SNAP-12's line of an unreadable file behind a null)
        missing = block is None and want is not None
        return replace(failure, blamed=blamed, shown_threats=shown, stops=missing)
    if step.op == "disk":
        on_disk = driver.disk(target)
        if on_disk != want:
            why = "; ".join(filter(None, ("file bytes differ", first_difference(want, on_disk))))
            failure = fail({"read": FILENAMES.get(target, target)}, on_disk, want, why)
            canonical_only = only_not_canonical(want, on_disk)
            return replace(
                failure, blamed=("FORMAT-4",) if canonical_only else _state_clauses(failure)
            )
        return None
    return _check_backups(step, driver.backups(target), driver.disk(target), fail)


def _shows_the_session(
    want: str | None, block: object, live: str | None, step: Step, driver: Driver, limit: int
) -> tuple[str, ...]:
    """Returns ``("SNAP-1",)`` when ``block`` is the block of the entries ``step``'s session
    reports now, which the frozen block ``want`` is not (:func:`state_difference`): the snapshot
    follows the session's own writes, though the file also holds another session's later one
    (which the block of the file as it is now would show). Else ``()``, also when the session's
    entries cannot be read, and when the file's block ``live`` is still the frozen one: nothing
    was written since the load, so a block of the session's entries shows how they were read
    (READ), not a later state."""
    if live == want:
        return ()
    target = step.args[0]
    try:
        answer = driver.request(step.session, "entries", {"target": target})
    except BackendDefect:  # the read broke: the block is judged without it
        return ()
    entries = answer.get("entries")
    if not (isinstance(entries, list) and all(isinstance(e, str) for e in entries)):
        return ()
    return state_difference(want, block, render_snapshot(target, entries, limit, find_threats))


OUTCOME_CLAUSES = frozenset({"CONTRACT-3", "CONTRACT-4"})
"""Clauses about an answer alone (its shape, its code): a difference in the entries, the
snapshot or the file is never theirs."""


def _state_clauses(failure: ExampleFailure) -> tuple[str, ...]:
    """Returns the clauses a difference in the stored state blames: the example's, without
    :data:`OUTCOME_CLAUSES` (``()``, every clause, when only those are cited)."""
    kept = tuple(clause for clause in failure.clauses if clause not in OUTCOME_CLAUSES)
    return kept if len(kept) < len(failure.clauses) else ()


READING = "READ-"
"""The area of the clauses about how a reader reads a file (READ-1 to READ-8)."""


def _read_clauses(failure: ExampleFailure, want: Any, data: bytes | None) -> tuple[str, ...]:
    """Returns the clauses a difference in a session's entries blames. When the file on disk
    reads back, by the spec's reader, as the entries the spec expects, the file is right and
    the read wrong: the example's reading clauses own it (one reading difference is not also
    the write rules' it cites); else the difference is the stored state's
    (:func:`_state_clauses`)."""
    if isinstance(want, list) and model_entries(data) == want:
        reading = tuple(clause for clause in failure.clauses if clause.startswith(READING))
        if reading:
            return reading
    return _state_clauses(failure)


def _duplicates_dropped(want: Any, got: Any, data: bytes | None) -> tuple[str, ...]:
    """Returns the clause that owns entries read without the duplicates the spec keeps: READ-5
    when the file still holds them (the read dropped them), DUP-4 when it does not (a write did);
    else ``()``."""
    if not isinstance(want, list) or got == want or got != list(dict.fromkeys(want)):
        return ()  # (a replace that merged two entries into one is REPLACE-4's, judged before)
    return ("READ-5",) if model_entries(data) == want else ("DUP-4",)


def _misapplied(
    step: Step,
    answer: Answer,
    before: tuple[bytes | None, bytes | None],
    limit: int,
    driver: Driver,
    fail: Fail,
) -> ExampleFailure | None:
    """Returns how a mutation answered as the spec answers it went wrong in the file, when the
    file held the spec's entries before it and the spec's rules tell which clause of the action
    it broke (:func:`~memspec.spec.rules.misapplied_clause`): the example stops there, since
    every later step reads a state gone another way."""
    fields = step_fields(step)
    target = str(fields.get("target"))
    if before[0] is None or model_entries(before[0]) != model_entries(before[1]):
        return None
    operation = cast(Mutation, operation_of(step.op, fields, step.session))
    accepted = answer.get("code") == codes.OK
    want = model_entries(driver.spec_disk(target))
    found = misapplied_write(operation, accepted, (before[0], driver.disk(target)), want, limit)
    if found is None:
        return None
    reason = (
        f"answered {answer.get('code')}, and turned the entries {list(found.before)!r} into "
        f"{list(found.after)!r}, where the spec's rules give {want!r}"
    )
    failure = fail({"op": step.op, **fields}, list(found.after), want, reason)
    return replace(failure, blamed=(found.clause,), stops=True)


def _check_backups(
    step: Step, found: list[bytes], disk: bytes | None, fail: Fail
) -> ExampleFailure | None:
    """Returns how the target's backups differ from the step's, blaming the part's own clause:
    a content backed up twice is DRIFT-4's (content-addressed); one in no backup and no longer
    the file's is lost, DRIFT-5's; one kept only in other bytes is FORMAT-4's."""
    exact = "==" in step.expect
    wanted: list[bytes] = step.expect["==" if exact else "include"]
    sent = {"read": f"{FILENAMES.get(step.args[0], step.args[0])}.bak.*"}
    for content in wanted:
        count = found.count(content)
        if count != 1:
            failure = fail(
                sent,
                found,
                wanted,
                f"expected exactly one backup holding {plain(content)!r}, found {count}",
            )
            # a backup holds the bytes the store itself wrote: not canonical is FORMAT-4's
            kept = sum(only_not_canonical(content, backup) for backup in found) == 1
            lost = count == 0 and not kept and content != disk
            blamed = "DRIFT-4" if count > 1 else "FORMAT-4" if kept else "DRIFT-5" if lost else ""
            return replace(failure, blamed=(blamed,) if blamed else ())
    if exact and sorted(found) != sorted(wanted):
        return fail(sent, found, wanted, "backups differ")
    return None


def _threats_shown(block: object) -> list[str]:
    """Returns the entries of a snapshot ``block`` that show a threat as it is, where the spec
    shows a ``[BLOCKED:`` placeholder (SCAN-6)."""
    if not isinstance(block, str):
        return []
    return [
        text for text in shown_entries(block)
        if not text.startswith(BLOCKED_PREFIX) and find_threats(text)
    ]  # fmt: skip
