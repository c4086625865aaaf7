"""The judge of AGENT-1 (spec/agent.py): the prompt holds the base and the blocks, each a part of
its own, with text of the agent's own allowed around them; AGENT-2 holds that text fixed."""

from __future__ import annotations

from memspec.spec.agent import (
    AgentState,
    Script,
    after_turn,
    holds_parts,
    judge_rebuild,
    judge_start,
    judge_turn,
    prompt_parts,
    start_state,
    tools_problem,
    with_answered,
)
from memspec.spec.problems import Problem

BASE = "You are terse."
MEMORY = "MEMORY\nUser prefers tabs"
USER = "USER PROFILE\nName: Ada"
BLOCKS = [MEMORY, USER]
HERMES_LIKE = "\n\n".join(
    [
        BASE,
        "You have persistent memory; use the memory tool to save durable facts.",
        MEMORY,
        USER,
        "Conversation started: Tuesday, December 01, 2026\nModel: scripted",
    ]
)


def test_the_plain_join_holds_the_parts() -> None:
    assert holds_parts("\n\n".join([BASE, *BLOCKS]), prompt_parts(BASE, BLOCKS))


def test_text_of_the_agents_own_may_stand_around_and_between_the_parts() -> None:
    prompt = "\n\n".join(["Guidance", BASE, "Between", MEMORY, "More", USER, "After"])
    assert holds_parts(prompt, prompt_parts(BASE, BLOCKS))
    assert holds_parts(HERMES_LIKE, prompt_parts(BASE, BLOCKS))


def test_a_part_glued_to_other_text_is_not_held() -> None:
    assert not holds_parts(f"{BASE}\n{MEMORY}\n{USER}", prompt_parts(BASE, BLOCKS))
    assert not holds_parts(
        f"{BASE}\n\n{MEMORY} (as of today)\n\n{USER}", prompt_parts(BASE, BLOCKS)
    )
    assert not holds_parts(f"{BASE}\n\nNote: {MEMORY}\n\n{USER}", prompt_parts(BASE, BLOCKS))


def test_the_order_is_base_memory_user() -> None:
    assert not holds_parts("\n\n".join([BASE, USER, MEMORY]), prompt_parts(BASE, BLOCKS))
    assert not holds_parts("\n\n".join([MEMORY, BASE, USER]), prompt_parts(BASE, BLOCKS))


def test_a_glued_copy_before_does_not_hide_a_part_of_its_own_after() -> None:
    prompt = "\n\n".join([BASE, f"old: {MEMORY}", MEMORY, USER])
    assert holds_parts(prompt, prompt_parts(BASE, BLOCKS))


def test_a_block_left_out_when_none() -> None:
    assert prompt_parts(BASE, [None, USER]) == [BASE, USER]
    assert holds_parts(f"Intro\n\n{BASE}\n\n{USER}", prompt_parts(BASE, [None, USER]))


def test_judge_start_accepts_an_agents_own_fixed_text() -> None:
    answer = {"system": HERMES_LIKE, "providers": [], "tools": ["memory"]}
    assert judge_start(answer, BASE, BLOCKS, []) == []


def test_judge_start_names_the_clause_of_a_missing_or_glued_block() -> None:
    glued = {"system": f"{BASE}\n{MEMORY}\n\n{USER}", "providers": [], "tools": ["memory"]}
    assert [p.clause for p in judge_start(glued, BASE, BLOCKS, [])] == ["AGENT-1"]
    alone = {"system": BASE, "providers": [], "tools": ["memory"]}
    assert [p.clause for p in judge_start(alone, BASE, BLOCKS, [])] == ["PROV-1"]
    edited = {"system": HERMES_LIKE.replace("tabs", "spaces"), "providers": [], "tools": ["memory"]}
    assert [p.clause for p in judge_start(edited, BASE, BLOCKS, [])] == ["AGENT-1"]


def _started(system: str) -> AgentState:
    return with_answered(start_state(BASE, BLOCKS, []), {"system": system})


def _turn(state: AgentState, system: str) -> list[Problem]:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    answer = {
        "system": system,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        "history": history,
        "prefetches": 0,
    }
    problems, _ = judge_turn(answer, state, "hi", "ok", started=0.0, elapsed=0.0)
    return problems


def test_the_agents_text_is_held_fixed_between_rebuild_points() -> None:
    state = _started(HERMES_LIKE + "\n\nTurn 0")
    assert _turn(state, HERMES_LIKE + "\n\nTurn 0") == []
    assert [p.clause for p in _turn(state, HERMES_LIKE + "\n\nTurn 1")] == ["AGENT-2"]


def test_a_rebuilt_prompt_may_hold_new_text_of_its_own_but_nothing_recalled() -> None:
    state = _started(HERMES_LIKE)
    recalled = "likes Go"
    sent = "hi\n\n<memory-context>\n[System note: recalled]\n\nlikes Go\n</memory-context>"
    state = after_turn(state, "hi", "ok", 0, 0.0, sent=sent)
    blocks = [MEMORY + "\n§\nnew entry", USER]
    rebuilt = "\n\n".join([BASE, "Session 2", *blocks])
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    answer = {"system": rebuilt, "history": history}
    assert judge_rebuild(answer, state, "compression", blocks, ["new entry"]) == []
    leaked = {"system": f"{rebuilt}\n\nRecalled: {recalled}", "history": history}
    problems = judge_rebuild(leaked, state, "compression", blocks, ["new entry"])
    assert [p.clause for p in problems] == ["FENCE-6"], problems
    assert problems[0].text.endswith("(after the rebuild point 'compression')")
    stale = {"system": "\n\n".join([BASE, MEMORY, USER]), "history": history}
    problems = judge_rebuild(stale, state, "compression", blocks, ["new entry"])
    assert [p.clause for p in problems] == ["AGENT-3"], problems


def test_tools_of_the_agents_own_may_stand_around_memory_and_the_providers() -> None:
    scripts = [Script("notes", ("memory", "notes_search", "notes_add")), Script("other", ("x",))]
    assert tools_problem(["memory", "notes_search", "notes_add"], scripts) is None
    own = ["terminal", "memory", "web", "notes_search", "notes_add", "clarify"]
    assert tools_problem(own, scripts) is None
    for wrong in (
        ["notes_search", "memory", "notes_add"],  # a provider tool before memory
        ["memory", "notes_add", "notes_search"],  # the provider's order changed
        ["memory", "memory", "notes_search", "notes_add"],  # memory offered twice
        ["memory", "notes_search", "notes_add", "x"],  # the refused provider's tool
        ["terminal", "notes_search", "notes_add"],  # no memory
    ):
        problem = tools_problem(wrong, scripts)
        assert problem is not None and problem.clause == "PROV-5", wrong
