"""What the Hermes agent driver finds in a release's code, on small fixtures (no Hermes)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from memspec.conformance import hermes_agent, hermes_imports
from memspec.conformance.hermes import find_memory_tool
from memspec.conformance.hermes_agent import (
    BadRequest,
    agent_methods,
    agent_needs,
    missing_seams,
    parse_provider,
    runtime_requirements,
)
from memspec.conformance.hermes_imports import agent_closure, agent_modules

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


def test_only_the_agents_imports_are_installed_at_the_releases_pins(tmp_path: Path) -> None:
    for path, text in AGENT_FIXTURE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text), encoding="utf-8")
    listing = [{"name": "fork", "version": "1", "requires": AGENT_REQUIRES,
                "files": list(AGENT_FIXTURE), "base": str(tmp_path)}]  # fmt: skip
    installed = find_memory_tool(listing, "fork==1")
    assert installed.needs.pins == ("pyyaml==6.0.3",)
    assert installed.agent.pins == (
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
