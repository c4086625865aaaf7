"""The memory tool as the model sees it: its schema, the parse of a call, the judge of a result.

This is the pure half of the TOOL area of SPEC.md: :func:`schema_problems` judges a backend's schema
(TOOL-2, TOOL-3), :func:`parse_call` turns argument text into a store operation or its
:class:`Malformed` problems (TOOL-4, TOOL-5, TOOL-6), and :func:`result_problems` judges a result
text (TOOL-5 to TOOL-13; a missing ``old_text`` lists the entries, TOOL-10). The judges return
:class:`~memspec.spec.problems.Problem` values; a result's carry the field they are about
(:class:`ResultProblem`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from memspec.spec import codes
from memspec.spec.codec import FileState, normalize_content
from memspec.spec.codec import usage as usage_of
from memspec.spec.operations import Add, Batch, Mutation, Patch, Remove, Replace
from memspec.spec.problems import Problem
from memspec.spec.rules import (
    Outcome,
    apply_step,
    argument_error,
    choose_entry,
    decide,
    preview,
    steps,
)
from memspec.spec.snapshot import BLOCKED_PREFIX, blocked_placeholder, label_clauses, usage_label
from memspec.spec.targets import FILENAMES, TARGETS
from memspec.spec.threats import find_threats

TOOL_NAME: Final = "memory"
CORE_ACTIONS: Final[tuple[str, ...]] = ("add", "replace", "remove")
BATCH_ACTIONS: Final[tuple[str, ...]] = CORE_ACTIONS
ITEM_FIELDS: Final[tuple[str, ...]] = ("action", "content", "old_text")
NEEDED: Final[dict[str, tuple[str, ...]]] = {
    "add": ("content",),
    "replace": ("old_text", "content"),
    "remove": ("old_text",),
    "patch": ("old_text", "content"),
}
"""The fields each action needs (TOOL-4); ``content`` of ``replace`` is the contract's
``new_content``."""
EDIT_ACTIONS: Final[tuple[str, ...]] = ("replace", "patch")
LISTING: Final = "current_entries"


def offered_actions(features: Collection[str]) -> tuple[str, ...]:
    """Returns the single-call actions a backend with ``features`` offers (TOOL-2): the three
    of ``core`` and ``patch`` where claimed."""
    return CORE_ACTIONS + (("patch",) if "patch" in features else ())


def call_fields(batch: bool) -> tuple[str, ...]:
    """Returns the argument names a call may carry (TOOL-2, TOOL-4)."""
    return ("action", "target", "content", "old_text") + (("operations",) if batch else ())


def schema_parameters(actions: Sequence[str], batch: bool) -> dict[str, Any]:
    """Returns the JSON Schema of the arguments, without descriptions (TOOL-2): the properties
    ``action`` (the offered actions), ``target``, ``content``, ``old_text`` and, with batch,
    ``operations``; ``target`` required, and ``action`` too when there is no batch shape."""
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": list(actions)},
        "target": {"type": "string", "enum": list(TARGETS)},
        "content": {"type": "string"},
        "old_text": {"type": "string"},
    }
    if batch:
        properties["operations"] = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": list(BATCH_ACTIONS)},
                    "content": {"type": "string"},
                    "old_text": {"type": "string"},
                },
                "required": ["action"],
            },
        }
    required = ["target"] if batch else ["action", "target"]
    return {"type": "object", "properties": properties, "required": required}


def _members(node: object, *path: str) -> Mapping[str, Any]:
    """Returns the object at ``path`` under ``node``: ``{}`` where a step is missing or is not
    an object."""
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def schema_offer(schema: object) -> tuple[tuple[str, ...], bool]:
    """Returns the actions and whether the batch shape a schema offers, as its ``action`` enum
    and its ``operations`` property say (what a judge of results assumes the tool takes)."""
    properties = _members(schema, "parameters", "properties")
    enum = _members(properties, "action").get("enum")
    actions = tuple(a for a in enum if isinstance(a, str)) if isinstance(enum, list) else ()
    return actions or CORE_ACTIONS, "operations" in properties


def own_members(schema: object) -> frozenset[str]:
    """Returns the member names a schema offers beyond the spec's, at the top or in a batch item
    (an alias such as Hermes 0.20's ``new_text``): TOOL-2 allows them, and a call carrying one
    is outside TOOL-4 (:func:`carries_own_member`)."""
    top = _members(schema, "parameters", "properties")
    inner = _members(top, "operations", "items", "properties")
    return frozenset(set(top) - set(call_fields(True)) | set(inner) - set(ITEM_FIELDS))


def carries_own_member(text: object, own: frozenset[str]) -> bool:
    """Whether the argument text of a call carries a member of ``own`` (:func:`own_members`),
    at the top or in a batch item: what it means is the backend's, not TOOL-4's."""
    arguments = parse_arguments(text)
    if not isinstance(arguments, Mapping) or not own:
        return False
    items = arguments.get("operations")
    objects = [arguments, *(items if isinstance(items, list) else [])]
    return any(isinstance(o, Mapping) and own & set(o) for o in objects)


def unoffered_core_action(text: object, actions: Sequence[str]) -> str | None:
    """Returns the action of ``core`` a single call names (``add``, ``replace``, ``remove``) when
    a schema offering ``actions`` hides it — a schema TOOL-2 fails, as the 0.22 Hermes line's
    offers ``patch`` in place of ``replace`` — else ``None``."""
    arguments = parse_arguments(text)
    action = arguments.get("action") if isinstance(arguments, Mapping) else None
    return action if action in CORE_ACTIONS and action not in actions else None


def schema_problems(schema: object, features: Sequence[str] | frozenset[str]) -> list[Problem]:
    """Returns what is wrong with a backend's tool schema, each a problem of TOOL-2: its name,
    description and parameters against :func:`schema_parameters` for the claimed features (a
    property of the backend's own needs a ``type`` and is never required)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, Mapping):
        return [_schema(f"the schema is a {type(schema).__name__}, not an object")]
    problems = []
    if schema.get("name") != TOOL_NAME:
        problems.append(_schema(f"the function is named {schema.get('name')!r}, not 'memory'"))
    description = schema.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(_schema("the schema has no description (a non-empty string)"))
    parameters = schema.get("parameters")
    try:
        # check_schema judges any JSON value, whatever its stubs ask: a SchemaError says what
        # is wrong with one that is no schema (None, a list, a string)
        Draft202012Validator.check_schema(parameters)  # type: ignore[arg-type]  # any value
    except SchemaError as error:
        return [*problems, _schema(f"parameters is not a valid JSON Schema: {error.message}")]
    if not isinstance(parameters, Mapping):
        return [*problems, _schema("parameters is not a JSON Schema object")]
    wanted = schema_parameters(offered_actions(features), "batch" in features)
    problems += _schema_difference(wanted, parameters, "parameters")
    return problems


def _schema(text: str) -> Problem:
    """Returns a problem of TOOL-2, the schema that lists exactly what the backend executes."""
    return Problem("TOOL-2", text)


def _schema_difference(
    wanted: Mapping[str, Any], got: Mapping[str, Any], path: str
) -> list[Problem]:
    """Returns how ``got`` departs from ``wanted`` in types, enums, properties and required
    names (enum order is free)."""
    problems = []
    if got.get("type") != wanted["type"]:
        problems.append(_schema(f"{path}.type is {got.get('type')!r}, not {wanted['type']!r}"))
    if "enum" in wanted:
        enum = got.get("enum")
        if not isinstance(enum, list) or sorted(map(str, enum)) != sorted(wanted["enum"]):
            problems.append(_schema(f"{path}.enum is {enum!r}, not {wanted['enum']!r}"))
    if "required" in wanted:
        required = got.get("required", [])
        if not isinstance(required, list) or sorted(map(str, required)) != sorted(
            wanted["required"]
        ):
            problems.append(_schema(f"{path}.required is {required!r}, not {wanted['required']!r}"))
    if "properties" in wanted:
        properties = got.get("properties")
        if not isinstance(properties, Mapping):
            return [*problems, _schema(f"{path} has no properties")]
        missing = sorted(set(wanted["properties"]) - set(properties))
        if missing:
            problems.append(
                _schema(
                    f"{path}.properties lack {missing} (the actions and shapes the backend claims)"
                )
            )
        for name in sorted(set(properties) - set(wanted["properties"])):
            extra = properties[name]
            if not isinstance(extra, Mapping) or not isinstance(extra.get("type"), str):
                problems.append(_schema(f"{path}.{name}, a property of its own, has no type"))
        for name, sub in wanted["properties"].items():
            if isinstance(properties.get(name), Mapping):
                problems += _schema_difference(sub, properties[name], f"{path}.{name}")
    if "items" in wanted:
        items = got.get("items")
        if not isinstance(items, Mapping):
            return [*problems, _schema(f"{path}.items is not an object schema")]
        problems += _schema_difference(wanted["items"], items, f"{path}.items")
    return problems


@dataclass(frozen=True)
class Malformed:
    """A Malformed is one thing wrong with a call's arguments (TOOL-6): ``field`` (an argument name,
    ``operations[i]`` or ``arguments``) and ``expected``, the words an actionable error names
    besides it. ``missing`` marks an absent ``old_text`` of a single call (TOOL-10); ``unknown`` a
    member of a batch item the call must drop."""

    field: str
    expected: tuple[str, ...]
    missing: bool = False
    unknown: bool = False

    def message(self) -> str:
        """Returns a plain error text that names the field and what to send."""
        return f"{self.field}: send {' / '.join(self.expected)}"


@dataclass(frozen=True)
class ToolCall:
    """A ToolCall is a well-formed tool call and the store operation it names (TOOL-5)."""

    operation: Mutation

    @property
    def target(self) -> str:
        """The target the call names."""
        return str(self.operation.target)


def _present(arguments: Mapping[str, Any], name: str) -> bool:
    """A field given as JSON ``null`` counts as absent (TOOL-4)."""
    return arguments.get(name) is not None


def _item_problems(index: int, item: object) -> list[Malformed]:
    where = f"operations[{index}]"
    if not isinstance(item, dict):
        return [Malformed(where, ("object",))]
    problems = [
        Malformed(where, (name, *ITEM_FIELDS), unknown=True)
        for name in sorted(item)
        if name not in ITEM_FIELDS
    ]
    for name in ("content", "old_text"):
        if _present(item, name) and not isinstance(item[name], str):
            problems.append(Malformed(where, (name, "string")))
    action = item.get("action")
    if action not in BATCH_ACTIONS:
        return [*problems, Malformed(where, ("action", *BATCH_ACTIONS))]
    problems += [Malformed(where, (name,)) for name in NEEDED[action] if not _present(item, name)]
    return problems


def call_problems(arguments: object, actions: Sequence[str], batch: bool) -> list[Malformed]:
    """Returns every problem of parsed arguments, ``[]`` for a well-formed call (TOOL-4); a member
    whose value is ``null`` is absent."""
    if not isinstance(arguments, dict):
        return [Malformed("arguments", ("JSON", "object"))]
    accepted = call_fields(batch)
    problems = [Malformed(name, accepted) for name in sorted(arguments) if name not in accepted]
    if arguments.get("target") not in TARGETS:
        problems.append(Malformed("target", TARGETS))
    for name in ("content", "old_text"):
        if _present(arguments, name) and not isinstance(arguments[name], str):
            problems.append(Malformed(name, ("string",)))
    single, several = _present(arguments, "action"), batch and _present(arguments, "operations")
    if single and several:
        return [*problems, Malformed("operations", ("action",))]
    if several:
        # TOOL-4: a batch's fields are in its items; one beside them would be dropped unread.
        problems += [
            Malformed(name, ("operations", "action"))
            for name in ("content", "old_text")
            if _present(arguments, name)
        ]
        operations = arguments["operations"]
        if not isinstance(operations, list):
            return [*problems, Malformed("operations", ("array",))]
        for index, item in enumerate(operations):
            problems += _item_problems(index, item)
        return problems
    action = arguments.get("action")
    if not isinstance(action, str) or action not in actions:
        choices = (*actions, "operations") if batch else tuple(actions)
        return [*problems, Malformed("action", choices)]
    for name in NEEDED[action]:
        if not _present(arguments, name):
            problems.append(Malformed(name, (action,), missing=name == "old_text"))
    return problems


def parse_arguments(text: object) -> object:
    """Returns the JSON value of an argument text, or ``None`` when it is not JSON text (a
    repeated member name keeps its last value, as common parsers do)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def parse_call(text: object, actions: Sequence[str], batch: bool) -> ToolCall | list[Malformed]:
    """Returns the :class:`ToolCall` an argument text names, or its problems (TOOL-4,
    TOOL-5, TOOL-6)."""
    arguments = parse_arguments(text)
    problems = call_problems(arguments, actions, batch)
    if problems:
        return problems
    assert isinstance(arguments, dict)
    target = arguments["target"]
    if _present(arguments, "operations"):
        items = [
            {key: value for key, value in item.items() if value is not None}
            for item in arguments["operations"]
        ]
        return ToolCall(Batch(target, items))
    content, old_text = arguments.get("content"), arguments.get("old_text")
    builders: dict[str, Callable[[], Mutation]] = {
        "add": lambda: Add(target, content),
        "replace": lambda: Replace(target, old_text, content),
        "remove": lambda: Remove(target, old_text),
        "patch": lambda: Patch(target, old_text, content),
    }
    return ToolCall(builders[arguments["action"]]())


def watched_target(arguments: object) -> str:
    """Returns the target a call's result reports on: the one the arguments name, else
    ``memory`` (a malformed call may name none)."""
    parsed = parse_arguments(arguments)
    target = parsed.get("target") if isinstance(parsed, dict) else None
    return target if target in TARGETS else "memory"


def only_missing_old_text(problems: Sequence[Malformed]) -> bool:
    """Whether the one thing wrong with a call is an absent ``old_text`` (TOOL-10)."""
    return len(problems) == 1 and problems[0].missing


def shown(entry: str, target: str, scan: bool) -> str:
    """Returns an entry as a result may show it: its text, or, when the threat scan is on and
    the entry matches a pattern, its ``[BLOCKED:`` placeholder (TOOL-13, SCAN-6)."""
    names = find_threats(entry) if scan else ()
    return blocked_placeholder(target, names) if names else entry


def shown_matches(
    outcome: Outcome, entries: Sequence[str], operation: Mutation, target: str, scan: bool
) -> list[str]:
    """Returns the ``matches`` of an ambiguity as a result shows them: the preview of each
    distinct entry (MATCH-5, MATCH-6), a blocked entry's placeholder instead (TOOL-9, TOOL-13)."""
    found = []
    for entry in matched_entries(outcome, entries, operation):
        text = shown(entry, target, scan)
        found.append(preview(entry) if text == entry else text)
    return found


def matched_entries(outcome: Outcome, entries: Sequence[str], operation: Mutation) -> list[str]:
    """Returns the distinct entries the ``old_text`` of the step ``operation`` was refused at
    holds, in entry order (MATCH-5), among ``entries`` as that step saw them: in a batch, the
    working copy after its earlier items (BATCH-3). An entry that only shares a candidate's
    preview is none of them (TOOL-9: one item per distinct matching entry)."""
    chosen = steps(operation)
    at = outcome.item if outcome.item is not None else 0
    working = tuple(entries)
    for action, content, old_text in chosen[:at]:
        applied = apply_step(working, action, content, old_text)
        if isinstance(applied, Outcome):
            return []  # not met: a batch refused at an item applied every item before it
        working = applied
    needle = normalize_content(chosen[at][2]) if at < len(chosen) else ""
    return list(dict.fromkeys(entry for entry in working if needle and needle in entry))


def overwritten_entries(operation: Mutation, before: Sequence[str]) -> list[str]:
    """Returns, in order, the entries a replace or patch (a batch's replace items included)
    overwrote when applied to ``before`` (TOOL-11): each the whole entry as it was in the
    working copy. ``[]`` for an add or a remove."""
    working = tuple(before)
    found: list[str] = []
    for action, content, old_text in steps(operation):
        if action in EDIT_ACTIONS:
            index, _ = choose_entry(working, old_text)
            if index is None:
                return found
            found.append(working[index])
        if isinstance(operation, Batch):  # a later item edits the working copy (BATCH-3)
            applied = apply_step(working, action, content, old_text)
            if isinstance(applied, Outcome):
                return found
            working = applied
    return found


def expected_outcome(
    call: ToolCall, file: FileState, limit: int
) -> tuple[Outcome, tuple[str, ...] | None]:
    """Returns the outcome of a well-formed call's operation on ``file`` and the entries it
    leaves (``None`` when the entries are those the session held: an argument refusal, or an
    unreadable file), as the store operation would (TOOL-5)."""
    refusal = argument_error(call.operation)
    if refusal is not None:
        return refusal, None
    outcome, written = decide(call.operation, file, limit)
    if file.entries is None:
        return outcome, None
    return outcome, written if written is not None else file.entries


def normative_result(
    parsed: ToolCall | list[Malformed],
    outcome: Outcome | None,
    before: Sequence[str],
    after: Sequence[str],
    limit: int,
    *,
    target: str,
    actions: Sequence[str],
    scan: bool,
) -> dict[str, Any]:
    """Returns the fields the spec requires of a result, with a plain ``error`` (TOOL-5 to TOOL-13).
    ``before`` are the entries the operation was applied to, ``after`` the session's entries after
    the call."""
    if isinstance(parsed, list):
        result: dict[str, Any] = {"success": False, "error": parsed[0].message()}
        if only_missing_old_text(parsed):
            result |= _live(after, limit) | {LISTING: [shown(e, target, scan) for e in after]}
        return result
    assert outcome is not None
    if outcome.ok:
        result = {"success": True, **_live(after, limit)}
        edited = overwritten_entries(parsed.operation, before)
        if edited:
            result["overwritten"] = [shown(entry, target, scan) for entry in edited]
        return result
    result = {"success": False, "error": refusal_error(outcome, actions)}
    if outcome.code != codes.E_UNREADABLE:
        result |= _live(after, limit)
    if outcome.code == codes.E_AMBIGUOUS:
        result["matches"] = shown_matches(outcome, before, parsed.operation, target, scan)
    if outcome.code == codes.E_LIMIT:
        result[LISTING] = [shown(entry, target, scan) for entry in after]
    return result


def refusal_error(outcome: Outcome, actions: Sequence[str]) -> str:
    """Returns the plain error of a store refusal with what TOOL-10, TOOL-12 and TOOL-13 require
    it to name: the code, the failing ``operations[i]``, the actions that free room."""
    where = f"operations[{outcome.item}]: " if outcome.item is not None else ""
    text = f"{where}{outcome.code}"
    if outcome.code == codes.E_LIMIT:
        text += ": " + " or ".join(["remove", *(a for a in EDIT_ACTIONS if a in actions)])
    if outcome.threats:
        text += ": " + ", ".join(outcome.threats)
    return text


def _live(entries: Sequence[str], limit: int) -> dict[str, Any]:
    """The live state a result reports: ``usage`` by SNAP-11's label and ``entry_count``."""
    return {"usage": usage_label(usage_of(entries), limit), "entry_count": len(entries)}


@dataclass(frozen=True)
class Observation:
    """An Observation is what a judge needs around one tool call, seen from outside: ``file`` is the
    target's file before the call, ``live_before``/``live_after`` the session's entries around it;
    ``target`` is the watched target of a malformed call."""

    arguments: object
    result: object
    target: str
    file: FileState
    live_before: tuple[str, ...]
    live_after: tuple[str, ...]
    limit: int
    actions: tuple[str, ...]
    batch: bool
    scan: bool


@dataclass(frozen=True)
class ResultProblem(Problem):
    """A ResultProblem is what :func:`result_problems` found wrong with a tool result: the
    clause broken, one line saying how, and ``field``, the result field it is about (``usage``,
    ``current_entries``, ``error``…; ``None`` for the call's effect on the entries or a result
    that is not an object). An example that expects a field blames the clauses of the problems
    about it: a ``usage`` from before the write is TOOL-7's, not every clause of the example."""

    field: str | None = None

    def also(self, context: str) -> ResultProblem:
        """Returns the problem with ``context`` added to its text in parentheses, about the same
        field."""
        return dataclasses.replace(self, text=f"{self.text} ({context})")


def result_problems(seen: Observation) -> list[ResultProblem]:
    """Returns what is wrong with one tool result, each problem with its clause and the field it
    is about (TOOL-5, TOOL-6, TOOL-7, TOOL-9, TOOL-10, TOOL-11, TOOL-12, TOOL-13)."""
    result = parse_arguments(seen.result)
    if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
        return [
            ResultProblem(
                "TOOL-6",
                f"the result is not a JSON object with a bool 'success': {seen.result!r}",
                "success" if isinstance(result, dict) else None,
            )
        ]
    parsed = parse_call(seen.arguments, seen.actions, seen.batch)
    problems = _threat_problems(result) if seen.scan else []
    if isinstance(parsed, list):
        return problems + _malformed_problems(result, parsed, seen)
    outcome, expected_after = expected_outcome(parsed, seen.file, seen.limit)
    if expected_after is None:
        expected_after = seen.live_before
    if result["success"] != outcome.ok:
        text = (
            f"the call is {describe(parsed.operation)}, which answers {outcome.code}, but the "
            f"result says success {json.dumps(result['success'])}"
        )
        problems.append(ResultProblem("TOOL-5", text, "success"))
    fresher = () if outcome.ok or seen.file.entries is None else (tuple(seen.file.entries),)
    # after a refusal the session may show the file it read, fresher than its view: the
    # contract lets entries() reflect what other sessions wrote since
    if seen.live_after != tuple(expected_after) and seen.live_after not in fresher:
        text = (
            f"after {describe(parsed.operation)} the entries are {list(seen.live_after)}, "
            f"expected {list(expected_after)}"
        )
        problems.append(ResultProblem("TOOL-5", text))
    if not result["success"] and not _text(result.get("error")):
        text = "a failed call's result has no 'error' text"
        problems.append(ResultProblem("TOOL-6", text, "error"))
    problems += _live_problems(result, seen, required=outcome.code != codes.E_UNREADABLE)
    before = seen.file.entries if seen.file.entries is not None else seen.live_before
    problems += _shown_fields(result, outcome, parsed, before, seen)
    return problems


def describe(operation: Mutation) -> str:
    """Returns a store operation as a short call, for messages."""
    fields = {key: value for key, value in vars(operation).items() if key != "session"}
    shown_fields = ", ".join(
        f"{key}={json.dumps(value, default=str)}" for key, value in fields.items()
    )
    return f"{type(operation).__name__.lower()}({shown_fields})"


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _names(error: str, problem: Malformed) -> bool:
    folded = error.casefold()
    return all(word.casefold() in folded for word in (problem.field, *problem.expected))


def _malformed_problems(
    result: dict[str, Any], parsed: list[Malformed], seen: Observation
) -> list[ResultProblem]:
    problems = []
    if result["success"] is not False:
        text = f"a malformed call ({parsed[0].message()}) answered success true"
        problems.append(ResultProblem("TOOL-6", text, "success"))
    error = result.get("error")
    if not _text(error) or not any(_names(str(error), problem) for problem in parsed):
        wanted = "; or ".join(
            f"{problem.field!r} and {', '.join(map(repr, problem.expected))}" for problem in parsed
        )
        text = (
            f"the error {error!r} does not name what is wrong and what to send: it should name "
            f"{wanted}"
        )
        problems.append(ResultProblem("TOOL-6", text, "error"))
    if seen.live_after != seen.live_before:
        text = (
            f"a malformed call changed the entries from {list(seen.live_before)} to "
            f"{list(seen.live_after)}"
        )
        problems.append(ResultProblem("TOOL-6", text))
    missing = only_missing_old_text(parsed)
    problems += _live_problems(result, seen, required=missing)
    if missing:
        problems += _listing_problems(result, LISTING, seen.live_after, seen, "TOOL-10")
    elif LISTING in result:
        text = "a malformed call other than a missing old_text lists the entries"
        problems.append(ResultProblem("TOOL-12", text, LISTING))
    return problems


def _live_problems(
    result: dict[str, Any], seen: Observation, *, required: bool
) -> list[ResultProblem]:
    """TOOL-7: ``usage`` and ``entry_count`` are those of the session's entries after the call."""
    want = _live(seen.live_after, seen.limit)
    problems = []
    for name, value in want.items():
        if name not in result:
            if required:
                text = f"the result has no {name!r} (the live state is {value!r})"
                problems.append(ResultProblem("TOOL-7", text, name))
        elif result[name] != value:
            text = (
                f"the result says {name} {result[name]!r}, but entries() after the call give "
                f"{value!r}"
            )
            # a usage counted against another limit than the target's is the limit's (LIMIT-6)
            other = name == "usage" and label_clauses(value, result[name]) == ("LIMIT-6",)
            problems.append(ResultProblem("LIMIT-6" if other else "TOOL-7", text, name))
    return problems


def _shown_fields(
    result: dict[str, Any],
    outcome: Outcome,
    call: ToolCall,
    before: Sequence[str],
    seen: Observation,
) -> list[ResultProblem]:
    problems = []
    if outcome.code == codes.E_AMBIGUOUS:
        wanted = matched_entries(outcome, before, call.operation)
        problems += _listing_problems(result, "matches", wanted, seen, "TOOL-9", preview)
    if outcome.code == codes.E_LIMIT:
        problems += _listing_problems(result, LISTING, seen.live_after, seen, "TOOL-10")
        error = str(result.get("error", ""))
        for action in ("remove", *(a for a in EDIT_ACTIONS if a in seen.actions)):
            if action not in error:
                text = (
                    f"a refusal for the limit does not name the action {action!r} that frees "
                    f"room: {error!r}"
                )
                problems.append(ResultProblem("TOOL-10", text, "error"))
    elif LISTING in result and not (
        outcome.code == codes.E_NOMATCH and not isinstance(call.operation, Batch)
    ):
        text = (
            f"a result with code {outcome.code} lists the whole store in {LISTING!r}; only a "
            "refusal for the limit, a missing old_text or a single call's E_NOMATCH may"
        )
        problems.append(ResultProblem("TOOL-12", text, LISTING))
    elif LISTING in result:
        problems += _listing_problems(result, LISTING, seen.live_after, seen, "TOOL-12")
    if not outcome.ok and outcome.item is not None:
        where = f"operations[{outcome.item}]"
        if where not in str(result.get("error", "")):
            text = (
                f"a failed batch's error does not name its failing item {where}: "
                f"{result.get('error')!r}"
            )
            problems.append(ResultProblem("TOOL-12", text, "error"))
    if outcome.ok:
        wanted_overwritten = overwritten_entries(call.operation, before)
        if wanted_overwritten or "overwritten" in result:
            problems += _listing_problems(
                result, "overwritten", wanted_overwritten, seen, "TOOL-11"
            )
    return problems


def _listing_problems(
    result: dict[str, Any],
    field: str,
    entries: Sequence[str],
    seen: Observation,
    clause: str,
    show: Any = None,
) -> list[ResultProblem]:
    """The listing ``field`` of ``result`` shows each entry (or its preview) in order, a blocked
    entry as a placeholder that starts ``[BLOCKED:``, names the file and holds none of the entry
    (TOOL-13); each problem is about ``field``."""
    got = result.get(field)
    if not isinstance(got, list) or len(got) != len(entries):
        text = f"expected {field!r} to list {len(entries)} entries {list(entries)}, got {got!r}"
        return [ResultProblem(clause, text, field)]
    problems = []
    for item, entry in zip(got, entries, strict=True):
        blocked = seen.scan and bool(find_threats(entry))
        if blocked:
            good = (
                isinstance(item, str)
                and item.startswith(BLOCKED_PREFIX)
                and FILENAMES[seen.target] in item
                and entry not in item
            )
        else:
            good = item == (show(entry) if show else entry)
        if not good:
            owner = "TOOL-13" if blocked else clause  # a blocked entry shown otherwise
            text = f"{item!r} in {field!r} shows the entry {entry!r} wrongly"
            problems.append(ResultProblem(owner, text, field))
    return problems


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def _threat_problems(result: dict[str, Any]) -> list[ResultProblem]:
    """TOOL-13: no text of a result matches a threat pattern: a blocked entry is shown only as
    its placeholder, and refused content is never echoed. One problem per field that shows such
    text, naming the first."""
    problems = []
    for name, value in result.items():
        found = [text for text in _strings(value) if find_threats(text)]
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            text = f"{name!r} shows text that matches a threat pattern: {found[0][:120]!r}{more}"
            problems.append(ResultProblem("TOOL-13", text, name))
    return problems
