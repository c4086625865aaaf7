"""Tool calls of the examples and of the tool checks: a call sent through a session, its result
judged by the spec's judge of tool results (TOOL-5 to TOOL-13), the violations of what the judge
found, one per clause, and a ``tool`` step of an example."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from memspec.conformance.examples.failure import ExampleFailure, Fail, plain
from memspec.conformance.examples.world import Driver
from memspec.conformance.transport.backend import Session
from memspec.conformance.transport.wire import Answer, Fields
from memspec.conformance.verdict.findings import ClauseFailures, Refusal, Violation
from memspec.spec.codec import (
    classify_bytes,
)
from memspec.spec.examples import Step
from memspec.spec.problems import Problem
from memspec.spec.tool import (
    Observation,
    ResultProblem,
    parse_arguments,
    result_problems,
    schema_offer,
    unoffered_core_action,
    watched_target,
)

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
) -> tuple[Answer, list[ResultProblem]]:
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


def clause_violations(problems: Sequence[Problem], context: str) -> list[Violation]:
    """Returns one violation per clause the spec's judge found broken, in the order of each
    clause's first problem: the texts of that clause's problems, then ``context`` (what was
    sent, what came back) in parentheses."""
    texts: dict[str, list[str]] = {}
    for problem in problems:
        texts.setdefault(problem.clause, []).append(problem.text)
    return [Violation(clause, f"{'; '.join(found)} ({context})") for clause, found in texts.items()]


def stop_on(violations: Sequence[Violation]) -> None:
    """Raises ``violations`` at once, as a step that stops its check does (a Hypothesis search
    shrinks on the raise): the one violation, or several in one :class:`ClauseFailures`, so that
    each clause is recorded broken on its own; nothing when there is none."""
    if len(violations) == 1:
        raise violations[0]
    if violations:
        raise ClauseFailures(violations, completed=False)


def run_tool_step(
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
            return replace(fail(sent, result, want, why), blamed=_field_owners(name, problems))
    own = [problem for problem in problems if problem.clause in clauses]
    if not own:
        return None
    blamed = tuple(dict.fromkeys(problem.clause for problem in own))
    return replace(fail(sent, result, want, "; ".join(map(str, own))), blamed=blamed)


def _field_owners(name: str, problems: Sequence[ResultProblem]) -> tuple[str, ...]:
    """Returns the clauses of the spec judge's problems about the result field ``name``
    (:attr:`~memspec.spec.tool.ResultProblem.field`): a field the judge finds wrong for its own
    clause (a ``usage`` from before the write is TOOL-7's, a field showing threat text
    TOOL-13's) fails that clause, not every clause of the example; ``()`` when the judge found
    nothing about it."""
    return tuple(dict.fromkeys(problem.clause for problem in problems if problem.field == name))


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
    return bool(plain(got) == want)
