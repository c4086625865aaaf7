"""What the Hermes agent driver finds in a release's code, on small fixtures (no Hermes)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from memspec.conformance.hermes import agent_pins
from memspec.conformance.hermes_agent import (
    BadRequest,
    agent_methods,
    missing_seams,
    parse_provider,
    runtime_requirements,
)

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
    assert agent_pins(requires) == tuple(requires[:4])


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
