"""Checks of the optional ``agent`` feature: the system prompt, a turn's API messages, the stored
history and the external provider, through the ``agent`` ops (AGENT, PROV, FENCE-6).

Each check plays a scenario and keeps the state the agent must hold
(:class:`~memspec.spec.agent.AgentState`); the judges of ``spec/agent.py`` decide every answer, and
the check goes on after a failure. What a backend that does not claim ``agent`` answers binds every
backend (AGENT-7).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memspec.conformance.checks._disk import put
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.search import plan
from memspec.conformance.transport.backend import BackendDefect, Session
from memspec.conformance.transport.wire import Answer, Fields, RecallStep, Script
from memspec.conformance.verdict.findings import (
    ClauseFailures,
    HarnessError,
    Unverified,
    Violation,
)
from memspec.spec import codes
from memspec.spec.agent import (
    PREFETCH_TIMEOUT_S,
    REBUILD_POINTS,
    AgentState,
    after_turn,
    answered_active,
    broken_turn_clause,
    judge_rebuild,
    judge_start,
    judge_turn,
    kept_history,
    parse_scripts,
    rebuilt,
    resynced,
    sent_user_content,
    start_state,
    with_answered,
)
from memspec.spec.problems import Problem
from memspec.spec.targets import TARGETS

BASE = "You are a careful assistant."
HANG_S = PREFETCH_TIMEOUT_S + 3.0
"""How long the scripted hang lasts: well past the timeout of PROV-4."""


def _recall(*texts: str) -> list[RecallStep]:
    return [{"text": text} for text in texts]


class AgentRun:
    """One agent over one session of a check, with the state it must hold and what it got wrong; a
    contract break on an op (:meth:`_ask`) is judged on ``clause``, the rule the op exercised,
    and an op answered ``E_UNSUPPORTED`` on AGENT-7 (a claimed op answers)."""

    def __init__(self, ctx: CheckContext, session: Session, *, keep_going: bool = True) -> None:
        self.ctx = ctx
        self.session = session
        self.keep_going = keep_going
        self.state: AgentState | None = None
        self.written: list[str] = []
        self.started = False
        """Whether the last ``agent_start`` answered: turns and rebuilds of an agent that never
        started have nothing to judge (the start's failure stands)."""

    def fail(self, problems: Sequence[Problem]) -> None:
        """Records each problem as a violation of its clause and goes on, or, when the run does
        not keep going, raises them at once (a Hypothesis search shrinks on it): the one
        violation, or every one in a :class:`ClauseFailures`."""
        violations = [Violation.of(problem) for problem in problems]
        if violations and not self.keep_going:
            raise violations[0] if len(violations) == 1 else ClauseFailures(violations, False)
        for violation in violations:
            with self.ctx.keep_going():
                raise violation

    def _ask(self, clause: str, op: str, **fields: Any) -> Answer | None:
        try:
            answer = self.session.request(op, **fields)
        except BackendDefect as defect:
            if op == "agent_start" and clause == "AGENT-1" and fields.get("providers"):
                clause = self._start_without_providers()
            self.fail([Problem(clause, f"{op} {fields} broke instead of answering: {defect}")])
            return None
        if answer.get("code") == codes.E_UNSUPPORTED:  # of a claimed feature: AGENT-7's
            text = f"{op} answered {answer}, though the backend claims 'agent'"
            self.fail([Problem("AGENT-7", text)])
            return None
        if answer.get("code") != codes.OK:
            self.fail([Problem(clause, f"{op} {fields} answered {answer}, expected OK")])
            return None
        return answer

    def _start_without_providers(self) -> str:
        """Returns the clause an ``agent_start`` that broke with providers configured breaks:
        PROV-1 when the agent starts without any, in a session of its own (configuring a
        provider took the store away: no prompt holds its blocks), else AGENT-1 (it does not
        start at all; matrix-agent-symphony 0.1.0 dies only with a provider)."""
        try:
            with self.ctx.session() as bare:
                bare.request("load")
                answer = bare.request("agent_start", base=BASE, providers=[])
        except BackendDefect:
            return "AGENT-1"
        return "PROV-1" if answer.get("code") == codes.OK else "AGENT-1"

    def blocks(self) -> list[str | None]:
        """The blocks of a fresh load of the store, memory then user: what the agent loads at a
        rebuild point (AGENT-3), whether it shares this session's store or opens its own."""
        self.session.request("load")
        return [self.session.request("snapshot", target=t).get("snapshot") for t in TARGETS]

    def start(self, providers: list[Script], clause: str = "AGENT-1") -> None:
        """``agent_start`` with these scripts, judged (AGENT-1, PROV-2, PROV-3, PROV-5)."""
        scripts = parse_scripts(providers)
        answer = self._ask(clause, "agent_start", base=BASE, providers=providers)
        self.started = answer is not None
        blocks = self.blocks()
        active = answered_active(answer, scripts) if answer is not None else None
        self.state = start_state(BASE, blocks, scripts, active)
        if answer is not None:
            self.fail(judge_start(answer, BASE, blocks, scripts))
            self.state = with_answered(self.state, answer)

    def turn(self, user: str, reply: str = "Noted.", clause: str = "AGENT-4") -> None:
        """One turn, judged (AGENT-2, AGENT-4, AGENT-5, AGENT-6, FENCE-6, PROV-1, PROV-3,
        PROV-4); ``clause`` is blamed if the turn breaks."""
        if self.state is None:
            raise HarnessError("a turn before agent_start")
        if not self.started:
            return
        started = time.monotonic()
        broke = broken_turn_clause(self.state, started, clause)
        answer = self._ask(broke, "agent_turn", user=user, reply=reply)
        elapsed = time.monotonic() - started
        prefetches = 1 if self.state.provider and self.state.hang_ends <= started else 0
        sent = None
        if answer is not None:
            if self.state.unknown:  # an earlier turn broke: its answer says what was kept
                self.state = resynced(self.state, answer, user, reply)
            problems, prefetches = judge_turn(
                answer, self.state, user, reply, started=started, elapsed=elapsed
            )
            self.fail(problems)
            sent = sent_user_content(answer, user)
        kept = kept_history(answer)
        state = after_turn(self.state, user, reply, prefetches, started, sent, kept)
        # a turn that broke kept what nobody knows: the next turn's answer tells (resynced)
        self.state = replace(state, unknown=answer is None or state.unknown)

    def write(self, content: str, other: Session | None = None) -> None:
        """Adds an entry to memory in this session, or in ``other``, between turns."""
        answer = (other or self.session).request("add", target="memory", content=content)
        if answer["code"] != codes.OK:
            raise Unverified(f"the check needs add {content!r} to succeed; it gave {answer}")
        self.written.append(content)

    def rebuild(self, point: str) -> None:
        """``agent_rebuild`` at ``point``, judged (AGENT-3)."""
        if self.state is None:
            raise HarnessError("a rebuild before agent_start")
        if not self.started:
            return
        answer = self._ask("AGENT-3", "agent_rebuild", point=point)
        blocks = self.blocks()
        if answer is not None:
            self.fail(judge_rebuild(answer, self.state, point, blocks, self.written))
        self.state = rebuilt(self.state, point, blocks)
        if answer is not None:
            self.state = with_answered(self.state, answer)

    def wait_for_hangs(self) -> None:
        """Sleeps until the provider's last hang has ended (so the next turn must prefetch)."""
        assert self.state is not None
        time.sleep(max(0.0, self.state.hang_ends - time.monotonic()) + 0.2)


@contextmanager
def _sessions(ctx: CheckContext, count: int, root: Path | None = None) -> Iterator[list[Session]]:
    """Yields ``count`` loaded sessions on ``root`` (the check's root by default), each closed
    on the way out, those already open included when a later one fails to open."""
    with ctx.sessions(count, root=root) as sessions:
        for session in sessions:
            session.request("load")
        yield list(sessions)


@check("AGENT-7", "CONTRACT-14", features=(), id="agent.unsupported_without_the_feature")
def unsupported_without_the_feature(ctx: CheckContext) -> None:
    """A backend that does not claim ``agent`` answers each agent op ``E_UNSUPPORTED``; one that
    claims it answers them (AGENT-7). Both transports: the in-process one answers for a Python
    store that does not claim the feature, a command backend answers itself."""
    put(ctx.root, "memory", b"User prefers tabs")
    requests: list[tuple[str, Fields]] = [
        ("agent_start", {"base": BASE, "providers": []}),
        ("agent_turn", {"user": "hello", "reply": "hi"}),
        ("agent_rebuild", {"point": "compression"}),
    ]
    with _sessions(ctx, 1) as (session,):
        claimed = "agent" in session.features
        answers = [(op, fields, session.request(op, **fields)) for op, fields in requests]
    for op, fields, answer in answers:
        if not claimed:
            # AGENT-7: an op of a feature not claimed answers E_UNSUPPORTED, ok false.
            if not (answer["ok"], answer["code"]) == (False, codes.E_UNSUPPORTED):
                raise Violation(
                    "AGENT-7",
                    f"the backend does not claim 'agent', yet {op} {fields} answered "
                    f"{answer}; expected ok false with E_UNSUPPORTED (claim 'agent' if it is "
                    "implemented)",
                )
        else:
            # AGENT-7: a claimed op answers, never E_UNSUPPORTED.
            if answer["code"] != codes.OK:
                raise Violation(
                    "AGENT-7",
                    f"the backend claims 'agent', yet {op} {fields} answered {answer}; expected OK",
                )


@check(
    "AGENT-1", "AGENT-2", "AGENT-3", "AGENT-4", "AGENT-5", "FENCE-6",
    features=("agent",),
    id="agent.prompt_is_frozen_between_rebuild_points",
)  # fmt: skip
def prompt_is_frozen_between_rebuild_points(ctx: CheckContext) -> None:
    """The prompt is the base and the snapshot blocks (AGENT-1), byte-identical over turns while
    this session and another one write the store (AGENT-2), built again from a fresh load at
    ``compression``, ``resume`` and ``new_session`` (AGENT-3); each turn sends the prompt, the
    history and the recalled block on the current user message only (AGENT-4, FENCE-6), and the
    history keeps the user's text and the reply (AGENT-5)."""
    put(ctx.root, "memory", b"User prefers tabs")
    put(ctx.root, "user", b"Name: Ada")
    recall = _recall(*(f"Recalled fact number {n}" for n in range(1, 12)))
    with _sessions(ctx, 2) as (session, other):
        run = AgentRun(ctx, session)
        run.start([{"name": "notes", "tools": ["notes_search"], "recall": recall}])
        run.turn("Which editor do I use?", "Let me check.")
        run.write("Project uses Go 1.22")
        run.turn("And the language?", "Go.")
        run.write("Timezone: UTC", other)
        run.turn("What time is it for me?")
        run.rebuild("compression")
        run.turn("After compression, what do you know?")
        run.write("Editor: vim", other)
        run.rebuild("resume")
        run.turn("Resumed: anything new?")
        run.write("Prefers short answers")
        run.rebuild("new_session")
        run.turn("A new session: hello")
        run.turn("Second turn of the new session")


@check(
    "PROV-1", "PROV-3", "PROV-4", "AGENT-6",
    features=("agent",),
    id="agent.failing_providers_are_isolated",
)  # fmt: skip
def failing_providers_are_isolated(ctx: CheckContext) -> None:
    """A provider that raises, returns something that is not a string, hangs past the timeout or
    cannot start costs the turn its block and nothing else: the turn answers, the built-in
    blocks stay in the prompt (PROV-1, PROV-3), a hang is abandoned after
    :data:`~memspec.spec.agent.PREFETCH_TIMEOUT_S` (PROV-4), and each turn prefetches once
    (AGENT-6)."""
    put(ctx.root, "memory", b"User prefers tabs")
    steps: list[RecallStep] = [
        {"text": "First recall"},
        {"raise": "provider is down"},
        {"value": 42},
        {"value": None},
        {"value": ["Listed recall"]},
        {"value": {"text": "Recall in an object"}},
        {"text": "Recall after the failures"},
        {"hang": HANG_S, "text": "Recall that came too late"},
    ]
    with _sessions(ctx, 1) as (session,):
        run = AgentRun(ctx, session)
        run.start([{"name": "flaky", "recall": [*steps, {"text": "Recall after the hang"}]}])
        for number, step in enumerate(steps, 1):
            clause = "PROV-4" if "hang" in step else "PROV-3"
            run.turn(f"Question {number}", f"Answer {number}", clause=clause)
        run.turn("Question while the hang may still run", clause="PROV-4")
        run.wait_for_hangs()
        run.turn("Question after the hang", clause="PROV-4")
        run.turn("Question past the script's end", clause="PROV-3")
        run.start([{"name": "offline", "unavailable": True}], clause="PROV-3")
        run.turn("Question with the provider offline", clause="PROV-3")


@check(
    "PROV-2", "PROV-3", "PROV-5",
    features=("agent",),
    id="agent.one_external_provider",
)  # fmt: skip
def one_external_provider(ctx: CheckContext) -> None:
    """A second external provider is refused and the first kept (PROV-2), an unavailable one
    takes no place (PROV-3), and no provider tool named ``memory`` shadows the built-in tool,
    nor does a tool appear twice (PROV-5); the turns recall from the provider kept."""
    put(ctx.root, "memory", b"User prefers tabs")
    first: Script = {
        "name": "first",
        "tools": ["first_search", "memory", "first_search", "first_store"],
        "recall": _recall("Recall of the first provider", "Second recall of the first"),
    }
    second: Script = {
        "name": "second",
        "tools": ["second_search"],
        "recall": _recall("Second's recall"),
    }
    offline: Script = {"name": "offline", "unavailable": True}
    with _sessions(ctx, 1) as (session,):
        run = AgentRun(ctx, session)
        run.start([first, second], clause="PROV-2")
        run.turn("Which provider answers?", clause="PROV-2")
        run.start([offline, second, first], clause="PROV-2")
        run.turn("And now?", clause="PROV-2")
        run.start([{"name": "shadow", "tools": ["memory"], "recall": []}], clause="PROV-5")


WORDS = st.sampled_from(["tabs", "Go", "vim", "UTC", "tea", "Ada", "short", "dark mode"])
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), WORDS),
        st.tuples(st.just("write"), WORDS),
        st.tuples(st.just("write_other"), WORDS),
        st.tuples(st.just("rebuild"), st.sampled_from(REBUILD_POINTS)),
    ),
    min_size=1,
    max_size=12,
)
RECALLS = st.lists(
    st.one_of(
        WORDS.map(lambda word: {"text": f"Recalled: {word}"}),
        st.just({"text": "   "}),
        st.just({"raise": "down"}),
        st.sampled_from([{"value": 7}, {"value": None}, {"value": [1]}]),
    ),
    max_size=8,
)


@check(
    "AGENT-1", "AGENT-2", "AGENT-3", "AGENT-4", "AGENT-5", "AGENT-6", "FENCE-6", "PROV-3",
    features=("agent",),
    id="agent.random_turns_writes_and_rebuilds",
)  # fmt: skip
def random_turns_writes_and_rebuilds(ctx: CheckContext) -> None:
    """Random sequences of turns, writes in this session and another, and rebuild points, with a
    provider whose recall is random (texts, blank text, raises, non-strings), each answer judged
    against the state the agent must hold (AGENT-1 to AGENT-6, FENCE-6, PROV-3). Sized by
    ``profile.examples``; deterministic when the profile derandomizes."""
    counter = iter(range(10**9))

    @given(steps=STEPS, recall=RECALLS)
    def agent_follows_the_model(steps: list[tuple[str, str]], recall: list[RecallStep]) -> None:
        root = ctx.scratch / f"agent-{next(counter)}"
        root.mkdir()
        with _sessions(ctx, 2, root) as (session, other):
            run = AgentRun(ctx, session, keep_going=False)
            run.start([{"name": "random", "recall": recall}])
            for number, (kind, word) in enumerate(steps):
                if kind == "turn":
                    run.turn(f"Turn {number} about {word}", f"Reply {number}")
                elif kind == "rebuild":
                    run.rebuild(word)
                else:
                    run.write(f"Fact {number}: {word}", other if kind == "write_other" else None)

    run = plan(ctx, max_examples=max(5, ctx.profile.examples // 4))
    run.run(run.apply(agent_follows_the_model))
