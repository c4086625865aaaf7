"""The judges of a Hermes memory provider plugin (PLUGIN): pure functions over what a provider's
hooks returned, how long they took, what they wrote and which threads they left, as memspec's
driver reported them (``conformance/hermes/provider_driver.py``).

The numbers of the area live here: each hook's time budget (:data:`BUDGETS`), the most a recall
may hold (:data:`MAX_RECALL`), the facts the recall is judged on (:data:`FACTS`). A judge returns
:class:`~memspec.spec.problems.Problem` values, never text that opens with a clause id.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memspec.spec import targets
from memspec.spec.fence import find_fence_tags, find_system_notes
from memspec.spec.problems import Problem

BUILTIN = "builtin"
"""The name Hermes' manager reserves for its built-in store (PLUGIN-2)."""

BUDGETS: Mapping[str, float] = {
    # PLUGIN-2, PLUGIN-3, PLUGIN-4: what Hermes reads to list, activate and wire a provider.
    "name": 1.0,
    "is_available": 1.0,
    "backup_paths": 1.0,
    "get_tool_schemas": 1.0,
    # PLUGIN-6: the agent waits for it at start-up.
    "initialize": 5.0,
    # PLUGIN-9: PROV-4's timeout.
    "prefetch": 2.0,
    # PLUGIN-11, PLUGIN-14, PLUGIN-15, PLUGIN-16: called on the agent's turn or its one writer.
    "sync_turn": 1.0,
    "queue_prefetch": 1.0,
    "on_memory_write": 1.0,
    "on_turn_start": 1.0,
    "on_session_switch": 1.0,
    "on_delegation": 1.0,
    "system_prompt_block": 1.0,
    # PLUGIN-15, PLUGIN-16: end-of-session extraction may take seconds.
    "on_session_end": 5.0,
    "on_pre_compress": 5.0,
    # PLUGIN-5: a tool call is part of a turn the model waits for.
    "handle_tool_call": 10.0,
    # PLUGIN-17: Hermes' own drain at shutdown.
    "shutdown": 5.0,
}
"""The seconds each hook may take (SPEC.md, PLUGIN, "A hook's time"), by method name."""

HOOK_CLAUSES: Mapping[str, str] = {
    "load": "PLUGIN-1",
    "name": "PLUGIN-2",
    "is_available": "PLUGIN-3",
    "backup_paths": "PLUGIN-3",
    "get_tool_schemas": "PLUGIN-4",
    "handle_tool_call": "PLUGIN-5",
    "initialize": "PLUGIN-6",
    "prefetch": "PLUGIN-9",
    "sync_turn": "PLUGIN-11",
    "queue_prefetch": "PLUGIN-11",
    "on_memory_write": "PLUGIN-14",
    "on_session_switch": "PLUGIN-15",
    "on_session_end": "PLUGIN-15",
    "on_turn_start": "PLUGIN-16",
    "on_pre_compress": "PLUGIN-16",
    "on_delegation": "PLUGIN-16",
    "system_prompt_block": "PLUGIN-16",
    "shutdown": "PLUGIN-17",
}
"""The clause that holds each hook to its budget and forbids it to raise: a provider whose
process dies in a hook breaks that clause."""


def limit_of(method: str) -> float:
    """Returns how long memspec waits for a call of ``method`` before it counts as hung: twice
    its budget, and at least 3 seconds (the budget decides the verdict, not this)."""
    return max(3.0, 2 * BUDGETS.get(method, 5.0))


MAX_RECALL = 10_000
"""The most code points a prefetch may return (PLUGIN-10): Hermes' spill threshold."""
THREAD_GRACE = 1.0
"""Seconds after ``shutdown()`` returned at which a provider's threads are counted (PLUGIN-18)."""
SECONDARY_CONTEXTS = ("subagent", "cron", "flush")
"""The ``agent_context`` values in which a provider writes nothing (PLUGIN-8)."""
MIRRORED_ACTIONS = ("add", "replace", "remove")
"""The built-in tool's actions Hermes mirrors to a provider (PLUGIN-14)."""
TARGETS = targets.TARGETS
"""The built-in tool's targets (PLUGIN-14): the stores' own."""
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A function name a model's API accepts (PLUGIN-4)."""
SQL_WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|DROP|ALTER)\b", re.IGNORECASE)
SQL_CREATE = re.compile(r"^\s*CREATE\b(?!.*\bIF\s+NOT\s+EXISTS\b)", re.IGNORECASE | re.DOTALL)


def primary_keywords(session_id: str, hermes_home: str) -> dict[str, Any]:
    """Returns the keywords hermes-agent 0.19.0's agent passes ``initialize`` for a CLI session
    (``agent/agent_init.py``), the callbacks named ``$callback`` for the driver to supply, and
    one keyword no release passes (PLUGIN-6)."""
    return {
        "session_id": session_id,
        "platform": "cli",
        "hermes_home": hermes_home,
        "agent_context": "primary",
        "agent_identity": "default",
        "agent_workspace": "hermes",
        "warning_callback": "$callback",
        "status_callback": "$callback",
        "memspec_unknown_keyword": "a keyword no Hermes release passes",
    }


def over_budget(method: str, seconds: float) -> bool:
    """Whether a call of ``method`` that took ``seconds`` overran its budget (:data:`BUDGETS`)."""
    return seconds > BUDGETS[method]


@dataclass(frozen=True)
class Call:
    """A Call is what one hook did, as the driver saw it: ``value`` (the JSON form of what it
    returned), ``type`` (the name of its type), ``raised`` (``"TypeError: ..."`` or ``None``),
    ``hung`` (it had not returned when the driver stopped waiting) and ``seconds``."""

    method: str
    value: Any = None
    type: str = "NoneType"
    raised: str | None = None
    hung: bool = False
    seconds: float = 0.0

    @classmethod
    def of(cls, method: str, answer: Mapping[str, Any]) -> Call:
        """Returns the call a driver answer describes."""
        return cls(
            method,
            answer.get("value"),
            str(answer.get("type") or "NoneType"),
            answer.get("raised"),
            bool(answer.get("hung")),
            float(answer.get("seconds") or 0.0),
        )

    def returned(self) -> bool:
        """Whether the call returned (it neither raised nor hung)."""
        return self.raised is None and not self.hung


def call_problems(call: Call, clause: str, *, what: str = "") -> list[Problem]:
    """Returns what is wrong with how ``call`` ended, as problems of ``clause``: it hung, took
    longer than its budget (:data:`BUDGETS`) or raised. PLUGIN-2, PLUGIN-3, PLUGIN-4, PLUGIN-5,
    PLUGIN-6, PLUGIN-9, PLUGIN-11, PLUGIN-14, PLUGIN-15, PLUGIN-16 and PLUGIN-17 each hold their
    hooks to this."""
    shown = what or f"{call.method}()"
    budget = BUDGETS[call.method]
    if call.hung:
        return [
            Problem(
                clause,
                f"{shown} had not returned after {call.seconds:.1f} s (its budget is {budget:g} s)",
            )
        ]
    problems = []
    if over_budget(call.method, call.seconds):
        problems.append(
            Problem(clause, f"{shown} took {call.seconds:.2f} s; its budget is {budget:g} s")
        )
    if call.raised is not None:
        problems.append(Problem(clause, f"{shown} raised {call.raised}"))
    return problems


def registration_problem(registered: int | None) -> Problem | None:
    """Returns the PLUGIN-1 problem of a ``register(ctx)`` that called the collector's
    ``register_memory_provider`` ``registered`` times (``None``: the module has no
    ``register``), or ``None``."""
    if registered is None or registered == 1:
        return None
    if registered == 0:
        return Problem(
            "PLUGIN-1",
            "register(ctx) registered no provider (Hermes then falls back to a "
            "MemoryProvider subclass of the module, silently)",
        )
    return Problem(
        "PLUGIN-1",
        f"register(ctx) called register_memory_provider {registered} times; "
        "Hermes keeps the last one and drops the others silently",
    )


def interface_problem(is_provider: bool, class_name: str, lacking: Sequence[str]) -> Problem | None:
    """Returns the PLUGIN-1 problem of a provider that is not an instance of Hermes'
    ``MemoryProvider`` (``register(ctx)`` registered something else, which Hermes 0.19.0 takes),
    naming the hooks of the interface its class lacks, or ``None``."""
    if is_provider:
        return None
    missing = f"; it lacks {', '.join(lacking)}" if lacking else ""
    return Problem(
        "PLUGIN-1",
        f"register(ctx) registered a {class_name}, not an instance of Hermes' MemoryProvider"
        f"{missing} (Hermes 0.19.0 takes it, and its manager catches and logs each call of a hook "
        "it lacks; here each is answered by the interface's default)",
    )


def name_problem(value: object, type_name: str) -> Problem | None:
    """Returns the PLUGIN-2 problem of a provider ``name``, or ``None``."""
    if type_name != "str" or not isinstance(value, str):
        return Problem("PLUGIN-2", f"name is a {type_name}, not a str")
    if not value.strip():
        return Problem("PLUGIN-2", f"name is {value!r}: empty")
    if value == BUILTIN:
        return Problem(
            "PLUGIN-2", "name is 'builtin', the name Hermes' manager reserves for its own store"
        )
    return None


def availability_problems(available: Call, paths: Call) -> list[Problem]:
    """Returns the PLUGIN-3 problems of ``is_available()`` and ``backup_paths()``: a bool, and a
    list of absolute path strings."""
    problems = []
    if available.returned() and available.type != "bool":
        problems.append(
            Problem("PLUGIN-3", f"is_available() returned a {available.type}, not a bool")
        )
    if paths.returned():
        if paths.type != "list" or not isinstance(paths.value, list):
            problems.append(
                Problem("PLUGIN-3", f"backup_paths() returned a {paths.type}, not a list")
            )
        else:
            wrong = [p for p in paths.value if not isinstance(p, str) or not os.path.isabs(p)]
            if wrong:
                problems.append(
                    Problem("PLUGIN-3", f"backup_paths() holds what is no absolute path: {wrong!r}")
                )
    return problems


def normalize_tool(schema: object) -> object:
    """Returns the function schema of ``schema``: the function inside an OpenAI tool
    ``{"type": "function", "function": {...}}``, as Hermes' ``normalize_tool_schema`` reads it,
    else ``schema`` itself (PLUGIN-4)."""
    if isinstance(schema, Mapping) and schema.get("type") == "function":
        inner = schema.get("function")
        if isinstance(inner, Mapping):
            return inner
    return schema


def tool_names(schemas: object) -> list[str]:
    """Returns the names of the tools ``schemas`` offers (a name that is not a str is left
    out)."""
    if not isinstance(schemas, list):
        return []
    names = []
    for schema in schemas:
        function = normalize_tool(schema)
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str):
            names.append(name)
    return names


def tool_schema_problems(schemas: object, core_names: Collection[str]) -> list[Problem]:
    """Returns the PLUGIN-4 problems of what ``get_tool_schemas()`` returned: not a list, a
    schema that is not a function schema of a valid name, description and JSON Schema
    parameters of type object, a name given twice, ``memory`` or one of ``core_names`` (the
    release's core tools)."""
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    if not isinstance(schemas, list):
        return [
            Problem(
                "PLUGIN-4", f"get_tool_schemas() returned a {type(schemas).__name__}, not a list"
            )
        ]
    problems = []
    seen: set[str] = set()
    reserved = {"memory", *core_names}
    for index, schema in enumerate(schemas):
        function = normalize_tool(schema)
        where = f"tool {index}"
        if not isinstance(function, Mapping):
            problems.append(Problem("PLUGIN-4", f"{where} is a {type(function).__name__}"))
            continue
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            problems.append(
                Problem(
                    "PLUGIN-4",
                    f"{where} is named {name!r}: a tool name is 1 "
                    "to 64 letters, digits, '_' and '-'",
                )
            )
        else:
            where = f"tool {name!r}"
            if name in reserved:
                problems.append(
                    Problem("PLUGIN-4", f"{where} takes the name of a core tool of Hermes (#40466)")
                )
            if name in seen:
                problems.append(Problem("PLUGIN-4", f"{where} is offered twice"))
            seen.add(name)
        if not isinstance(function.get("description"), str):
            problems.append(Problem("PLUGIN-4", f"{where} has no description (a str)"))
        parameters = function.get("parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            problems.append(
                Problem("PLUGIN-4", f"{where}'s parameters are not a JSON Schema of type object")
            )
            continue
        validator = validators.validator_for(parameters, default=validators.Draft202012Validator)
        try:
            validator.check_schema(parameters)
        except SchemaError as error:
            problems.append(
                Problem(
                    "PLUGIN-4", f"{where}'s parameters are no valid JSON Schema: {error.message}"
                )
            )
    return problems


_SAMPLES: Mapping[str, Any] = {
    "string": "memspec",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}
_WRONG: Mapping[str, Any] = {
    "string": 7,
    "integer": "seven",
    "number": "seven",
    "boolean": "yes",
    "array": "memspec",
    "object": "memspec",
    "null": "memspec",
}


def _sample(prop: object, values: Mapping[str, Any]) -> Any:
    """Returns a value for a property schema: its first ``enum`` value or its ``default`` when
    ``values`` are the well-typed samples, else the value ``values`` gives its type."""
    if not isinstance(prop, Mapping):
        return values["string"]
    if values is _SAMPLES:
        enum = prop.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0]
        if "default" in prop:
            return prop["default"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k in values), "string")
    return values.get(kind if isinstance(kind, str) else "string", values["string"])


def tool_arguments(schema: object) -> list[tuple[str, dict[str, Any]]]:
    """Returns the calls PLUGIN-5 makes of one tool, each with what it is: arguments built from
    its schema (every required property with a value of its type), ``{}``, each required
    property of another type, and an extra member no schema names."""
    function = normalize_tool(schema)
    parameters = function.get("parameters") if isinstance(function, Mapping) else None
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    required = parameters.get("required") if isinstance(parameters, Mapping) else None
    props = properties if isinstance(properties, Mapping) else {}
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    good = {name: _sample(props.get(name), _SAMPLES) for name in names}
    wrong = {name: _sample(props.get(name), _WRONG) for name in names}
    return [
        ("arguments built from its schema", good),
        ("{}", {}),
        ("its required arguments of another type", wrong),
        ("an extra member no schema names", {**good, "memspec_unknown_member": 1}),
    ]


def tool_result_problem(tool: str, label: str, call: Call) -> Problem | None:
    """Returns the PLUGIN-5 problem of one tool call's result: not a str, or not JSON."""
    if not call.returned():
        return None
    if call.type != "str" or not isinstance(call.value, str):
        return Problem("PLUGIN-5", f"{tool} with {label} returned a {call.type}, not a JSON str")
    try:
        json.loads(call.value)
    except ValueError:
        shown = call.value[:80] + ("…" if len(call.value) > 80 else "")
        return Problem("PLUGIN-5", f"{tool} with {label} returned text that is not JSON: {shown!r}")
    return None


PREFETCH_QUERIES: Sequence[tuple[str, str]] = (
    ("an empty query", ""),
    ("an ordinary question", "What do you remember about my projects?"),
    ("a question holding fence tags", "</memory-context> What is <memory-context> for?"),
    ("a question in Persian", "درباره‌ی پروژه‌های من چه به یاد داری؟"),
    ("20,000 characters", "remember " * 2_222 + "xx"),
)
"""The queries PLUGIN-9 prefetches with, each with what it is."""


def prefetch_type_problem(label: str, call: Call) -> Problem | None:
    """Returns the PLUGIN-9 problem of a prefetch that returned anything but a str."""
    if call.returned() and call.type != "str":
        return Problem("PLUGIN-9", f"prefetch() of {label} returned a {call.type}, not a str")
    return None


def recall_problems(text: str, label: str) -> list[Problem]:
    """Returns the PLUGIN-10 problems of recalled text: a fence tag (FENCE-2) or a system note
    (FENCE-4), in any disguise, and more than :data:`MAX_RECALL` code points."""
    problems = []
    tags = find_fence_tags(text)
    if tags:
        start, end = tags[0]
        problems.append(
            Problem(
                "PLUGIN-10",
                f"prefetch() of {label} returned a fence tag, {text[start:end]!r} "
                f"at {start} ({len(tags)} in all)",
            )
        )
    notes = find_system_notes(text)
    if notes:
        start, end = notes[0]
        problems.append(
            Problem(
                "PLUGIN-10",
                f"prefetch() of {label} returned a system note, "
                f"{text[start:end][:80]!r} at {start}",
            )
        )
    if len(text) > MAX_RECALL:
        problems.append(
            Problem(
                "PLUGIN-10",
                f"prefetch() of {label} returned {len(text):,} characters; the "
                f"most is {MAX_RECALL:,}",
            )
        )
    return problems


@dataclass(frozen=True)
class Fact:
    """A Fact is one turn PLUGIN-13 syncs: what the user says, the reply, a question about it
    and the made-up ``word`` that must come back."""

    user: str
    reply: str
    question: str
    word: str


FACTS: Sequence[Fact] = (
    Fact(
        "My gym locker code is Quillfeather-8241.",
        "Noted: your gym locker code.",
        "What is my gym locker code?",
        "Quillfeather-8241",
    ),
    Fact(
        "My sister's cat is called Marmaduke-Zephyr.",
        "A fine name for your sister's cat.",
        "What is my sister's cat called?",
        "Marmaduke-Zephyr",
    ),
    Fact(
        "The staging server password hint is Orchid-Lantern-57.",
        "I will remember the hint.",
        "What is the staging server password hint?",
        "Orchid-Lantern-57",
    ),
    Fact(
        "I parked the car on level Vermillion-9 of the garage.",
        "Level noted.",
        "Which garage level did I park the car on?",
        "Vermillion-9",
    ),
    Fact(
        "My dentist appointment is with Dr. Tiberius Oakhollow.",
        "I will keep that in mind.",
        "Who is my dentist appointment with?",
        "Oakhollow",
    ),
)
"""The facts PLUGIN-13 syncs: made-up words no provider knows beforehand, each in a plain
first-person sentence any extractor keeps."""


def recalled(fact: Fact, text: object) -> bool:
    """Whether ``text``, what a prefetch returned, recalls ``fact``: its word is in it, verbatim
    (PLUGIN-13)."""
    return isinstance(text, str) and fact.word in text


def repeated_recall_problem(content: str, text: object) -> Problem | None:
    """Returns the PLUGIN-14 problem of a recall that shows a mirrored ``add``, given twice,
    more than once."""
    count = text.count(content) if isinstance(text, str) else 0
    if count > 1:
        return Problem(
            "PLUGIN-14",
            f"an add given twice is recalled {count} times: a repeated write was "
            f"stored again (#110682): {content!r}",
        )
    return None


def crossed_problem(word: str, text: object, own: str, other: str) -> Problem | None:
    """Returns the PLUGIN-19 problem of a prefetch of the instance on ``own`` that returned
    ``word``, which only the instance on ``other`` was given."""
    if isinstance(text, str) and word in text:
        return Problem(
            "PLUGIN-19",
            f"the instance on {own} recalled {word!r}, which only the instance on "
            f"{other} was given",
        )
    return None


def is_write(event: Mapping[str, Any]) -> bool:
    """Whether a driver event is a write (SPEC.md, PLUGIN, "A write"): a file operation that
    writes (to a file: opening ``/dev/null`` is none), or an SQL statement that changes a
    database. A ``chmod`` changes a mode only when it sets another mode than the file had: one
    that finds the mode it sets, or no file at all (the call fails), is no write
    (:func:`mode_unchanged`)."""
    if event.get("kind") == "write":
        # the null device is no file: what is written there is discarded
        return event.get("path") != os.devnull and not mode_unchanged(event)
    if event.get("kind") == "sql":
        statement = str(event.get("detail") or "")
        return bool(SQL_WRITE.match(statement) or SQL_CREATE.match(statement))
    return False


def mode_unchanged(event: Mapping[str, Any]) -> bool:
    """Whether the driver's event is a ``chmod`` that changed no mode: the driver read the
    file's mode before the call (``was``), and it was the mode set (``mode``), or there was no
    file (``was`` is ``None``). Verbatim-memory 1.0.0, for one, restricts its SQLite ``-wal`` and
    ``-shm`` files to 0600 at close, after its last connection removed them: no mode changes.
    An event without ``was`` (the mode could not be read) is a change."""
    if event.get("op") != "os.chmod" or "was" not in event:
        return False
    was = event.get("was")
    return was is None or was == event.get("mode")


def under(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one (paths already resolved)."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


FileState = tuple[int, str]
"""What :func:`changed_files` compares of a file: its size and a mark of its content (its
modification time, or for an SQLite database a digest of what it holds)."""
SQLITE_SIDE_FILES = ("-wal", "-journal", "-shm")
"""The files beside an SQLite database: what they hold is judged as the database's content (a
reader writes ``-shm``; a checkpoint moves ``-wal`` into the database and removes it)."""


def changed_files(before: Mapping[str, FileState], after: Mapping[str, FileState]) -> list[str]:
    """Returns the files written between two looks at a directory tree (PLUGIN-8: what a C
    library writes is seen there, not among the audit events): each file that holds something
    and is new or has another size or mark, and each file that held something and is gone. The
    files beside an SQLite database (:data:`SQLITE_SIDE_FILES`) are never one; a file empty
    before and after, or created empty, is none."""
    found = []
    for path in sorted(set(before) | set(after)):
        if path.endswith(SQLITE_SIDE_FILES):
            continue
        old, new = before.get(path), after.get(path)
        written = new is not None and new[0] > 0 and new != old
        removed = new is None and old is not None and old[0] > 0
        if written or removed:
            found.append(path)
    return found


def stray_write_problems(
    events: Iterable[Mapping[str, Any]],
    homes: Collection[str],
    backups: Collection[str],
    temporary: str,
    left: Collection[str],
    caches: Collection[str] = (),
) -> list[Problem]:
    """Returns the PLUGIN-7 problems of a provider's writes: each path written outside the
    ``hermes_home``s it was given (``homes``), the paths ``backup_paths()`` named (``backups``)
    and the user's cache directory (``caches``: a model downloaded is no profile's memory), or
    the folders made on the way to a named path (a vault under ``~/Documents`` makes that folder
    where a home lacks it), except a file under ``temporary`` that is not among the files
    ``left`` there once ``shutdown()`` returned. One problem per path, the first write of each."""
    problems = []
    seen: set[str] = set()
    for event in events:
        path = str(event.get("path") or "")
        if not is_write(event) or not path or path in seen:
            continue
        if under(path, homes) or under(path, backups) or under(path, caches):
            continue
        if event.get("op") == "os.mkdir" and any(under(backup, [path]) for backup in backups):
            continue  # a folder on the way to a path backup_paths() names is that path's
        if under(path, [temporary]) and path not in left:
            continue
        seen.add(path)
        during = event.get("hook") or "a thread of its own"
        problems.append(
            Problem(
                "PLUGIN-7",
                f"{event.get('op')} of {path} (during {during}): outside "
                "hermes_home and the paths backup_paths() names",
            )
        )
    return problems


def writes_from(events: Iterable[Mapping[str, Any]], since: float) -> list[Mapping[str, Any]]:
    """Returns the writes among ``events`` made at ``since`` or later (the driver's clock):
    those PLUGIN-8 forbids once ``initialize`` returned in a non-primary context."""
    return [e for e in events if is_write(e) and float(e.get("t") or 0.0) >= since]


def load_problems(events: Iterable[Mapping[str, Any]]) -> list[Problem]:
    """Returns the PLUGIN-1 problems of what loading did: each write and each network attempt
    (loading does neither)."""
    return _side_effects(events, "PLUGIN-1", "loading")


def side_effect_problems(events: Iterable[Mapping[str, Any]], what: str) -> list[Problem]:
    """Returns the PLUGIN-3 problems of ``is_available()`` or ``backup_paths()``: each write and
    each network attempt made while it ran."""
    return _side_effects(events, "PLUGIN-3", what)


def _side_effects(events: Iterable[Mapping[str, Any]], clause: str, what: str) -> list[Problem]:
    """Returns a problem of ``clause`` for each write and each network attempt among
    ``events``, which ``what`` (loading, a hook) made."""
    problems = []
    for event in events:
        if is_write(event):
            problems.append(
                Problem(clause, f"{what} wrote: {event.get('op')} of {event.get('path')}")
            )
        elif event.get("kind") == "network":
            problems.append(
                Problem(
                    clause, f"{what} tried the network: {event.get('op')} {event.get('address')}"
                )
            )
    return problems


def lingering_threads(threads: Iterable[Mapping[str, Any]]) -> list[Problem]:
    """Returns the PLUGIN-18 problem of each thread the provider started that is alive and not
    a daemon :data:`THREAD_GRACE` seconds after ``shutdown()`` returned."""
    return [
        Problem(
            "PLUGIN-18",
            f"the thread {thread.get('name')!r} is still alive after "
            "shutdown() and is not a daemon: the interpreter cannot exit",
        )
        for thread in threads
        if thread.get("alive") and not thread.get("daemon")
    ]
