"""Generated programs through the memory tool: every call's result judged (TOOL-5 to TOOL-12).

The fuzz strategies' mutation requests are turned into the argument text a model would send, and
each result is judged by :func:`~memspec.conformance.examples.tool_calls.judged_tool_call`.
"""

from __future__ import annotations

import json
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
from memspec.conformance.transport.wire import BatchItem, Request
from memspec.fuzz.roots import FuzzRoot
from memspec.fuzz.strategies import claimed_ops, requests

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
    overwrote as TOOL-5 to TOOL-12 require."""
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
                answer, problems = judged_tool_call(
                    send, world.disk, arguments, TOOL_LIMITS,
                    offer=offers[name], scan="threat-scan" in features,
                )  # fmt: skip
                answered = f"session {name} sent {arguments}, the tool answered "
                # TOOL-5 to TOOL-12: the result of each call passes the judge.
                stop_on(clause_violations(problems, answered + str(answer["result"])[:600]))

    run.run(run.apply(results_are_judged))
