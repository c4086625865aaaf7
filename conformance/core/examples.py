"""Running the examples of SPEC.md: against the pure model, or against a backend.

One runner interprets the steps; a driver supplies the world: :class:`ModelDriver` the spec model (a
disagreement is a bug in SPEC.md), :class:`BackendDriver` fresh sessions on a root through the
contract, reading the files from the disk.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, cast

from memspec.conformance.core.diffs import first_difference, visible
from memspec.conformance.core.findings import DEFECT_CLAUSE, Refusal, Unverified
from memspec.conformance.transport.backend import Backend, BackendDefect, Session
from memspec.conformance.transport.wire import Answer, Fields
from memspec.spec import codes, model
from memspec.spec.codec import (
    FileState,
    classify_bytes,
    decode,
    encode_entries,
    only_not_canonical,
    parse_text,
)
from memspec.spec.drift_refusal import wrong_drift_clause
from memspec.spec.examples import Example, Step
from memspec.spec.operations import (
    Add,
    Batch,
    ExternalWrite,
    Load,
    Mutation,
    Patch,
    Remove,
    Replace,
)
from memspec.spec.requests import MUTATIONS, OP_FIELDS
from memspec.spec.root_files import file_kind
from memspec.spec.rules import Outcome, argument_error, decide, misapplied_write
from memspec.spec.snapshot import (
    BLOCKED_PREFIX,
    duplicates_difference,
    load_block,
    part_difference,
    shown_entries,
    snapshot_difference,
    state_difference,
)
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS, is_target
from memspec.spec.threats import find_threats
from memspec.spec.tool import (
    Observation,
    ToolCall,
    normative_result,
    offered_actions,
    parse_arguments,
    parse_call,
    result_problems,
    schema_offer,
    schema_parameters,
    unoffered_core_action,
    watched_target,
)

MODEL_ACTIONS = offered_actions({"patch"})


class Driver(Protocol):
    """A Driver is the world an example runs in: sessions, the disk, the backups."""

    def put(self, target: str, data: bytes | None) -> None:
        """Another writer puts ``data`` in the file (``None`` deletes it)."""
        ...

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Sends one contract request in ``session`` and returns the answer."""
        ...

    def disk(self, target: str) -> bytes | None:
        """Returns the file's bytes (``None`` when absent)."""
        ...

    def backups(self, target: str) -> list[bytes]:
        """Returns the contents of the target's backup files."""
        ...

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the entries the spec's rules give ``session`` now (``None``: none known)."""
        ...

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the file's bytes as the spec's rules leave them (``None``: absent, or no
        model is known)."""
        ...

    def spec_rule(self) -> str:
        """Returns the clause that decided the spec's refusal of the last mutation ("" when the
        spec accepts it, no one clause decides, or no model is known)."""
        ...


@dataclass(frozen=True)
class ExampleFailure:
    """An ExampleFailure says which step of which example went wrong, and how.

    ``sent`` is the request, ``received`` the answer, ``expected`` what the spec allows.
    """

    example: str
    clauses: tuple[str, ...]
    line: int
    step: str
    sent: Any
    received: Any
    expected: Any
    reason: str
    detail: str = ""
    """For a backend that broke (raised, died), the last line it printed, e.g. its exception."""
    blamed: tuple[str, ...] = ()
    """The clauses that own the difference, when a part of the expectation says so (a snapshot
    header's usage is SNAP-8's); empty: every clause the example cites."""
    completed: bool = False
    """Whether the example ran to its end, so that its clauses not blamed held."""
    stops: bool = False
    """Whether the example stops at this failure, its blamed clauses failed and the rest not
    verified (a refusal leaves the later steps nothing to show); else it goes on."""
    given: bool = False
    """Whether the failure is at a ``given`` step: the state the example judges was never set
    up, so none of its clauses is judged (the example reads not verified)."""
    unless_raised_anyway: tuple[str, ...] = ()
    """The clauses a raise also fails when the same kind of call does not raise on a fresh root
    (the raise is then the step's own, as on an undecodable file), for :func:`run_on_backend`
    to tell."""
    shown_threats: tuple[tuple[str, str], ...] = ()
    """The ``(target, entry)`` threats a snapshot blamed on SCAN-6 showed as they are; when the
    backend's own patterns accept one in a plain ``add``, the scan at load is not verified by
    them (:func:`run_on_backend` tells)."""
    clause_reasons: tuple[tuple[str, str], ...] = ()
    """Each blamed clause with the one line of the first difference that blamed it, when the
    example found several (:func:`_found_before`)."""
    unless_refused_alone: tuple[str, str, Fields] | None = None
    """For a refusal an example of the order of conditions expected and did not get: the clause
    that decides it, its code, and a request that meets that condition alone, on a fresh root;
    when the backend does not refuse that one either, the condition is missing altogether and
    its own clause fails, not the order (:func:`run_on_backend` tells)."""

    def to_json(self) -> dict[str, Any]:
        """Returns the failure as a JSON-ready record."""
        return {
            "example": self.example,
            "clauses": list(self.clauses),
            "line": self.line,
            "step": self.step,
            "sent": _plain(self.sent),
            "received": _plain(self.received),
            "expected": _plain(self.expected),
            "reason": self.reason,
        }

    def summary(self) -> str:
        """Returns the failure on one line: the example, the step and what went wrong."""
        detail = f" ({self.detail})" if self.detail else ""
        headline = self.reason.splitlines()[0] if self.reason else ""
        return f"example {self.example}: {self.step} → {headline}{detail}"

    def render(self) -> str:
        """Returns the failure as labelled blocks a person can act on."""
        return "\n".join(
            [
                f"example {self.example} ({', '.join(self.clauses)}), SPEC.md line {self.line}",
                f"  step:     {self.step}",
                f"  sent:     {show(self.sent)}",
                f"  received: {show(self.received)}",
                f"  expected: {show(self.expected)}",
                f"  why:      {self.reason}",
                *(
                    [f"  blames:   {', '.join(self.blamed)} alone (the rest of the example held)"]
                    if self.blamed and self.completed
                    else []
                ),
            ]
        )


def show(value: Any) -> str:
    """Returns ``value`` as readable JSON, every invisible or ambiguous character escaped
    (:func:`~memspec.conformance.core.diffs.visible`)."""
    return visible(json.dumps(_plain(value), ensure_ascii=False))


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return text if text.encode("utf-8") == value else {"hex": value.hex()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _fields(step: Step) -> Fields:
    """Returns a store step's arguments under their protocol field names (CONTRACT-13)."""
    return cast(Fields, dict(zip(OP_FIELDS.get(step.op, ()), step.args, strict=False)))


def describe(step: Step) -> str:
    """Returns a step as one readable line."""
    prefix = "" if step.session == "a" else f"@{step.session} "
    args = " ".join(show(a) for a in step.args)
    return f"{prefix}{step.op} {args}".rstrip()


def _field_clauses(step: Step, answer: Answer) -> tuple[str, ...]:
    """Returns the clauses that own a difference in an answer with the expected code: CONTRACT-2
    when the differing optional fields are of another type than the spec's (``usage`` a
    number), SNAP-11 when only the ``usage`` text differs; else ``()`` (the example's own)."""
    want = step.expect
    if answer.get("code") != want["code"]:
        return ()
    differing = [
        name for name, value in want.items()
        if name != "code" and name in answer and _plain(answer[name]) != value
    ]  # fmt: skip
    if differing and all(type(answer[name]) is not type(want[name]) for name in differing):
        return ("CONTRACT-2",)
    return ("SNAP-11",) if differing == ["usage"] else ()


def _missed_refusal(
    step: Step, answer: Answer, failure: ExampleFailure, driver: Driver
) -> tuple[str, ...]:
    """Returns the clause whose refusal a step expected and did not get (the backend accepted,
    or refused for another reason), as the spec decided it: ``ENTRY-3`` for content holding a
    delimiter line, whatever the example that sent it is about; ``()`` when no one clause
    decides it, the step expected ``OK``, or the example judges the order of conditions and
    the backend refused for another one (the example's own clauses then own the difference)."""
    if step.expect["code"] in (codes.OK, answer.get("code")):
        return ()
    if answer.get("code") != codes.OK and codes.PRECEDENCE_CLAUSES & set(failure.clauses):
        return ()
    rule = driver.spec_rule()
    return (rule,) if rule else ()


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
    fields = _fields(step)
    target = fields.get("target")
    if code == codes.E_TARGET:
        return "CONTRACT-4", code, {"target": target, "content": "User prefers tabs"}
    rule = driver.spec_rule()
    if step.op not in ("add", "replace") or rule not in CONTENT_RULES or not is_target(target):
        return None
    content = fields.get("new_content" if step.op == "replace" else "content")
    return rule, code, {"target": target, "content": content}


CONTENT_RULES = frozenset({"ENTRY-2", "ENTRY-3", "ENTRY-4", "ENTRY-7"})
"""The clauses that decide a refusal of content for what it is, whatever the file holds."""


def _outcome_problem(step: Step, answer: Answer) -> str | None:
    want = step.expect
    if answer.get("code") != want["code"]:
        return f"expected code {want['code']}, got {answer.get('code')}"
    for name, value in want.items():
        if name == "code" or name not in answer:
            continue
        if _plain(answer[name]) != value:
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
        fail = _failure_factory(example, step)
        try:
            if step.op == "put":
                driver.put(step.args[0], step.args[1])
                continue
            if step.session not in opened:
                opened.add(step.session)
                driver.request(step.session, "load", {})
            if step.op == "tool":
                problem = _run_tool_step(step, driver, fail, limits, example.clauses, offers)
            else:
                problem = _run_step(step, driver, fail, limits)
            if step.given and problem is None:
                problem = _given_state_problem(step, driver, fail)
        except Refusal as refused:
            if not partial:
                raise
            found = _found_before(partial, completed=False)  # what was found before stands
            text = f"{refused.text}; before it, {found.reason} ({', '.join(found.blamed)})"
            raise Refusal(refused.action, (*refused.clauses, *found.blamed), text) from None
        except BackendDefect as defect:
            # the evidence is the raise (CONTRACT-6) or the malformed answer (CONTRACT-2); a
            # raise where the example expects a refusal, a load or a read also misses what its
            # clauses ask of that step, if the raise is that step's own (run_on_backend asks)
            failure = fail(defect.sent, defect.received, step.expect, str(defect))
            failure = replace(failure, detail=defect.detail, blamed=(defect.clause,))
            crashed = defect.clause == DEFECT_CLAUSE and not step.given
            return replace(
                failure,
                unless_raised_anyway=()
                if not crashed or _expects_success(step)
                else example.clauses,
            )
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


Fail = Callable[[Any, Any, Any, str], ExampleFailure]


def _expects_success(step: Step) -> bool:
    """Whether a mutation step expects ``OK``, or a tool step a result that is not a failure."""
    expect = step.expect if isinstance(step.expect, dict) else {}
    result = expect.get("result") if isinstance(expect.get("result"), dict) else {}
    return expect.get("code") == codes.OK or (
        step.op == "tool" and result.get("success") is not False
    )


_ADD_TABS = ("add", {"target": "memory", "content": "User prefers tabs"})
CONTROL_CALLS: dict[str, tuple[tuple[str, Fields], ...]] = {
    "load": (),
    "add": (_ADD_TABS,),
    "replace": (_ADD_TABS, ("replace", {"target": "memory", "old_text": "tabs",
                                        "new_content": "User prefers spaces"})),
    "remove": (_ADD_TABS, ("remove", {"target": "memory", "old_text": "tabs"})),
    "patch": (_ADD_TABS, ("patch", {"target": "memory", "old_text": "tabs", "content": "spaces"})),
    "batch": (("batch", {"target": "memory", "operations": [dict(_ADD_TABS[1], action="add")]}),),
    "entries": (_ADD_TABS, ("entries", {"target": "memory"})),
    "snapshot": (_ADD_TABS, ("load", {}), ("snapshot", {"target": "memory"})),
    "tool_call": (("tool_call", {"arguments": json.dumps(dict(_ADD_TABS[1], action="add"))}),),
}  # fmt: skip
"""The plain calls that tell whether a backend that raised at a step raises at any call of that
kind: on a fresh root, a load and then these."""


def _raises_anyway(backend: Backend, root: Path, op: str) -> bool:
    """Whether ``backend`` raises at a plain call of kind ``op`` (:data:`CONTROL_CALLS`) on a
    fresh ``root``; an op with no plain call counts as raising anyway."""
    if op not in CONTROL_CALLS:
        return True
    try:
        with _probe(backend, root, {}) as probe:
            for name, fields in CONTROL_CALLS[op]:
                probe.request("a", name, dict(fields))
    except BackendDefect:
        return True
    return False


@contextlib.contextmanager
def _probe(backend: Backend, root: Path, limits: Mapping[str, int]) -> Iterator[BackendDriver]:
    """Yields a driver on the fresh ``root`` (created here) whose session ``a`` has loaded, for a
    call or two that tells how the backend behaves apart from the example; closes it after."""
    root.mkdir()
    probe = BackendDriver(backend, root, dict(limits))
    try:
        probe.request("a", "load", {})
        yield probe
    finally:
        probe.close()


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


def _failure_factory(example: Example, step: Step) -> Fail:
    def fail(sent: Any, received: Any, expected: Any, reason: str) -> ExampleFailure:
        return ExampleFailure(
            example.id, example.clauses, step.line, describe(step), sent, received, expected, reason
        )

    return fail


def _run_step(
    step: Step, driver: Driver, fail: Fail, limits: Mapping[str, int]
) -> ExampleFailure | None:
    if step.op == "load":
        driver.request(step.session, "load", {})
        return None
    if step.op in MUTATIONS:
        fields = _fields(step)
        target = str(fields.get("target"))
        before = (driver.disk(target), driver.spec_disk(target)) if target in TARGETS else None
        kind = classify_bytes(before[0], limits[target]).kind if before else ""
        answer = driver.request(step.session, step.op, fields)
        problem = _outcome_problem(step, answer)
        blamed = () if problem is None else _field_clauses(step, answer)
        if (problem is None or blamed == ("SNAP-11",)) and before and not step.given:
            # an answer as the spec's, or one whose usage differs because the file does
            misapplied = _misapplied(step, answer, before, limits[target], driver, fail)
            if misapplied is not None:
                return misapplied
        if problem is None:
            return None
        failure = fail({"op": step.op, **fields}, answer, step.expect, problem)
        if drifted := wrong_drift_clause(kind, answer, step.expect["code"]):
            return replace(failure, blamed=(drifted,), stops=True)
        if step.expect["code"] == codes.OK and answer.get("code") == codes.E_THREAT:
            # the scan refused ordinary text: the example's scan clauses own it, else the
            # corpus of ordinary text (SCAN-2); the entry it left out changes every later step
            scan = tuple(c for c in failure.clauses if c.startswith("SCAN-"))
            return replace(failure, blamed=scan or ("SCAN-2",), stops=True)
        if missed := _missed_refusal(step, answer, failure, driver):
            return replace(failure, blamed=missed, stops=True)  # the state went another way
        if alone := _alone(step, answer, failure, driver):
            return replace(failure, blamed=blamed, unless_refused_alone=alone)
        return replace(failure, blamed=blamed)
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
                failure, blamed=blamed or _state_clauses(failure), stops=blamed == ("DUP-4",)
            )
        return None
    if step.op == "snapshot":
        answer = driver.request(step.session, "snapshot", {"target": target})
        got = answer.get("snapshot")
        data = driver.disk(target)
        entries = model_entries(data)
        hidden = [e for e in entries or [] if find_threats(e)]
        problem = snapshot_difference(want, got, target, hidden)
        if problem is None:
            return None
        failure = fail({"op": "snapshot", "target": target}, got, want, problem)
        live = None if data is None else load_block(target, entries, limits[target], find_threats)
        blamed = (
            part_difference(want, got, target, hidden)
            or duplicates_difference(entries, got, target, limits[target], find_threats)
            or state_difference(want, got, live)
            or _state_clauses(failure)
        )
        shown = tuple((target, text) for text in _threats_shown(got)) if "SCAN-6" in blamed else ()
        return replace(failure, blamed=blamed, shown_threats=shown)
    if step.op == "disk":
        got = driver.disk(target)
        if got != want:
            why = "; ".join(filter(None, ("file bytes differ", first_difference(want, got))))
            failure = fail({"read": FILENAMES.get(target, target)}, got, want, why)
            canonical_only = only_not_canonical(want, got)
            return replace(
                failure, blamed=("FORMAT-4",) if canonical_only else _state_clauses(failure)
            )
        return None
    return _check_backups(step, driver.backups(target), driver.disk(target), fail)


OUTCOME_CLAUSES = frozenset({"CONTRACT-3", "CONTRACT-4"})
"""Clauses about an answer alone (its shape, its code): a difference in the entries, the
snapshot or the file is never theirs."""


def _state_clauses(failure: ExampleFailure) -> tuple[str, ...]:
    """Returns the clauses a difference in the stored state blames: the example's, without
    :data:`OUTCOME_CLAUSES` (``()``, every clause, when only those are cited)."""
    kept = tuple(clause for clause in failure.clauses if clause not in OUTCOME_CLAUSES)
    return kept if len(kept) < len(failure.clauses) else ()


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
    fields = _fields(step)
    target = str(fields.get("target"))
    if before[0] is None or model_entries(before[0]) != model_entries(before[1]):
        return None
    operation = cast(Mutation, ModelDriver.operation(step.session, step.op, fields))
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


Requester = Callable[[str, Fields], Answer]

ToolOffer = tuple[tuple[str, ...], bool]
"""The actions a session's tool schema offers and whether it offers the batch shape
(:func:`~memspec.spec.tool.schema_offer`)."""


def session_requester(session: Session) -> Requester:
    """Returns the :data:`Requester` that sends an op and its fields in ``session``."""
    return lambda op, fields: session.request(op, **fields)


def tool_offer(request: Requester) -> ToolOffer:
    """Returns what the tool schema of ``request``'s session offers: the actions of its
    ``action`` enum and whether it has ``operations`` (TOOL-2). The schema depends only on the
    session's claimed features, so it is asked once per session and handed to each
    :func:`judged_tool_call` in it."""
    return schema_offer(request("tool_schema", {}).get("schema"))


def judged_tool_call(
    request: Requester,
    read_disk: Callable[[str], bytes | None],
    arguments: str,
    limits: Mapping[str, int],
    *,
    offer: ToolOffer,
    scan: bool,
) -> tuple[Answer, list[str]]:
    """Sends one tool call through ``request`` and returns the op's answer and the spec judge's
    problems with the result (TOOL-5 to TOOL-13). ``offer`` is the session's :func:`tool_offer`;
    ``scan`` whether the backend claims ``threat-scan``."""
    actions, batch = offer
    target = watched_target(arguments)
    file = classify_bytes(read_disk(target), limits[target])
    before = request("entries", {"target": target})["entries"]
    answer = request("tool_call", {"arguments": arguments})
    after = request("entries", {"target": target})["entries"]
    seen = Observation(
        arguments, answer["result"], target, file, tuple(before), tuple(after),
        limits[target], actions, batch, scan=scan,
    )  # fmt: skip
    return answer, result_problems(seen)


def _run_tool_step(
    step: Step,
    driver: Driver,
    fail: Fail,
    limits: dict[str, int],
    clauses: tuple[str, ...],
    offers: dict[str, ToolOffer],
) -> ExampleFailure | None:
    """Runs a ``tool`` step: the listed result fields must be there and equal (a ``[BLOCKED:`` item
    standing for any placeholder of the file), and the result must pass the spec's judge on the
    example's own clauses. ``offers`` holds each session's :func:`tool_offer`."""
    arguments = step.args[0]
    sent = {"op": "tool_call", "arguments": arguments}
    request = functools.partial(driver.request, step.session)
    if step.session not in offers:
        offers[step.session] = tool_offer(request)
    hidden = unoffered_core_action(arguments, offers[step.session][0])
    if hidden is not None:
        raise Refusal(
            hidden,
            ("TOOL-2",),
            f"the tool schema offers no {hidden!r} (actions {list(offers[step.session][0])}), "
            f"though every tool offers core's add, replace and remove: what this example "
            f"verifies through a {hidden} call is not verified",
        )
    answer, problems = judged_tool_call(
        request, driver.disk, arguments, limits, offer=offers[step.session], scan=True
    )
    want = step.expect["result"]
    result = parse_arguments(answer.get("result"))
    if not isinstance(result, dict):
        return fail(sent, answer, want, "the result is not the text of a JSON object")
    for name, value in want.items():
        if name not in result or not _same_shown(result[name], value):
            why = f"expected {name} {value!r}, got {result.get(name)!r}"
            return replace(
                fail(sent, result, want, why), blamed=_field_owners(name, result, problems)
            )
    own = [problem for problem in problems if problem.split(":")[0] in clauses]
    if not own:
        return None
    blamed = tuple(dict.fromkeys(problem.split(":")[0] for problem in own))
    return replace(fail(sent, result, want, "; ".join(own)), blamed=blamed)


def _field_owners(name: str, result: dict[str, Any], problems: list[str]) -> tuple[str, ...]:
    """Returns the clauses of the spec judge's problems with the result field ``name`` (those
    that name it, and TOOL-13's when the field shows a threat): a field the judge finds wrong
    for its own clause (a ``usage`` from before the write is TOOL-7's) fails that clause, not
    every clause of the example; ``()`` when the judge found nothing about it."""
    shown = json.dumps(result.get(name), ensure_ascii=False)
    about = [
        problem.split(":")[0] for problem in problems
        if f"{name!r}" in problem or f" {name} " in problem
        or (problem.startswith("TOOL-13:") and find_threats(shown))
    ]  # fmt: skip
    return tuple(dict.fromkeys(about))


def _same_shown(got: Any, want: Any) -> bool:
    """Compares an expected result field; an expected ``[BLOCKED: FILE ...]`` string stands for
    any placeholder that starts ``[BLOCKED:`` and names FILE (SNAP-12)."""
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_same_shown(g, w) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, str) and want.startswith("[BLOCKED: ") and want.endswith(" ...]"):
        name = want.split()[1]
        return isinstance(got, str) and got.startswith("[BLOCKED:") and name in got
    return bool(_plain(got) == want)


def model_entries(data: bytes | None) -> list[str] | None:
    """Returns the entries a tolerant reader finds in ``data`` (``None`` if undecodable)."""
    text = None if data is None else decode(data)
    return None if text is None else parse_text(text)


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
                f"expected exactly one backup holding {_plain(content)!r}, found {count}",
            )
            # a backup holds the bytes the store itself wrote: not canonical is FORMAT-4's
            kept = sum(only_not_canonical(content, backup) for backup in found) == 1
            lost = count == 0 and not kept and content != disk
            blamed = "DRIFT-4" if count > 1 else "FORMAT-4" if kept else "DRIFT-5" if lost else ""
            return replace(failure, blamed=(blamed,) if blamed else ())
    if exact and sorted(found) != sorted(wanted):
        return fail(sent, found, wanted, "backups differ")
    return None


def _answer_of(outcome: Outcome) -> Answer:
    """Returns the answer a backend gives for the model's ``outcome``."""
    answer: Answer = {"ok": outcome.ok, "code": outcome.code}
    if outcome.matches:
        answer["matches"] = list(outcome.matches)
    if outcome.duplicate:
        answer["duplicate"] = True
    if outcome.usage is not None:
        answer["usage"] = outcome.usage
    return answer


@dataclass
class ModelDriver:
    """The spec model as a driver. ``last_read`` holds, per session and target, the entries the
    session last read while the file was readable, which it reports once it is not (READ-8)."""

    state: model.State
    last_read: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    rule: str = ""
    """The clause that decided the refusal of the last mutation (:attr:`Outcome.rule`)."""

    @classmethod
    def for_example(cls, example: Example) -> ModelDriver:
        """Returns a driver on an empty root with the example's limits."""
        limits = {**DEFAULT_LIMITS, **example.limits}
        return cls(model.initial_state(limits["memory"], limits["user"]))

    def put(self, target: str, data: bytes | None) -> None:
        """Steps an external write."""
        _, self.state = model.step(self.state, ExternalWrite(target, data))

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Steps the model and answers like a backend would."""
        if op == "entries":
            target = fields["target"]
            last = self.last_read.get((session, target), ())
            return {
                "ok": True,
                "code": "OK",
                "entries": list(model.session_entries(self.state, target, last)),
            }
        if op == "snapshot":
            return {
                "ok": True,
                "code": "OK",
                "snapshot": model.snapshot_of(self.state, session, fields["target"]),
            }
        if op == "tool_schema":
            parameters = schema_parameters(MODEL_ACTIONS, batch=True)
            schema = {"name": "memory", "description": "the model's tool", "parameters": parameters}
            return {"ok": True, "code": "OK", "schema": schema}
        if op == "tool_call":
            return {"ok": True, "code": "OK", "result": self._tool_call(session, fields)}
        operation = self.operation(session, op, fields)
        outcome, self.state = model.step(self.state, operation)
        self.rule = outcome.rule
        self._remember_reads(session, operation)
        return _answer_of(outcome)

    @staticmethod
    def operation(session: str, op: str, fields: Fields) -> Load | Mutation:
        """Returns the model's operation for a ``load`` or a mutation request."""
        return {
            "load": lambda: Load(session),
            "add": lambda: Add(fields["target"], fields["content"], session),
            "replace": lambda: Replace(
                fields["target"], fields["old_text"], fields["new_content"], session
            ),
            "remove": lambda: Remove(fields["target"], fields["old_text"], session),
            "patch": lambda: Patch(
                fields["target"], fields["old_text"], fields["content"], session
            ),
            "batch": lambda: Batch(fields["target"], fields["operations"], session),
        }[op]()

    def _tool_call(self, session: str, fields: Fields) -> str:
        """Answers a tool call with the spec's normative result (TOOL-5 to TOOL-13): the model
        claims every feature, so it offers every action, the batch shape and the scan."""
        arguments = fields["arguments"]
        parsed = parse_call(arguments, MODEL_ACTIONS, batch=True)
        target = parsed.target if isinstance(parsed, ToolCall) else watched_target(arguments)
        limit = model.limit_of(self.state, target)
        outcome = None
        before = self._entries(session, target)
        if isinstance(parsed, ToolCall):
            operation = replace(parsed.operation, session=session)
            if argument_error(operation) is None:
                before = model.entries_on_disk(self.state, target) or before
            outcome, self.state = model.step(self.state, operation)
            self._remember_reads(session, operation)
        after = self._entries(session, target)
        result = normative_result(
            parsed, outcome, before, after, limit, target=target, actions=MODEL_ACTIONS, scan=True
        )
        return json.dumps(result, ensure_ascii=False)

    def _entries(self, session: str, target: str) -> tuple[str, ...]:
        last = self.last_read.get((session, target), ())
        return tuple(model.session_entries(self.state, target, last))

    def _remember_reads(self, session: str, operation: Load | Mutation) -> None:
        """Records what ``session`` read from readable files in the step just taken: both files
        at a load, the mutated one when the arguments passed and the store read it."""
        if isinstance(operation, Load):
            targets: tuple[str, ...] = TARGETS
        elif argument_error(operation) is None:
            targets = (operation.target,)
        else:
            targets = ()
        for target in targets:
            entries = model.entries_on_disk(self.state, target)
            if entries is not None:
                self.last_read[(session, target)] = entries

    def disk(self, target: str) -> bytes | None:
        """Returns the model's file bytes."""
        return model.disk(self.state, target)

    def backups(self, target: str) -> list[bytes]:
        """Returns the backups the model requires."""
        return sorted(model.backups_of(self.state, target))

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the session's entries in the model."""
        return list(self._entries(session, target))

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the model's file bytes."""
        return self.disk(target)

    def spec_rule(self) -> str:
        """Returns the clause that decided the model's last refusal."""
        return self.rule


@dataclass
class BackendDriver:
    """A backend as a driver: sessions opened lazily on one fresh root."""

    backend: Backend
    root: Path
    limits: Mapping[str, int]
    sessions: dict[str, Session] = field(default_factory=dict)
    model: ModelDriver | None = None
    """The spec model stepped beside the backend, to tell an acknowledged write that is not in
    the file (ATOMIC-5)."""
    unwritten: list[str] = field(default_factory=list)
    """Each acknowledged change after which the file still held the model's state from before."""
    stale: list[str] = field(default_factory=list)
    """Each acknowledged change written from the session's earlier read, not from the file."""

    def put(self, target: str, data: bytes | None) -> None:
        """Writes (or deletes) the file directly, as an editor would."""
        path = self.root / FILENAMES[target]
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)
        if self.model is not None:
            self.model.put(target, data)

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Sends ``op`` in ``session``, opening the session first if needed."""
        if session not in self.sessions:
            self.sessions[session] = self.backend.open(self.root, self.limits)
        answer = self.sessions[session].request(op, **fields)
        if self.model is not None:
            self._follow(self.model, session, op, fields, answer)
        return answer

    def _follow(
        self, shadow: ModelDriver, session: str, op: str, fields: Fields, answer: Answer
    ) -> None:
        """Steps the model too, and notes an acknowledged change whose file is not the model's:
        one answered as the model answers it whose file holds what it held before (ATOMIC-5:
        the result of an ``OK`` is already in the file), or a change answered and written as the
        model makes it of the entries the session last read, not of the file (LOCK-2). Any other
        difference is the store's own idea of the change, the example's clauses' business."""
        target = str(fields.get("target"))
        if op not in MUTATIONS or target not in TARGETS:
            shadow.request(session, op, fields)
            return
        limit = model.limit_of(shadow.state, target)
        data = shadow.disk(target)
        file, before = classify_bytes(data, limit), model_entries(data)
        seen = shadow.last_read.get((session, target), ())
        expected = shadow.request(session, op, fields)
        written = model_entries(self.disk(target))
        modelled = model_entries(shadow.disk(target))
        if _same_outcome(answer, expected) and written == modelled:
            return
        if answer.get("code") == codes.OK and _same_outcome(answer, expected) and written == before:
            self.unwritten.append(
                f"{op} {target} answered OK, but {FILENAMES[target]} then still held what it "
                "held before (ATOMIC-5)"
            )
            return
        operation = cast(Mutation, shadow.operation(session, op, fields))
        # a refusal writes nothing, so it cannot show which entries it was decided on
        changed = answer.get("code") == codes.OK and written != before
        # nor can a session that read nothing be told from one that reads a file as empty
        stale = list(seen) != before and bool(before or seen)
        if not changed or not stale or argument_error(operation) is not None:
            return
        # the file's kind with the entries read earlier, or the earlier entries as they were
        for view in (FileState(file.kind, seen), classify_bytes(encode_entries(seen), limit)):
            outcome, result = decide(operation, view, limit)
            kept = before if result is None else list(result)
            if _same_outcome(answer, _answer_of(outcome)) and written == kept:
                self.stale.append(
                    f"{op} {target} answered {answer.get('code')} and wrote what it makes of the "
                    f"entries this session last read, {list(seen)}, not of the file's {before} "
                    "(LOCK-2)"
                )
                return

    def disk(self, target: str) -> bytes | None:
        """Reads the file's bytes from the disk."""
        path = self.root / FILENAMES.get(target, str(target))
        return path.read_bytes() if path.is_file() else None

    def backups(self, target: str) -> list[bytes]:
        """Reads every ``NAME.bak.<suffix>`` file of the target (CONTRACT-11, DRIFT-3)."""
        name = FILENAMES.get(target, str(target))
        return sorted(
            p.read_bytes()
            for p in self.root.iterdir()
            if file_kind(p.name, name) == "backup" and p.is_file()
        )

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the session's entries in the model stepped beside the backend, if any."""
        return None if self.model is None else self.model.spec_entries(session, target)

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the file's bytes in the model stepped beside the backend, if any."""
        return None if self.model is None else self.model.disk(target)

    def spec_rule(self) -> str:
        """Returns the clause that decided the last refusal of the model beside the backend."""
        return "" if self.model is None else self.model.spec_rule()

    def close(self) -> None:
        """Closes every session (errors of a broken backend are ignored here)."""
        for session in self.sessions.values():
            with contextlib.suppress(Exception):
                session.close()


def _same_outcome(answer: Answer, expected: Answer) -> bool:
    """Whether ``answer`` says what the model's ``expected`` says: the code, whether the text was
    a duplicate, and the usage where the backend gives one."""
    return (
        answer.get("code") == expected["code"]
        and bool(answer.get("duplicate")) == bool(expected.get("duplicate"))
        and answer.get("usage", expected.get("usage")) == expected.get("usage")
    )


def run_on_model(example: Example) -> ExampleFailure | None:
    """Runs ``example`` against the spec model (a failure is a bug in SPEC.md)."""
    return run_example(example, ModelDriver.for_example(example))


def run_on_backend(
    example: Example, backend: Backend, root: Path | None = None
) -> ExampleFailure | None:
    """Runs ``example`` against ``backend`` on a fresh root (a temporary one by default).

    Raises Unverified when a step that expects a path other than a plain ``add`` (a replace, a
    patch, a batch item) to refuse a threat is let through, and the backend also accepts that
    text in a plain ``add``: its patterns do not know it (SCAN-2's business), so whether the
    path is scanned cannot be told with it."""
    with tempfile.TemporaryDirectory(prefix="memspec-") as scratch:
        failure, driver = _run_once(example, backend, root or Path(scratch))
        cause = driver.unwritten[:1] or driver.stale[:1]
        if failure is not None and cause:  # what followed read a file gone wrong before
            clause = "ATOMIC-5" if driver.unwritten else "LOCK-2"
            reason = f"{cause[0]}; then {failure.reason}"
            failure = replace(failure, reason=reason, blamed=(clause,), completed=False)
        elif failure is not None and failure.unless_raised_anyway:
            sent = failure.sent if isinstance(failure.sent, dict) else {}
            if not _raises_anyway(backend, Path(scratch) / "control", str(sent.get("op"))):
                blamed = (*failure.blamed, *failure.unless_raised_anyway)
                failure = replace(failure, blamed=tuple(dict.fromkeys(blamed)))
        elif failure is not None and failure.unless_refused_alone:
            rule, code, fields = failure.unless_refused_alone
            with _probe(backend, Path(scratch) / "alone", example.limits) as probe:
                alone = probe.request("a", "add", dict(fields))
            if alone.get("code") != code:  # the condition is missing, not out of order
                reason = f"{failure.reason}; alone, add {fields} answered {alone.get('code')} too"
                failure = replace(failure, blamed=(rule,), reason=reason, stops=True)
        elif failure is not None and failure.given:
            raise Unverified(
                f"example {example.id}: its given step at line {failure.line} ({failure.step}) "
                f"did not set up what the example judges: {failure.reason}; the clauses that own "
                "that step judge it"
            )
        if failure is not None and not cause:
            failure = _unless_the_same_in_one_session(
                failure, example, backend, Path(scratch) / "one-session"
            )
        unknown = _unknown_threat(failure, backend, Path(scratch) / "probe", example)
        if failure is not None and unknown is None:
            failure = _unless_unknown_at_load(failure, backend, Path(scratch) / "load", example)
    if unknown is not None:
        raise Unverified(
            f"example {example.id}: the backend accepts {unknown!r} in a plain add too: its "
            "threat patterns do not know it (SCAN-2), so whether this path is scanned is not "
            "verified"
        )
    return failure


def _run_once(
    example: Example, backend: Backend, root: Path
) -> tuple[ExampleFailure | None, BackendDriver]:
    """Runs ``example`` on ``backend`` at ``root``; returns what it found and the closed driver
    (which keeps what it saw of unwritten and stale files)."""
    model = ModelDriver.for_example(example)
    driver = BackendDriver(backend, root, dict(example.limits), model=model)
    try:
        return run_example(example, driver), driver
    finally:
        driver.close()


SESSION_CLAUSES = frozenset({"LOCK-2"})
"""Clauses about what one session does after another session's write: a difference that one
session alone shows too is not about them."""


def _unless_the_same_in_one_session(
    failure: ExampleFailure, example: Example, backend: Backend, root: Path
) -> ExampleFailure:
    """Returns ``failure`` without :data:`SESSION_CLAUSES` when the example, its steps all run in
    one session on a fresh ``root``, fails at the same step with the same answer: the store does
    that with no other session about (a store that never detects a duplicate refuses the
    duplicate of LOCK-2's example for the limit), which the step's own rule judges. Raises
    Unverified when nothing else is blamed."""
    blamed = failure.blamed or failure.clauses
    if not SESSION_CLAUSES & set(blamed) or len({step.session for step in example.steps}) < 2:
        return failure
    alone = replace(example, steps=tuple(replace(step, session="a") for step in example.steps))
    root.mkdir()
    again, _ = _run_once(alone, backend, root)
    if again is None or (again.line, again.received) != (failure.line, failure.received):
        return failure
    kept = tuple(clause for clause in blamed if clause not in SESSION_CLAUSES)
    if not kept:
        raise Unverified(
            f"example {example.id}: {failure.step} → {failure.reason.splitlines()[0]}, and the "
            "same in one session with no other about: not a stale view of another session's "
            "write (LOCK-2); the step's own rule is judged by its own examples"
        )
    return replace(failure, blamed=kept)


def _threats_shown(block: object) -> list[str]:
    """Returns the entries of a snapshot ``block`` that show a threat as it is, where the spec
    shows a ``[BLOCKED:`` placeholder (SCAN-6)."""
    if not isinstance(block, str):
        return []
    return [
        text for text in shown_entries(block)
        if not text.startswith(BLOCKED_PREFIX) and find_threats(text)
    ]  # fmt: skip


def _unless_unknown_at_load(
    failure: ExampleFailure, backend: Backend, root: Path, example: Example
) -> ExampleFailure:
    """Returns ``failure`` without SCAN-6 when a threat it saw shown as it is at load is one the
    backend accepts in a plain add: its patterns do not know it (SCAN-2's business), so whether
    the load scans is not told by it. Raises Unverified when nothing else is blamed."""
    if "SCAN-6" not in failure.blamed or not failure.shown_threats:
        return failure
    with _probe(backend, root, example.limits) as probe:
        unknown = next(
            (
                text for target, text in failure.shown_threats
                if probe.request("a", "add", {"target": target, "content": text}).get("code")
                == codes.OK
            ),
            None,
        )  # fmt: skip
    if unknown is None:
        return failure
    said = (
        f"the backend accepts {unknown!r} in a plain add too: its threat patterns do not know "
        "it (SCAN-2), so whether the scan at load runs is not verified"
    )
    rest = tuple(clause for clause in failure.blamed if clause != "SCAN-6")
    if not rest:
        raise Unverified(f"example {example.id}: {said}")
    return replace(failure, blamed=rest, completed=False, reason=f"{failure.reason}; {said}")


def _unknown_threat(
    failure: ExampleFailure | None, backend: Backend, root: Path, example: Example
) -> str | None:
    """Returns the threat of a failed non-add step that the backend accepts in a plain add: one
    a replace, patch or batch item let through."""
    sent = failure.sent if failure is not None else None
    if not isinstance(sent, dict) or failure is None:
        return None
    expected = failure.expected if isinstance(failure.expected, dict) else {}
    if expected.get("code") == codes.E_THREAT and sent.get("op") not in ("add", None):
        items = sent.get("operations") if isinstance(sent.get("operations"), list) else [sent]
        texts = [
            text for item in items if isinstance(item, dict)
            for text in (item.get("content"), item.get("new_content"))
            if isinstance(text, str) and find_threats(text)
        ]  # fmt: skip
    else:
        return None
    with _probe(backend, root, example.limits) as probe:
        for text in texts:
            answer = probe.request("a", "add", {"target": sent.get("target"), "content": text})
            if answer.get("code") == codes.OK:
                return text
    return None
