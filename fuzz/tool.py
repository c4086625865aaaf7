"""Generated programs through the memory tool: every call's result judged (TOOL-5 to TOOL-12).

The fuzz strategies' mutation requests are turned into the argument text a model would send, and
each result is judged by :func:`~memspec.conformance.examples.tool_calls.judged_tool_call`. A
deviation from the model that the same request, sent as the direct store operation on a root in
the same state, shows too is the store operation's, not the tool's (:func:`tools_own`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypedDict

from hypothesis import given
from hypothesis import strategies as st

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.search import plan
from memspec.conformance.examples.tool_calls import (
    ToolOffer,
    clause_violations,
    judged_tool_call,
    session_requester,
    stop_on,
    tool_offer,
)
from memspec.conformance.transport.backend import BackendDefect
from memspec.conformance.transport.wire import Answer, BatchItem, Request, fields_of
from memspec.fuzz.roots import FuzzRoot
from memspec.fuzz.strategies import claimed_ops, requests
from memspec.spec import codes
from memspec.spec.codec import classify_bytes, usage
from memspec.spec.requests import mutation_of
from memspec.spec.snapshot import usage_label
from memspec.spec.targets import TARGETS
from memspec.spec.tool import (
    ResultProblem,
    ToolCall,
    expected_outcome,
    parse_arguments,
)

TOOL_LIMITS = {"memory": 60, "user": 40}
"""Small limits, so that generated programs reach a full store within a few calls."""


class ToolArguments(TypedDict, total=False):
    """The memory tool's arguments as a model sends them (TOOL-5)."""

    action: str
    target: str
    content: str
    old_text: str
    operations: list[BatchItem]


def tool_arguments(request: Request) -> str:
    """Returns the argument text a model sends for a mutation request: the action and the
    target, ``content`` for the new text (``new_content`` of a replace), ``old_text``, or the
    batch's ``operations`` (TOOL-5)."""
    op = request["op"]
    arguments: ToolArguments = {"target": request["target"]}
    if op == "batch":
        arguments["operations"] = request["operations"]
    else:
        arguments["action"] = op
        if "old_text" in request:
            arguments["old_text"] = request["old_text"]
        content = request.get("new_content", request.get("content"))
        if content is not None:
            arguments["content"] = content
    return json.dumps(arguments, ensure_ascii=False)


@check(
    "TOOL-5", "TOOL-7", "TOOL-9", "TOOL-10", "TOOL-11", "TOOL-12", features=("tool",),
    id="tool.generated_calls_are_judged",
)  # fmt: skip
def generated_calls_are_judged(ctx: CheckContext) -> None:
    """Programs of generated mutations, sent as tool calls in two sessions on small limits: each
    result is the store operation's, shows the live state, and lists, matches and says what it
    overwrote as TOOL-5 to TOOL-12 require. A deviation from the model that the direct store
    operation shows too is the store's, not the tool's (:func:`tools_own`)."""
    features = ctx.claimed_features()
    run = plan(ctx)
    limits = tuple(TOOL_LIMITS.values())
    program = st.lists(
        st.tuples(st.sampled_from("ab"), requests(limits=limits, **claimed_ops(features))),
        min_size=1,
        max_size=8,
    )

    @given(calls=program)
    def results_are_judged(calls: list[tuple[str, Request]]) -> None:
        with FuzzRoot(ctx, TOOL_LIMITS) as world:
            offers: dict[str, ToolOffer] = {}
            for name, request in calls:
                arguments = tool_arguments(request)
                send = session_requester(world.session(name))
                if name not in offers:
                    offers[name] = tool_offer(send)
                files: dict[str, bytes | None] = {t: world.disk(t) for t in TARGETS}
                answer, problems = judged_tool_call(
                    send, world.disk, arguments, TOOL_LIMITS,
                    offer=offers[name], scan="threat-scan" in features,
                )  # fmt: skip
                if any(problem.clause in STORE_CLAUSES for problem in problems):
                    problems = tools_own(world, name, request, files, answer, problems)
                answered = f"session {name} sent {arguments}, the tool answered "
                # TOOL-5 to TOOL-12: the result of each call passes the judge.
                stop_on(clause_violations(problems, answered + str(answer["result"])[:600]))

    run.run(run.apply(results_are_judged))


STORE_CLAUSES = frozenset({"TOOL-5", "TOOL-7", "LIMIT-6"})
"""The clauses whose problems compare a call's effect with the model's (TOOL-5: the success and
the entries after it; TOOL-7: the usage and count it reports against those entries, LIMIT-6 when
that usage states another limit): a deviation the store operation itself shows is found there
too, and is the store's."""


def tools_own(
    world: FuzzRoot,
    session: str,
    request: Request,
    files: Mapping[str, bytes | None],
    answer: Answer,
    problems: Sequence[ResultProblem],
) -> list[ResultProblem]:
    """Returns ``problems`` without those of :data:`STORE_CLAUSES` that the store operation shows
    too. ``request`` is sent as the direct store operation in a fresh session on a fresh root
    holding ``files`` (the root's files before the tool call ``session`` sent), under the same
    limits: a tool call is its store operation (TOOL-5), so where that answers the tool result's
    ``success``, leaves the entries the tool left or reports the result's ``usage``, the
    deviation from the model is the operation's own, which its examples and the state machine
    judge, not the tool's. Where the entries the operation leaves are themselves its deviation,
    the live state TOOL-7 measures a result against is the store's too: a ``usage`` or
    ``entry_count`` that is the model's for the call is then the tool's right answer. For example
    a store that splits entries on every ``§`` leaves the same entries whether the model or the
    harness asks, and one that applies the memory limit to USER.md reports the same usage; a tool
    layer that reports the usage from before the write, or runs another operation, still differs
    from the operation and is blamed."""
    result = parse_arguments(answer.get("result"))
    if not isinstance(result, dict):
        return list(problems)
    target, limit = request["target"], world.limits[request["target"]]
    try:
        after = world.entries(session, target)
        with FuzzRoot(world.ctx, world.limits) as control:
            for name, data in files.items():
                control.put(name, data)
            direct = control.request("a", request["op"], **fields_of(request))
            direct_after = control.entries("a", target)
            store_usage = direct.get("usage") or _usage_now(control, target)
    except BackendDefect:  # the direct operation broke: it cannot tell whose deviation this is
        return list(problems)
    call = ToolCall(mutation_of(request["op"], fields_of(request)))
    _, owed = expected_outcome(call, classify_bytes(files[target], limit), limit)
    # the entries after the call deviate from the model's, and the store operation leaves the same
    store_entries = owed is not None and direct_after == list(after) != list(owed)
    owed_usage = usage_label(usage(owed), limit) if owed is not None else None
    store_shows_usage = (store_usage is not None and store_usage == result.get("usage")) or (
        store_entries and result.get("usage") == owed_usage
    )
    same = {
        ("TOOL-5", "success"): direct.get("ok") == result.get("success"),
        ("TOOL-5", None): direct_after == list(after),
        ("TOOL-7", "usage"): store_shows_usage,
        ("LIMIT-6", "usage"): store_shows_usage,
        ("TOOL-7", "entry_count"): store_entries and result.get("entry_count") == len(owed or ()),
    }
    kept = [problem for problem in problems if not same.get((problem.clause, problem.field))]
    if len(kept) < len(problems):
        figures = world.ctx.figures
        figures[STORE_DEVIATIONS] = int(figures.get(STORE_DEVIATIONS, 0)) + 1
    return kept


PROBE = "memspec control probe"
"""An entry no generated program writes, added and removed again on a control root to learn the
usage the store reports of the state it returns to."""


def _usage_now(control: FuzzRoot, target: str) -> str | None:
    """Returns the usage the store reports of ``target``'s state on the ``control`` root, as the
    answer of a remove that brings it back there after :data:`PROBE` was added (SNAP-11: the
    usage of the target as the operation left it); ``None`` when the store does not say, or the
    probe does not fit. A refusal decided from the arguments (``E_EMPTY``) carries no usage, so
    only this tells the limit a store applies to an empty target."""
    added = control.request("a", "add", target=target, content=PROBE)
    if added.get("code") != codes.OK or added.get("duplicate"):
        return None
    removed = control.request("a", "remove", target=target, old_text=PROBE)
    said = removed.get("usage") if removed.get("code") == codes.OK else None
    return said if isinstance(said, str) else None


STORE_DEVIATIONS = "calls whose deviation the store operation shows too"
"""The figure that counts the calls :func:`tools_own` found the store's, not the tool's."""
