"""Every check of the agent feature can fail: the reference store and the Node backend pass each
``agent.*`` check, and an agent broken in one place (``tests/backends/agent_broken.py``) fails
the check of its defect with an ``AssertionError`` that opens with the clause it breaks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memspec.conformance.checks.agent import AgentRun
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import ClauseFailures, Violation, verdict_of
from memspec.spec.problems import Problem
from tests.power.test_checks_power import REFERENCE, assert_fails_on, run_check

BROKEN = "tests.backends.agent_broken"
AGENT_CHECKS = sorted(name for name in all_checks() if name.startswith("agent."))
NODE = Path(__file__).resolve().parents[2] / "backends" / "node" / "memspec_backend.js"

CAUGHT = [
    ("joined_by_one_newline", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-1"),
    ("rebuilt_every_turn", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-2"),
    ("rebuilt_every_turn", "agent.random_turns_writes_and_rebuilds", "AGENT-2"),
    ("live_state_in_the_prompt", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-2"),
    ("live_state_in_the_prompt", "agent.random_turns_writes_and_rebuilds", "AGENT-2"),
    ("frozen_forever", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-3"),
    ("frozen_forever", "agent.random_turns_writes_and_rebuilds", "AGENT-3"),
    ("sends_only_the_current_message", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-4"),
    ("forgets_replies", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-5"),
    ("two_prefetches_per_turn", "agent.failing_providers_are_isolated", "AGENT-6"),
    ("two_prefetches_per_turn", "agent.random_turns_writes_and_rebuilds", "AGENT-6"),
    ("refuses_what_it_claims", "agent.unsupported_without_the_feature", "AGENT-7"),
    ("stores_the_block", "agent.prompt_is_frozen_between_rebuild_points", "FENCE-6"),
    ("block_in_the_system_prompt", "agent.prompt_is_frozen_between_rebuild_points", "FENCE-6"),
    (
        "resends_with_the_current_block",
        "agent.prompt_is_frozen_between_rebuild_points",
        "FENCE-6",
    ),
    ("builtin_dropped_on_failure", "agent.failing_providers_are_isolated", "PROV-1"),
    # a start that dies only with a provider configured: the provider took the store away
    ("dies_with_a_provider", "agent.prompt_is_frozen_between_rebuild_points", "PROV-1"),
    ("dies_with_a_provider", "agent.failing_providers_are_isolated", "PROV-1"),
    ("dies_at_start", "agent.prompt_is_frozen_between_rebuild_points", "AGENT-1"),
    ("second_provider_replaces_the_first", "agent.one_external_provider", "PROV-2"),
    ("raising_provider_breaks_the_turn", "agent.failing_providers_are_isolated", "PROV-3"),
    ("non_string_passed_through", "agent.failing_providers_are_isolated", "PROV-3"),
    ("unbounded_hang", "agent.failing_providers_are_isolated", "PROV-4"),
    ("shadowing_tools", "agent.one_external_provider", "PROV-5"),
]


def test_every_agent_check_is_proven() -> None:
    """Every agent check has a broken agent that fails it."""
    assert sorted({name for _, name, _ in CAUGHT}) == AGENT_CHECKS


@pytest.mark.parametrize("name", AGENT_CHECKS)
def test_the_reference_passes(name: str, tmp_path: Path) -> None:
    run_check(name, REFERENCE, tmp_path)


@pytest.mark.parametrize("name", AGENT_CHECKS)
def test_an_agent_resending_what_it_sent_passes(name: str, tmp_path: Path) -> None:
    """An earlier user message sent again with exactly its own turn's bytes conforms (AGENT-4)."""
    run_check(name, f"{BROKEN}:resends_what_it_sent", tmp_path)


@pytest.mark.parametrize("name", AGENT_CHECKS)
def test_an_agent_with_fixed_text_of_its_own_passes(name: str, tmp_path: Path) -> None:
    """Fixed text and tools of the agent's own around the base, the blocks and the built-in and
    provider tools conform (AGENT-1, PROV-5)."""
    run_check(name, f"{BROKEN}:own_tools", tmp_path)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
@pytest.mark.parametrize("name", AGENT_CHECKS)
def test_the_node_backend_passes(name: str, tmp_path: Path) -> None:
    run_check(name, CommandBackend(f"node {NODE}", timeout=20), tmp_path)


@pytest.mark.parametrize(("factory", "name", "clause"), CAUGHT)
def test_a_broken_agent_fails_its_clause(
    factory: str, name: str, clause: str, tmp_path: Path
) -> None:
    """An agent with one defect fails the check of that defect, citing the clause first."""
    assert_fails_on(clause, name, f"{BROKEN}:{factory}", tmp_path)


def test_an_answer_breaking_several_clauses_fails_each(tmp_path: Path) -> None:
    """Each problem a judge found is a violation of its own clause: recorded one by one when the
    run goes on, raised together when it stops (a Hypothesis search)."""
    problems = [Problem("AGENT-2", "the prompt changed"), Problem("AGENT-5", "no reply stored")]
    ctx = CheckContext(InProcessBackend(REFERENCE), tmp_path, tmp_path, PROFILES["ci"])
    session = ctx.backend.open(tmp_path)
    try:
        AgentRun(ctx, session).fail(problems)
        assert [verdict_of(error).blamed for error in ctx.failures] == ["AGENT-2", "AGENT-5"]
        assert all(isinstance(error, Violation) for error in ctx.failures)
        with pytest.raises(ClauseFailures) as stopped:
            AgentRun(ctx, session, keep_going=False).fail(problems)
        assert [f.clause for f in stopped.value.failures] == ["AGENT-2", "AGENT-5"]
        with pytest.raises(Violation, match=r"^AGENT-5: no reply stored$"):
            AgentRun(ctx, session, keep_going=False).fail(problems[1:])
    finally:
        session.close()
