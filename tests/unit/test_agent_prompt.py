"""The judge of AGENT-1 (spec/agent.py): the prompt holds the base and the blocks, each a part of
its own, with text of the agent's own allowed around them; AGENT-2 holds that text fixed."""

from __future__ import annotations

from memspec.spec.agent import (
    AgentState,
    Recall,
    Script,
    after_turn,
    answered_active,
    api_user_content,
    holds_parts,
    judge_rebuild,
    judge_start,
    judge_turn,
    kept_history,
    prompt_parts,
    resynced,
    start_state,
    tools_problem,
    with_answered,
)
from memspec.spec.fence import FENCE_OPEN, frame
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


def _messages(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in pairs]


def test_the_next_turn_is_judged_on_the_history_the_agent_kept() -> None:
    # a history stored without the reply is AGENT-5's at its own turn; the next turn that sends
    # copies of what was stored breaks nothing more (AGENT-4 holds)
    state = _started(BASE)
    sent = _messages(("system", BASE), ("user", "hi"))
    answer = {
        "system": BASE,
        "messages": sent,
        "history": _messages(("user", "hi")),
        "prefetches": 0,
    }
    first, _ = judge_turn(answer, state, "hi", "ok", started=0.0, elapsed=0.0)
    assert [p.clause for p in first] == ["AGENT-5"]
    state = after_turn(state, "hi", "ok", 0, 0.0, kept=kept_history(answer))
    sent = _messages(("system", BASE), ("user", "hi"), ("user", "more"))
    kept = _messages(("user", "hi"), ("user", "more"), ("assistant", "ok"))
    answer = {"system": BASE, "messages": sent, "history": kept, "prefetches": 0}
    assert judge_turn(answer, state, "more", "ok", started=0.0, elapsed=0.0)[0] == []
    # the model's history, had it been kept, would have blamed AGENT-4 too
    model = after_turn(_started(BASE), "hi", "ok", 0, 0.0)
    found, _ = judge_turn(answer, model, "more", "ok", started=0.0, elapsed=0.0)
    assert "AGENT-4" in [p.clause for p in found]


def test_after_a_turn_that_broke_the_next_answer_says_what_was_kept() -> None:
    state = after_turn(_started(BASE), "lost", "never", 0, 0.0)  # the model's guess
    answer = {"history": _messages(("user", "next"), ("assistant", "ok"))}
    assert resynced(state, answer, "next", "ok").history == ()
    # an answer that does not end with this turn tells nothing: the state stays
    assert resynced(state, {"history": []}, "next", "ok") == state


def test_a_turn_that_recalled_a_later_call_used_those_calls() -> None:
    recall = tuple(Recall("text", f"fact {n}") for n in range(4))
    state = start_state(BASE, [], [Script("p", (), recall)])
    state = with_answered(state, {"system": BASE})
    twice = api_user_content("q", frame("fact 1"))
    answer = {
        "system": BASE,
        "messages": _messages(("system", BASE), ("user", twice)),
        "history": _messages(("user", "q"), ("assistant", "ok")),
        "prefetches": 1,
    }
    problems, used = judge_turn(answer, state, "q", "ok", started=0.0, elapsed=0.0)
    assert [p.clause for p in problems] == ["AGENT-6"] and used == 2
    # the next turn then recalls the call after those two: no FENCE-6 for it
    state = after_turn(state, "q", "ok", used, 0.0, kept=kept_history(answer))
    assert state.calls == 2


def test_a_block_put_in_the_system_prompt_is_judged_there_alone() -> None:
    state = start_state(BASE, [], [Script("p", (), (Recall("text", "likes Go"),))])
    state = with_answered(state, {"system": BASE})
    system = BASE + "\n\nRecalled: likes Go"
    answer = {
        "system": system,
        "messages": _messages(("system", system), ("user", "q")),
        "history": _messages(("user", "q"), ("assistant", "ok")),
        "prefetches": 1,
    }
    problems, _ = judge_turn(answer, state, "q", "ok", started=0.0, elapsed=0.0)
    assert [p.clause for p in problems] == ["FENCE-6"], problems
    assert FENCE_OPEN not in problems[0].text


def test_the_provider_the_agent_activated_decides_its_tools() -> None:
    scripts = [Script("first", ("first_search",)), Script("second", ("second_search",))]
    wrong = {"providers": [{"name": "first", "active": False}, {"name": "second", "active": True}]}
    assert answered_active(wrong, scripts) == 1
    answer = {**wrong, "tools": ["memory", "second_search"], "system": BASE}
    clauses = [p.clause for p in judge_start(answer, BASE, [], scripts)]
    assert clauses == ["PROV-2", "PROV-2"], clauses  # both statuses; the tools follow them
    assert answered_active({"providers": []}, scripts) is None
    # both answered active: the one whose tools the agent offers is the one it runs
    both = [{"name": "first", "active": True}, {"name": "second", "active": True}]
    assert answered_active({"providers": both, "tools": ["memory", "second_search"]}, scripts) == 1
    assert answered_active({"providers": both, "tools": ["memory"]}, scripts) is None
