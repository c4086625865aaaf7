"""The reference memory tool: the function a model calls, over the reference store (TOOL).

:func:`schema` is the spec's normative parameters with this implementation's descriptions (TOOL-2,
TOOL-3); :func:`call` parses the argument text with the spec's
:func:`~memspec.spec.tool.parse_call`, runs the operation and answers with the spec's normative
result plus wording a model can act on (TOOL-5 to TOOL-13).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from memspec.spec import codes
from memspec.spec.operations import Batch, Mutation
from memspec.spec.rules import Outcome
from memspec.spec.tool import (
    TOOL_NAME,
    Malformed,
    ToolCall,
    normative_result,
    offered_actions,
    parse_call,
    refusal_error,
    schema_parameters,
    watched_target,
)


class ToolStore(Protocol):
    """What a tool call needs of the store it runs on (``reference_impl/store.py``'s ``Store``):
    its claimed features and limits, its entries, one mutation, and the decision behind it."""

    @property
    def features(self) -> Iterable[str]: ...

    @property
    def limits(self) -> Mapping[str, int]: ...

    @property
    def last_decision(self) -> tuple[Outcome, tuple[str, ...]]: ...

    def entries(self, target: str) -> list[str]: ...

    def mutate(self, op: Mutation) -> dict[str, Any]: ...


DESCRIPTIONS = {
    "action": "The change to make (single-change shape): add a new entry; replace a whole entry; "
    "patch a span inside one entry; remove an entry.",
    "target": "'memory' for your own notes, 'user' for what you know about the user.",
    "content": "The new entry (add), the whole new text (replace) or the new span (patch).",
    "old_text": "A short, unique part of the existing entry (replace, patch, remove); for patch, "
    "exactly the span to change.",
    "operations": "Several changes applied all-or-nothing in one call, the limit checked once on "
    "the result: each item {action, content?, old_text?}. Prefer it for more than one change, "
    "and to make room: remove or shorten and add in the same call.",
}

_DONE = {
    "add": "Entry added.",
    "replace": "Entry replaced.",
    "patch": "Entry patched.",
    "remove": "Entry removed.",
    "batch": "All operations applied.",
}


def schema(features: Iterable[str]) -> dict[str, Any]:
    """Returns the tool's schema: name ``memory``, guidance on what to save and what to skip,
    batch-first advice where batch is claimed, and the spec's parameters (TOOL-2, TOOL-3)."""
    claimed = frozenset(features)
    batch = "batch" in claimed
    parameters = schema_parameters(offered_actions(claimed), batch)
    for name, spec in parameters["properties"].items():
        spec["description"] = DESCRIPTIONS[name]
    how = (
        "Make all your changes in one call with 'operations' (applied together, the limit "
        "checked on the result). "
        if batch
        else ""
    )
    description = (
        "Save durable facts to persistent memory; it is shown in every future session, so keep "
        "each entry to one compact fact. Save: the user's preferences and corrections, stable "
        "facts about their environment, conventions and tool quirks. Skip: task progress, "
        "temporary state, trivial or easily re-discovered facts, raw data. Targets: 'user' is "
        "who the user is, 'memory' is your own notes. "
        f"{how}When memory is full, the answer lists the entries: remove or shorten some first. "
        "Each answer gives the live usage and entry count."
    )
    return {"name": TOOL_NAME, "description": description, "parameters": parameters}


def call(store: ToolStore, arguments: object) -> str:
    """Returns the JSON result text for one call; never raises for any argument text (TOOL-6)."""
    claimed = frozenset(store.features)
    actions = offered_actions(claimed)
    scan = "threat-scan" in claimed
    parsed = parse_call(arguments, actions, "batch" in claimed)
    if isinstance(parsed, list):
        target = watched_target(arguments)
        after = store.entries(target)
        result = normative_result(
            parsed, None, after, after, store.limits[target],
            target=target, actions=actions, scan=scan,
        )  # fmt: skip
        result["error"] = _malformed_error(parsed)
        return json.dumps(result, ensure_ascii=False)
    answer = store.mutate(parsed.operation)  # the store operation the call names (TOOL-5)
    outcome, before = store.last_decision
    after = store.entries(parsed.target)
    result = normative_result(
        parsed, outcome, before, after, store.limits[parsed.target],
        target=parsed.target, actions=actions, scan=scan,
    )  # fmt: skip
    result = {"success": result.pop("success"), "target": parsed.target, **result}
    if outcome.ok:
        result["message"] = _success_message(parsed, answer)
    else:
        result["error"] = _refusal_message(outcome, answer, actions)
    if answer.get("backup"):
        result["backup"] = answer["backup"]
    return json.dumps(result, ensure_ascii=False)


def _success_message(parsed: ToolCall, answer: dict[str, Any]) -> str:
    op = parsed.operation
    name = "batch" if isinstance(op, Batch) else type(op).__name__.lower()
    done = _DONE[name]
    if answer.get("duplicate"):
        done = "That exact entry is already stored; nothing changed."
    return f"{done} This update is complete; do not repeat it."


def _refusal_message(outcome: Outcome, answer: dict[str, Any], actions: tuple[str, ...]) -> str:
    """The refusal's normative part (code, failing item, actions that free room) and the
    store's explanation (TOOL-10, TOOL-12); for a limit, how to make room."""
    text = f"{refusal_error(outcome, actions)}. {answer.get('message', '')}".strip()
    text = text if text.endswith(".") else text + "."
    if outcome.code == codes.E_LIMIT:
        text += (
            " The entries are in current_entries: remove stale ones or shorten some, then retry"
            " (one batch can do both)."
        )
    if outcome.code == codes.E_NOMATCH:
        text += " Use a short part of one of the current entries as old_text."
    return text


def _malformed_error(problems: list[Malformed]) -> str:
    """Words for the first problem of a malformed call: what is wrong and what to send."""
    problem = problems[0]
    wanted = ", ".join(problem.expected)
    if problem.field == "arguments":
        text = (
            "The arguments are not a JSON object. Send an object such as "
            '{"action": "add", "target": "memory", "content": "..."}.'
        )
    elif problem.missing:
        text = (
            f"'{wanted}' needs old_text: a short unique part of the entry to act on. None was "
            "given. Reissue the call with old_text set to part of one of current_entries."
        )
    elif problem.field in ("action", "target"):
        text = f"{problem.field} must be one of: {wanted}."
    elif problem.expected == ("string",):
        text = f"{problem.field} must be a string."
    elif problem.field == "operations" and problem.expected == ("action",):
        text = "Send either action or operations, not both: operations for several changes."
    elif problem.expected == ("operations", "action"):
        text = (
            f"{problem.field} does not go beside operations: put it in an item of operations, "
            "or send action instead of operations."
        )
    elif problem.field in ("content", "old_text"):
        text = f"'{wanted}' needs {problem.field}."
    elif problem.unknown:
        name, *members = problem.expected
        text = (
            f"{problem.field}: unknown member {name!r}; drop it. An item takes: "
            f"{', '.join(members)}."
        )
    elif problem.field.startswith("operations"):
        text = f"{problem.field}: needs {wanted}."
    else:
        text = f"Unknown argument {problem.field!r}; the memory tool takes: {wanted}."
    return text if len(problems) == 1 else f"{text} ({len(problems) - 1} more problem(s).)"
