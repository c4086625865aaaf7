#!/usr/bin/env python3
"""memspec backend: the real memory tool of a Hermes build over JSON Lines.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict, cast

MEMORY_TOOL = "tools/memory_tool.py"  # restates memspec.conformance.hermes.imports.MEMORY_TOOL
DEFAULT_ACTIONS = ("add", "replace", "remove")
TARGET_LISTS = {"memory": "memory_entries", "user": "user_entries"}
EXIT_DEFECT = 1
EXIT_ADAPTER_GAP = 3

# What Hermes' refusal texts say, in the order they are tried, and the contract code each
# meaning is. The rules read the words of the message, never a version number, so every line
# and fork that words a refusal the same way maps the same. Batch errors are prefixed
# "Operation N: " or "Operation N (action): ", which every rule allows before its words.
_OP = r"^(Operation \d+( \(\w*\))?: )?"
ERROR_CODES: tuple[tuple[str, str], ...] = (
    (r"^(Invalid (memory )?target |Missing required target)", "E_TARGET"),
    (r"^'\w+' is not available; use '\w+'", "E_UNSUPPORTED"),
    (_OP + r"Blocked: ", "E_THREAT"),
    (r"^Refusing to write \S+: the file exists on disk but could\s+not be read", "E_UNREADABLE"),
    (
        r"^Refusing to write \S+: (file on disk has content|it holds an entry larger than)",
        "E_DRIFT",
    ),
    (r"^Refusing to empty \S+.*batch would remove every entry", "E_INVALID"),
    (r"^Operation \d+ names a different target", "E_INVALID"),
    (
        _OP + r"(Content cannot be empty|old_text cannot be empty|new_content cannot be empty"
        r"|new_text cannot be empty|Content is required for 'add'"
        r"|content( \(.*?\))? is required for '|old_text is required for '|'\w+' needs old_text"
        r"|operations list is empty|(content|old_text) is required"
        r"|Missing required parameter: .*Got neither)",
        "E_EMPTY",
    ),
    (
        _OP + r"(Unknown action |operations must be a list|unknown action"
        r"|Patch is a no-op)",
        "E_INVALID",
    ),
    (_OP + r"[Nn]o entry matched ", "E_NOMATCH"),
    (
        _OP + r"(Multiple entries matched |'.*' matched multiple distinct"
        r"|'.*' appears \d+ times in the matched entry)",
        "E_AMBIGUOUS",
    ),
    (
        _OP + r"(Memory at [\d,]+/[\d,]+ chars|(Replacement|Patch) would put memory at "
        r"|After applying all |Applying all \d+ operations would put memory at )",
        "E_LIMIT",
    ),
)


# The protocol's requests and answers in the fields this adapter reads and writes (memspec's
# transport/wire.py, restated: memspec is not installed here; tests/unit/test_judges.py keeps
# them equal). A request's field may hold another type on purpose (ENTRY-7).
class BatchItem(TypedDict, total=False):
    """One item of a batch's ``operations``."""

    action: str
    content: str
    old_text: str


class Request(TypedDict, total=False):
    """A request: its op and fields, and the ``id`` to answer with."""

    id: int
    op: str
    root: str
    memory_char_limit: int
    user_char_limit: int
    target: str
    content: str
    old_text: str
    new_content: str
    operations: list[BatchItem]
    raw: str
    arguments: str


class Answer(TypedDict, total=False):
    """An answer of the protocol: ``ok`` and ``code`` always, and the fields of its op."""

    ok: bool
    code: str
    message: str
    duplicate: bool
    usage: str
    matches: list[str]
    backup: str
    entries: list[str]
    snapshot: str | None
    block: str
    schema: Mapping[str, object]
    result: str
    features: list[str]
    backend: str
    version: str


class Unmapped(LookupError):
    """Hermes answered something this adapter cannot map to the contract: extend ERROR_CODES.
    This script runs in a Hermes release's environment, without memspec: it answers an unmapped
    answer by exiting with ``EXIT_ADAPTER_GAP``, which memspec's transport reads as its one
    ``AdapterGap`` (``memspec.conformance.verdict.findings``)."""


class BadOpen(Exception):
    """The ``open`` request is malformed (answered with ``E_INVALID``)."""


def classify(result: Mapping[str, Any], table: tuple[tuple[str, str], ...] = ERROR_CODES) -> Answer:
    """Returns the contract Outcome for a memory-tool result (CONTRACT-3, CONTRACT-4): ``success``
    is ``OK``, a refusal is matched against ``table`` (ERROR_CODES) by its ``error`` text, Hermes'
    ``usage`` is passed on as it is (SNAP-11 judges it), and a ``drift_backup`` as the backup; a
    staged write or an unknown text raises :class:`Unmapped`. ``result`` is the JSON object the
    tool answered, as it came: the fields read are ``success``, ``staged``, ``message``,
    ``error``, ``usage``, ``matches`` and ``drift_backup``."""
    if result.get("staged"):
        raise Unmapped(f"the write-approval gate staged the write: {result}")
    outcome: Answer
    if result.get("success") is True:
        outcome = {"ok": True, "code": "OK", "message": result.get("message", "")}
        if "already exists" in str(result.get("message", "")):
            outcome["duplicate"] = True
    else:
        error = str(result.get("error", ""))
        code = next((c for pattern, c in table if re.search(pattern, error, re.DOTALL)), None)
        if code is None:
            raise Unmapped(f"unrecognised memory-tool answer: {json.dumps(result)[:600]}")
        outcome = {"ok": False, "code": code, "message": error}
        if code == "E_AMBIGUOUS" and isinstance(result.get("matches"), list):
            outcome["matches"] = result["matches"]
    if isinstance(result.get("usage"), str):
        outcome["usage"] = result["usage"]
    if result.get("drift_backup") and outcome["code"] in ("OK", "E_DRIFT"):
        outcome["backup"] = str(result["drift_backup"])
    return outcome


def tool_schema(module: Any) -> dict[str, Any] | None:
    """Returns the release's function-calling schema of the memory tool: the module-level dict
    named ``memory`` with ``parameters`` (``MEMORY_SCHEMA`` in every release so far), or
    ``None`` when the module has none."""
    for value in vars(module).values():
        if isinstance(value, dict) and value.get("name") == "memory" and "parameters" in value:
            return value
    return None


def schema_actions(module: Any) -> tuple[str, ...]:
    """Returns the actions the release's tool offers the model, read from its function-calling
    schema's ``action`` enum (:func:`tool_schema`). Without one, the actions of the first
    releases (add, replace, remove)."""
    schema = tool_schema(module) or {}
    properties = (schema.get("parameters") or {}).get("properties") or {}
    enum = (properties.get("action") or {}).get("enum")
    if isinstance(enum, list) and all(isinstance(item, str) for item in enum):
        return tuple(enum)
    return DEFAULT_ACTIONS


PARSER_MODULE, PARSER = "agent/tool_executor.py", "_parse_tool_arguments"


@functools.cache
def argument_parser() -> Callable[[Any], tuple[dict[str, Any], str | None]] | None:
    """Returns the agent's own parser of a model's argument text (``_parse_tool_arguments`` of
    ``agent/tool_executor.py``), taken from the installed source alone since its module imports much
    of the agent, or ``None`` when the release has none."""
    import ast
    import importlib.util
    import typing

    found = importlib.util.find_spec("agent")
    folders = list(found.submodule_search_locations or []) if found else []
    for folder in folders:
        path = Path(folder).parent / PARSER_MODULE
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == PARSER:
                namespace: dict[str, Any] = {"json": json, **vars(typing)}
                exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
                return namespace[PARSER]
    return None


def source_of(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


HOME_READ = re.compile(
    r"""(?:environ\s*\.\s*(?:get|setdefault|pop)\s*\(|getenv\s*\(|environ\s*\[)\s*"""
    r"""["']([A-Z][A-Z0-9_]*_HOME)["']"""
)
"""A read of an environment variable named ``…_HOME`` (``os.environ.get("NASTECH_HOME")``,
``os.getenv``, ``os.environ[...]``): where a build, or a fork that renamed ``HERMES_HOME``,
takes a home directory from."""
ALWAYS_HOME = ("HOME", "HERMES_HOME")
"""Pointed at the session's scratch directory whatever the build reads: ``HOME`` for every
``~`` and ``Path.home()``, ``HERMES_HOME`` for Hermes' own modules."""


def home_variables(sources: Iterable[str]) -> tuple[str, ...]:
    """Returns the variables a build reads for a home directory, found in the texts ``sources``
    (its Python files), with :data:`ALWAYS_HOME` first: each is pointed at the session's
    scratch directory, so that nothing the build writes under a home reaches the user's
    (README, "What certification writes")."""
    found = {name for text in sources if "_HOME" in text for name in HOME_READ.findall(text)}
    return (*ALWAYS_HOME, *sorted(found - set(ALWAYS_HOME)))


def isolate(home: str, variables: Iterable[str]) -> None:
    """Points every variable of ``variables`` (and :data:`ALWAYS_HOME`) at ``home``."""
    for name in (*ALWAYS_HOME, *variables):
        os.environ[name] = home


TOKEN_CACHE = "memspec-tiktoken"
"""The folder under ``sys.prefix`` where ``memspec hermes`` fetched the token encodings the
agent downloads on first use (``releases.TOKEN_CACHE``, restated: memspec is not installed
here). ``TIKTOKEN_CACHE_DIR`` points at it, so the agent's first turn needs no network."""


def use_fetched_encodings() -> None:
    """Points ``TIKTOKEN_CACHE_DIR`` at the environment's fetched encodings, when there are."""
    fetched = Path(sys.prefix) / TOKEN_CACHE
    if fetched.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(fetched)


def recorded() -> dict[str, Any]:
    """Returns what ``memspec hermes`` recorded of this environment when it prepared it (its
    ready file, ``memspec-ready`` under ``sys.prefix``): home variables, whether an agent was
    built, what a write does; empty for an environment built some other way."""
    try:
        ready = json.loads((Path(sys.prefix) / "memspec-ready").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return ready if isinstance(ready, dict) else {}


WRITE_FEATURES = ("crash-safe", "durable")
"""The features a recorded write decides (``writes``), not the code's text."""


def store_features(store_class: type, writes: Any = None) -> list[str]:
    """Returns the contract features a class with Hermes' ``MemoryStore`` shape really has, each
    from a mechanism found in its code (docs/hermes.md lists them): ``core`` always, so a store
    that refuses ``replace`` fails the clauses that need it instead of being excused from them;
    ``multi-process`` for a ``_file_lock``; ``drift-guard`` for ``_detect_external_drift``;
    ``threat-scan`` for an ``add`` that calls a ``_scan…`` function; ``batch`` for
    ``apply_batch``. ``crash-safe`` and ``durable`` come from ``writes``, what a recorded write
    of the store did (memspec's strace of one add: a temp file renamed over the file; with it
    synced and the directory synced after, durable), when there is a record; without one,
    from a ``_write_file`` that renames a temp file over the file (and fsyncs the directory)."""
    features = ["core"]
    if callable(getattr(store_class, "apply_batch", None)):
        features.append("batch")
    try:
        import fcntl  # noqa: F401
    except ImportError:
        pass
    else:
        if hasattr(store_class, "_file_lock"):
            features.append("multi-process")
    if isinstance(writes, list):
        features.extend(feature for feature in WRITE_FEATURES if feature in writes)
    else:
        writer = source_of(getattr(store_class, "_write_file", None))
        renames = re.search(
            r"\b(atomic_replace|os\.replace|aiofiles\.os\.replace|os\.rename)\(",
            writer,
        )
        if renames and re.search(r"mkstemp|\.tmp", writer):
            features.append("crash-safe")
            if "O_DIRECTORY" in writer and "fsync" in writer:
                features.append("durable")
    if hasattr(store_class, "_detect_external_drift"):
        features.append("drift-guard")
    if re.search(r"\b_scan\w*\(", source_of(getattr(store_class, "add", None))):
        features.append("threat-scan")
    return features


def detect_features(
    store_class: type,
    tool: Callable[..., Any],
    fence: Any,
    actions: tuple[str, ...] = (),
    parses: bool = True,
    writes: Any = None,
) -> list[str]:
    """Returns the contract features the installed release really has (CONTRACT-19): its
    store's (:func:`store_features`, ``writes`` what a recorded write did), ``batch`` only
    when the tool also takes ``operations``, ``fence`` with the agent's fence builder,
    ``patch`` when the tool offers it, and ``tool`` only with the agent's own argument
    parser."""
    features = store_features(store_class, writes)
    if "batch" in features and "operations" not in inspect.signature(tool).parameters:
        features.remove("batch")
    if fence is not None:
        features.insert(features.index("core") + 1 + ("batch" in features), "fence")
    if "patch" in actions:
        features.append("patch")
    if parses and tool_schema(inspect.getmodule(tool)) is not None:
        features.append("tool")
    return features


class MemoriesAt:
    """A build's storage provider with its ``memories`` directory at the session's root: a path
    ``memories/NAME`` names ``NAME`` in the root, through a provider of the build's own class
    rooted at the root's parent; every other path is the build's provider's."""

    def __init__(self, storage: Any, moved: Any, name: str) -> None:
        self.storage, self.moved, self.name = storage, moved, name

    def __getattr__(self, attribute: str) -> Any:
        own = getattr(self.storage, attribute)
        if not callable(own):
            return own

        def call(*args: Any, **kwargs: Any) -> Any:
            path = args[0] if args else None
            if isinstance(path, str) and path.split("/", 1)[0] == "memories":
                moved = self.name + path[len("memories") :]
                return getattr(self.moved, attribute)(moved, *args[1:], **kwargs)
            return own(*args, **kwargs)

        return call


def storage_at(storage: Any, root: Path) -> Callable[[], Any]:
    """Returns the ``get_storage`` of a session on ``root``: a build whose memory tool writes
    its files in ``get_memory_dir()`` and reads them through a storage provider rooted at its
    home (hermes-cld 0.1.2: ``memories/MEMORY.md``) must read them where it writes them. The
    build's own provider when its class cannot be rooted elsewhere."""
    try:
        moved = type(storage)(root.parent)
    except Exception:  # a provider of another shape: left as it is
        return lambda: storage
    view = MemoriesAt(storage, moved, root.name)
    return lambda: view


class HermesSession:
    """One contract session on a root, served by one Hermes ``MemoryStore``."""

    def __init__(self, root: Path, memory_limit: int, user_limit: int) -> None:
        from tools import memory_tool as module

        try:
            from agent.memory_manager import build_memory_context_block as fence
        except ImportError:
            fence = None
        module.get_memory_dir = lambda: root  # Hermes' profile-directory indirection.
        storage = getattr(module, "get_storage", None)
        if callable(storage):  # a build that reads its files through a storage provider
            module.get_storage = storage_at(storage(), root)
        self.module = module
        self.fence_builder = fence
        self.store = module.MemoryStore(memory_char_limit=memory_limit, user_char_limit=user_limit)
        self.tool = module.memory_tool
        self.is_async = inspect.iscoroutinefunction(self.tool)
        self.loop = asyncio.new_event_loop() if self.is_async else None
        self.actions = schema_actions(module)
        parses = argument_parser() is not None
        writes = recorded().get("writes")
        self.features = detect_features(
            module.MemoryStore, self.tool, fence, self.actions, parses, writes
        )
        if not parses:
            print(
                f"tool feature not claimed: the agent has no {PARSER} in {PARSER_MODULE}; it "
                "checks a model's argument text inline and calls the model again on invalid JSON",
                file=sys.stderr,
            )
        self.limits = (memory_limit, user_limit)
        self.agent: Any = None  # hermes_agent.HermesAgentSession when the release's agent runs

    def _run(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            assert self.loop is not None
            return self.loop.run_until_complete(value)
        return value

    def _mutate(self, target: Any, **arguments: Any) -> Answer:
        reset = getattr(self.store, "reset_consolidation_failures", None)
        if callable(reset):
            reset()
        answer = self._run(self.tool(target=target, store=self.store, **arguments))
        return classify(json.loads(answer))

    def _tool_call(self, text: Any) -> str:
        """Returns the text the model reads for one call: the agent's own parse of the argument
        text, then ``memory_tool`` with the arguments as the agent passes them; the JSON text
        either returns is passed on untouched."""
        parse = argument_parser()
        if parse is None:  # not claimed then (detect_features): asked anyway, a gap of ours
            raise Unmapped(f"the release has no {PARSER} in {PARSER_MODULE}")
        arguments, refusal = parse(text)
        if refusal is not None:
            return refusal
        reset = getattr(self.store, "reset_consolidation_failures", None)
        if callable(reset):
            reset()
        answer = self.tool(
            action=arguments.get("action"),
            target=arguments.get("target", "memory"),
            content=arguments.get("content"),
            old_text=arguments.get("old_text"),
            operations=arguments.get("operations"),
            store=self.store,
        )
        return str(self._run(answer))

    def handle(self, op: str, request: Request) -> Answer:
        """Returns the answer fields for one request (Hermes' exceptions propagate)."""
        target = request.get("target")
        if op == "load":
            self._run(self.store.load_from_disk())
            return {"ok": True, "code": "OK"}
        if op in ("entries", "snapshot"):
            if target not in TARGET_LISTS:
                return {"ok": False, "code": "E_TARGET", "message": f"unknown target {target!r}"}
            if op == "entries":
                entries = list(getattr(self.store, TARGET_LISTS[target]))
                return {"ok": True, "code": "OK", "entries": entries}
            snapshot = self.store.format_for_system_prompt(target)
            return {"ok": True, "code": "OK", "snapshot": snapshot}
        if op == "fence":
            if self.fence_builder is None:
                return {"ok": False, "code": "E_UNSUPPORTED", "message": "no fence builder"}
            return {"ok": True, "code": "OK", "block": self.fence_builder(request.get("raw"))}
        if op == "add":
            return self._mutate(target, action="add", content=request.get("content"))
        if op == "replace":
            return self._mutate(
                target,
                action="replace",
                old_text=request.get("old_text"),
                content=request.get("new_content"),
            )
        if op == "remove":
            return self._mutate(target, action="remove", old_text=request.get("old_text"))
        if op == "patch" and "patch" in self.actions:
            return self._mutate(
                target,
                action="patch",
                old_text=request.get("old_text"),
                content=request.get("content"),
            )
        if op.startswith("agent_") and self.agent is not None:
            return self.agent.handle(op, request)
        if op == "tool_schema" and "tool" in self.features:
            schema = tool_schema(self.module)
            if schema is None:  # not claimed then (detect_features): asked anyway, a gap of ours
                raise Unmapped("the release's memory tool has no function-calling schema")
            return {"ok": True, "code": "OK", "schema": schema}
        if op == "tool_call" and "tool" in self.features:
            return {"ok": True, "code": "OK", "result": self._tool_call(request.get("arguments"))}
        if op == "batch" and "batch" in self.features:
            # The registry hands the tool action "" when the model sends only operations.
            return self._mutate(target, action="", operations=request.get("operations"))
        return {"ok": False, "code": "E_UNSUPPORTED", "message": f"op {op!r} is not supported"}


def installed_distribution() -> Any:
    """Returns the installed distribution that ships the memory tool, or None (found by its
    files, as memspec.conformance.hermes.imports.memory_modules does)."""
    for found in metadata.distributions():
        if any(str(path) == MEMORY_TOOL for path in found.files or []):
            return found
    return None


def name_and_version(found: Any) -> tuple[str, str]:
    """Returns the name and version of ``found``, the installed distribution that ships the
    memory tool (:func:`installed_distribution`), or ``("hermes", "")`` when there is none."""
    return (found.metadata["Name"], found.version) if found is not None else ("hermes", "")


def _agent_module() -> Any:
    """Returns the agent driver beside this file (loaded by path: ``-I`` keeps it off sys.path)."""
    import importlib.util

    path = Path(__file__).with_name("agent.py")
    spec = importlib.util.spec_from_file_location("hermes_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROBE_BASE = "You are memspec's probe of this agent."
PROBE_TURN = ("memspec probe", "Noted.")
"""The user message and the scripted reply of the probe's one turn."""


def build_agent(agent: Any) -> str:
    """Builds the release's agent as ``agent_start`` does (its identity, its store, its
    providers, its system prompt) and has it take one turn as ``agent_turn`` does; returns
    ``""``, or why not: the exception its code raised, as one line (an import that exits on a
    missing dependency, a policy that refuses the model's endpoint, a turn that reaches for the
    network for something memspec did not fetch beforehand)."""
    stage = "building the agent"
    try:
        agent.start(PROBE_BASE, [])
        stage = "the built agent's first turn"
        agent.turn(*PROBE_TURN)
    except (Exception, SystemExit) as error:
        text = (str(error).strip().splitlines() or [""])[0][:300]
        return f"{stage} failed: {type(error).__name__}: {text}"
    return ""


def agent_evidence(agent: Any) -> str:
    """Returns ``""`` when an agent of this release was built (``agent`` is only claimed then),
    else why not: what ``memspec hermes`` recorded when it built one in the environment, or,
    without a record, a build here and now (:func:`build_agent`)."""
    ready = recorded()
    if "agent_built" not in ready:
        return build_agent(agent)
    if ready["agent_built"] is True:
        return ""
    return str(ready.get("agent_declined") or "no agent was built in this environment")


def _open(request: Request) -> tuple[HermesSession, Answer]:
    root = request.get("root")
    if not isinstance(root, str) or not os.path.isdir(root):
        raise BadOpen(f"open needs 'root', an existing directory; got {root!r}")
    # DEFAULT_LIMITS of memspec.spec.targets, restated: this file runs in the Hermes environment,
    # where memspec is not installed (tests/unit/test_judges.py keeps the two equal).
    session = HermesSession(
        Path(root).absolute(),
        int(request.get("memory_char_limit", 2200)),
        int(request.get("user_char_limit", 1375)),
    )
    agents = _agent_module()
    home = os.environ.get("HERMES_HOME")
    found = installed_distribution()  # one scan of the environment's distributions
    session.agent, why = agents.open_agent(found, Path(home) if home else None, session.limits)
    if session.agent is not None:
        why = agent_evidence(session.agent)
    if session.agent is not None and not why:
        session.features.append("agent")
    else:
        session.agent = None
        print(f"agent feature not claimed: {why}", file=sys.stderr)
    name, version = name_and_version(found)
    variant = "async" if session.is_async else "sync"
    return session, {
        "ok": True,
        "code": "OK",
        "features": session.features,
        "backend": f"{name} ({variant} memory tool)",
        "version": version,
    }


def serve(stdin: Any, stdout: Any) -> int:
    """Answers requests until stdin closes; returns the exit status."""
    session: HermesSession | None = None
    for line in stdin:
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError as error:
            answer: Answer = {"ok": False, "code": "E_INVALID", "message": error.msg}
            request: Request = {}
        else:
            # A request as sent: each field is checked where it is read, since one may hold
            # another type on purpose (CONTRACT-13).
            request = cast(Request, parsed if isinstance(parsed, dict) else {})
            op = request.get("op")
            try:
                if op == "open":
                    session, answer = _open(request)
                elif session is None:
                    answer = {"ok": False, "code": "E_INVALID", "message": "send 'open' first"}
                else:
                    answer = session.handle(str(op), request)
            except Unmapped as gap:
                print(f"ADAPTER GAP (not a Hermes defect): {gap}", file=sys.stderr)
                return EXIT_ADAPTER_GAP
            except BadOpen as error:
                answer = {"ok": False, "code": "E_INVALID", "message": str(error)}
        stdout.write(json.dumps({"id": request.get("id"), **answer}) + "\n")
        stdout.flush()
    return 0


def probe_agent() -> dict[str, Any]:
    """Returns whether the release's agent can be built here, as ``memspec hermes`` records it
    (``agent_built`` and, when not, ``agent_declined``, the reason)."""
    home = os.environ.get("HERMES_HOME")
    agent, why = _agent_module().open_agent(
        installed_distribution(), Path(home) if home else None, (2200, 1375)
    )
    why = why or build_agent(agent)
    return {"agent_built": not why, **({"agent_declined": why} if why else {})}


def probe_write(root: Path) -> dict[str, Any]:
    """Loads a store on ``root`` and adds one entry through the tool: the write whose system
    calls ``memspec hermes`` records (under strace) to decide ``crash-safe`` and ``durable``."""
    session = HermesSession(root, 2200, 1375)
    session.handle("load", {})
    return dict(session.handle("add", {"target": "memory", "content": "memspec probe entry"}))


def _sources() -> list[str]:
    """Returns the Python files of the distribution that ships the memory tool, as text."""
    found = installed_distribution()
    texts = []
    for path in (found.files or []) if found is not None else []:
        if str(path).endswith(".py"):
            try:
                texts.append(Path(found.locate_file(path)).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
    return texts


def private_home() -> str:
    """Points every home the build reads (:func:`home_variables`, as recorded when the
    environment was prepared, else found now) at a new scratch directory and returns it, for the
    caller to remove: nothing Hermes writes under a home reaches the user's."""
    home = tempfile.mkdtemp(prefix="memspec-hermes-home-")
    variables = recorded().get("home_variables")
    if not isinstance(variables, list):
        variables = home_variables(_sources())
    isolate(home, variables)
    return home


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one session; Hermes' exceptions end it with status 1 and a traceback on stderr.
    Every home the build reads (:func:`home_variables`, as recorded when the environment was
    prepared, else found now) is a private scratch directory, removed at the end. With
    ``--probe-agent`` or ``--probe-write ROOT`` it prints one JSON line of evidence instead
    (:func:`probe_agent`, :func:`probe_write`)."""
    argv = sys.argv[1:] if argv is None else argv
    home = private_home()
    use_fetched_encodings()
    try:
        if argv[:1] in (["--probe-agent"], ["--probe-write"]):
            protocol, sys.stdout = sys.stdout, sys.stderr  # what the build prints is not ours
            found = probe_agent() if argv[0] == "--probe-agent" else probe_write(Path(argv[1]))
            protocol.write(json.dumps(found) + "\n")
            return 0
        return serve(sys.stdin, sys.stdout)
    except Exception:
        print("hermes raised (a backend defect, CONTRACT-6):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return EXIT_DEFECT
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
