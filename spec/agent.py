"""The agent around a store: the system prompt, a turn's API messages and the stored history, the
provider scripts of the ``agent`` ops, and the judge of each (AGENT, PROV, FENCE-6).

Everything here is pure: the harness drives a scenario through the contract, keeps an
:class:`AgentState` of what the agent must hold, and asks these judges whether each answer is one
SPEC.md allows (AGENT-1, AGENT-2, AGENT-4, AGENT-5); a judge returns the
:class:`~memspec.spec.problems.Problem` values it found, each with the clause it breaks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from memspec.spec.errors import MemspecError
from memspec.spec.fence import FENCE_CLOSE, FENCE_OPEN, recalled_text
from memspec.spec.problems import Problem

JOINER: Final = "\n\n"
"""What joins the prompt's parts (AGENT-1) and a user message to its recalled block (FENCE-6)."""
BUILTIN_TOOL: Final = "memory"
"""The built-in store's tool, always offered first (PROV-1, PROV-5)."""
REBUILD_POINTS: Final[tuple[str, ...]] = ("new_session", "compression", "resume")
"""The points where the prompt is built again, besides ``agent_start`` (AGENT-3)."""
PREFETCH_TIMEOUT_S: Final = 2.0
"""Seconds after which a prefetch still running is abandoned (PROV-4)."""
TURN_SLACK_S: Final = 1.5
"""Seconds a turn may take beyond :data:`PREFETCH_TIMEOUT_S` for its own work and transport
(PROV-4): a turn whose prefetch hangs answers within their sum."""
MAX_HANG_S: Final = 30.0
"""The longest hang a script may ask for; a longer one is a malformed script."""

Message = tuple[str, str]
"""One message of a conversation: (role, content)."""


class ScriptError(MemspecError, ValueError):
    """A provider script of ``agent_start`` is malformed; the message names the part and what a
    script holds. Backends answer it ``E_INVALID``."""


@dataclass(frozen=True)
class Recall:
    """One step of a scripted provider: ``kind`` is ``text`` (returns ``text``), ``raise`` (raises
    with ``text`` as its message), ``hang`` (returns ``text`` after ``seconds``) or ``value``
    (returns ``value``, a JSON value that is not a string)."""

    kind: str
    text: str = ""
    seconds: float = 0.0
    value: Any = None

    def raw(self) -> str | None:
        """Returns the text this step recalls into the turn, or ``None`` when it contributes
        nothing because it fails: raises, hangs past the timeout, or returns a non-string
        (PROV-3, PROV-4)."""
        if self.kind == "text":
            return self.text
        if self.kind == "hang" and self.seconds < PREFETCH_TIMEOUT_S:
            return self.text
        return None


NOTHING: Final = Recall("text", "")
"""What a provider recalls once its script has no step left."""


@dataclass(frozen=True)
class Script:
    """A provider as the harness scripts it (``agent_start``'s ``providers``): a name, the tool
    names it offers, and one :class:`Recall` per prefetch call, in order; past the last step it
    recalls nothing. ``unavailable`` is a provider that cannot start."""

    name: str
    tools: tuple[str, ...] = ()
    recall: tuple[Recall, ...] = ()
    unavailable: bool = False

    def step(self, index: int) -> Recall:
        """Returns the step of the prefetch call number ``index`` (from 0)."""
        return self.recall[index] if index < len(self.recall) else NOTHING


def _recall_of(raw: object, where: str) -> Recall:
    if not isinstance(raw, Mapping) or len(raw) == 0:
        raise ScriptError(f"{where} must be an object with one of text, raise, hang, value")
    keys = set(raw)
    if keys == {"text"} and isinstance(raw["text"], str):
        return Recall("text", raw["text"])
    if keys == {"raise"} and isinstance(raw["raise"], str):
        return Recall("raise", raw["raise"])
    if keys <= {"hang", "text"} and "hang" in keys:
        seconds, text = raw["hang"], raw.get("text", "")
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or not 0 <= seconds <= MAX_HANG_S
            or not isinstance(text, str)
        ):
            raise ScriptError(
                f"{where}: hang takes seconds from 0 to {MAX_HANG_S:g} and an optional text, "
                f"got {dict(raw)!r}"
            )
        return Recall("hang", text, float(seconds))
    if keys == {"value"} and not isinstance(raw["value"], str):
        return Recall("value", value=raw["value"])
    raise ScriptError(
        f"{where} must be one of {{'text': str}}, {{'raise': str}}, {{'hang': seconds, "
        f"'text'?: str}}, {{'value': non-string}}; got {dict(raw)!r}"
    )


def parse_script(raw: object, index: int = 0) -> Script:
    """Returns the :class:`Script` of one entry of ``agent_start``'s ``providers``; raises
    :class:`ScriptError` naming what is wrong. A script is ``{"name": str, "tools"?: [str],
    "recall"?: [STEP]}`` or ``{"name": str, "unavailable": true}``."""
    where = f"providers[{index}]"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ScriptError(f"{where} must be an object with a non-empty 'name', got {raw!r}")
    extra = sorted(set(raw) - {"name", "tools", "recall", "unavailable"})
    if extra:
        raise ScriptError(f"{where} takes no field {extra[0]!r}")
    unavailable = raw.get("unavailable", False)
    if not isinstance(unavailable, bool):
        raise ScriptError(f"{where}.unavailable must be true or false, got {unavailable!r}")
    tools, steps = raw.get("tools", []), raw.get("recall", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise ScriptError(f"{where}.tools must be a list of non-empty strings, got {tools!r}")
    if not isinstance(steps, list):
        raise ScriptError(f"{where}.recall must be a list of steps, got {steps!r}")
    recall = tuple(_recall_of(step, f"{where}.recall[{n}]") for n, step in enumerate(steps))
    return Script(raw["name"], tuple(tools), recall, unavailable)


def parse_scripts(raw: object) -> tuple[Script, ...]:
    """Returns the scripts of ``agent_start``'s ``providers`` (a list); raises ScriptError."""
    if not isinstance(raw, list):
        raise ScriptError(f"providers must be a list of provider scripts, got {raw!r}")
    return tuple(parse_script(entry, index) for index, entry in enumerate(raw))


# --- what the agent must do ----------------------------------------------------------------


def build_prompt(base: str, blocks: Sequence[str | None]) -> str:
    """Returns the system prompt: ``base``, then each snapshot block that is not ``None`` (memory,
    then user), joined by a blank line (AGENT-1). ``build_prompt("B", ["M", None])`` is
    ``"B\\n\\nM"``."""
    return JOINER.join(prompt_parts(base, blocks))


def prompt_parts(base: str, blocks: Sequence[str | None]) -> list[str]:
    """Returns the parts every prompt holds in order (AGENT-1): ``base``, then each snapshot
    block that is not ``None``, memory's before user's."""
    return [base, *(block for block in blocks if block is not None)]


def _stands_alone(prompt: str, start: int, end: int) -> bool:
    """Whether ``prompt[start:end]`` is a part of its own: at the prompt's start or after a blank
    line, and at its end or before a blank line (AGENT-1)."""
    before = start == 0 or prompt[start - len(JOINER) : start] == JOINER
    return before and (end == len(prompt) or prompt[end : end + len(JOINER)] == JOINER)


def holds_parts(prompt: str, parts: Sequence[str]) -> bool:
    """Whether ``prompt`` holds each of ``parts`` byte for byte, in order, each a part of its own
    (at an end of the prompt or beside a blank line), with any text of the agent's own around them
    (AGENT-1): ``holds_parts("G\\n\\nB\\n\\nM", ["B", "M"])`` is true, ``holds_parts("B\\nM", ["B",
    "M"])`` false."""
    cursor = 0
    for part in parts:
        start = prompt.find(part, cursor)
        while start != -1 and not _stands_alone(prompt, start, start + len(part)):
            start = prompt.find(part, start + 1)
        if start == -1:
            return False
        cursor = start + len(part) + len(JOINER)
    return True


def prompt_problem(
    system: object, parts: Sequence[str], recalled: Sequence[str] = ()
) -> Problem | None:
    """Returns what is wrong with a prompt built at a rebuild point (``None`` when nothing): it
    must hold ``parts`` (:func:`prompt_parts`) as :func:`holds_parts` says (AGENT-1), and none of
    the ``recalled`` texts of earlier turns that the parts do not hold themselves (FENCE-6)."""
    if not isinstance(system, str) or not holds_parts(system, parts):
        return Problem(
            "AGENT-1",
            f"the prompt is {system!r}; expected it to hold the base text and then each of the "
            f"store's snapshot blocks, byte for byte, each a part of its own (at an end of the "
            f"prompt or beside a blank line), memory's before user's: {list(parts)!r}; text of "
            "the agent's own may stand before, between or after them",
        )
    leaked = [
        text
        for text in recalled
        if text and text in system and not any(text in part for part in parts)
    ]
    if leaked:
        return Problem(
            "FENCE-6",
            f"the prompt built at the rebuild point holds the recalled text {leaked[0]!r}; "
            "recalled text goes only on the API copy of a user message",
        )
    return None


def activation(scripts: Sequence[Script]) -> tuple[int | None, tuple[str, ...]]:
    """Returns which script becomes the active provider (its index, or ``None``) and, per
    script, ``""`` for the active one or the reason it is not: an unavailable provider is not
    started (PROV-3) and takes no place, the first available one is activated, and every later
    one is refused (PROV-2)."""
    active: int | None = None
    reasons: list[str] = []
    for index, script in enumerate(scripts):
        if script.unavailable:
            reasons.append("unavailable")
        elif active is None:
            active = index
            reasons.append("")
        else:
            reasons.append("refused")
    return active, tuple(reasons)


def answered_active(answer: Mapping[str, Any], scripts: Sequence[Script]) -> int | None:
    """Returns the index of the script an ``agent_start`` answer says is active, when it
    answered one status per script, in order, with exactly one active, or with several active
    of which one alone has its tools among those offered (the one that replaced the others);
    ``None`` otherwise. A check goes on from the provider the agent activated, so that
    activating the wrong one (PROV-2, PROV-3) is judged once, not again in its tools (PROV-5)
    and recalls (FENCE-6)."""
    statuses = answer.get("providers")
    if not isinstance(statuses, list) or len(statuses) != len(scripts):
        return None
    active = [
        index
        for index, (script, status) in enumerate(zip(scripts, statuses, strict=True))
        if isinstance(status, Mapping)
        and status.get("name") == script.name
        and status.get("active") is True
    ]
    tools = answer.get("tools")
    offered = (
        set(tools) if isinstance(tools, list) and all(isinstance(t, str) for t in tools) else set()
    )
    if len(active) > 1:
        active = [n for n in active if scripts[n].tools and set(scripts[n].tools) <= offered]
    return active[0] if len(active) == 1 else None


def offered_tools(scripts: Sequence[Script], active: int | None = None) -> list[str]:
    """Returns the tool names the agent offers: ``memory`` first, then the active provider's tools
    in order, without one named ``memory`` and without repeats (PROV-1, PROV-5); ``active``, when
    given, is the index of the script the agent activated (:func:`answered_active`)."""
    if active is None:
        active, _ = activation(scripts)
    tools = [BUILTIN_TOOL]
    for name in scripts[active].tools if active is not None else ():
        if name not in tools:
            tools.append(name)
    return tools


def api_user_content(user: str, block: str) -> str:
    """Returns the content the current user message has in the API call: the user's text, and
    when the recalled block is not empty, a blank line and the block (FENCE-6)."""
    return user + JOINER + block if block else user


def as_messages(history: Sequence[Message]) -> list[dict[str, str]]:
    """Returns messages as the ops carry them: ``{"role", "content"}`` objects."""
    return [{"role": role, "content": content} for role, content in history]


@dataclass(frozen=True)
class AgentState:
    """What an agent must hold between ops: its base text, the prompt built at the last rebuild
    point, the stored history, the active provider's script (``None`` without one), how many
    prefetch calls it has been given, and when its last hang ends (on the caller's clock)."""

    base: str
    prompt: str
    history: tuple[Message, ...] = ()
    provider: Script | None = None
    calls: int = 0
    hang_ends: float = -math.inf
    answered: str | None = None
    """The prompt the backend answered at the last rebuild point (``None``: not known)."""
    sent: tuple[tuple[int, str], ...] = ()
    """(index in the history, content) of each user message sent at its own turn with a block:
    the bytes a later turn may send again for it (AGENT-4)."""
    unknown: bool = False
    """Whether a turn broke since, so that what the agent stored of it is not known: the next
    turn's answer tells (:func:`resynced`)."""


def start_state(
    base: str, blocks: Sequence[str | None], scripts: Sequence[Script], active: int | None = None
) -> AgentState:
    """Returns the state after ``agent_start``: a new session, so a rebuild point (AGENT-3);
    ``active`` is the provider the agent activated, when known (:func:`answered_active`)."""
    if active is None:
        active, _ = activation(scripts)
    provider = scripts[active] if active is not None else None
    return AgentState(base, build_prompt(base, blocks), (), provider)


def rebuilt(state: AgentState, point: str, blocks: Sequence[str | None]) -> AgentState:
    """Returns the state after ``agent_rebuild``: the prompt built again from the blocks of a
    fresh load; ``new_session`` empties the history, ``compression`` and ``resume`` keep it
    (AGENT-3)."""
    history = () if point == "new_session" else state.history
    sent = () if point == "new_session" else state.sent
    return replace(
        state, prompt=build_prompt(state.base, blocks), history=history, sent=sent, answered=None
    )


def after_turn(
    state: AgentState,
    user: str,
    reply: str,
    prefetches: int,
    started: float,
    sent: str | None = None,
    kept: Sequence[Message] | None = None,
) -> AgentState:
    """Returns the state after a turn that made ``prefetches`` calls, begun at ``started`` on
    the caller's clock, and sent ``sent`` as the current user message: the history gains the
    user text and the reply (AGENT-5), and a later turn may send that message again with exactly
    those bytes (AGENT-4). ``kept`` is the history the agent answered it stored, when it gave
    one: the next turn sends copies of that (AGENT-4), whatever this turn's AGENT-5 verdict, so a
    history stored wrongly is judged once, at the turn that stored it."""
    index = len(state.history)
    resent = ((index, sent),) if sent is not None and sent != user else ()
    step = state.provider.step(state.calls) if state.provider and prefetches else None
    hang_ends = started + step.seconds if step and step.kind == "hang" else state.hang_ends
    history = (*state.history, ("user", user), ("assistant", reply)) if kept is None else kept
    return replace(
        state,
        history=tuple(history),
        calls=state.calls + (prefetches if state.provider else 0),
        hang_ends=hang_ends,
        sent=(*state.sent, *resent),
    )


def with_answered(state: AgentState, answer: Mapping[str, Any]) -> AgentState:
    """Returns ``state`` holding the prompt an ``agent_start`` or ``agent_rebuild`` answer gave,
    the one every turn until the next rebuild point repeats (AGENT-2)."""
    system = answer.get("system")
    return replace(state, answered=system if isinstance(system, str) else None)


def kept_history(answer: Mapping[str, Any] | None) -> tuple[Message, ...] | None:
    """Returns the history a turn's answer says the agent stored, when it has the shape of one
    (a list of ``{"role", "content"}`` string objects), else ``None``."""
    history = None if answer is None else answer.get("history")
    if not isinstance(history, list) or _messages_problem(history, "history"):
        return None
    return tuple((m["role"], m["content"]) for m in history)


def resynced(state: AgentState, answer: Mapping[str, Any], user: str, reply: str) -> AgentState:
    """Returns ``state`` with the history before this turn read off the turn's answer, when an
    earlier turn broke so that what the agent kept of it is not known: the answer's stored
    history without this turn's user text and reply, when it ends with them; ``state`` as it
    is otherwise."""
    kept = kept_history(answer)
    if kept is None or kept[-2:] != (("user", user), ("assistant", reply)):
        return state
    return replace(state, history=kept[:-2], sent=(), unknown=False)


def sent_user_content(answer: Mapping[str, Any], user: str) -> str | None:
    """Returns the content a turn's answer sent for the current user message when it has the
    shape of FENCE-6 (the user's text, then a blank line and a block), else ``None``."""
    messages = answer.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], Mapping):
        return None
    content = messages[-1].get("content")
    if not isinstance(content, str) or _recalled_in(content, user) is None:
        return None
    return content


# --- the judges ----------------------------------------------------------------------------


def _messages_problem(value: object, field: str) -> str | None:
    if not isinstance(value, list) or not all(
        isinstance(m, Mapping)
        and set(m) == {"role", "content"}
        and isinstance(m["role"], str)
        and isinstance(m["content"], str)
        for m in value
    ):
        return f"'{field}' must be a list of {{'role': str, 'content': str}} objects, got {value!r}"
    return None


def judge_start(
    answer: Mapping[str, Any], base: str, blocks: Sequence[str | None], scripts: Sequence[Script]
) -> list[Problem]:
    """Returns the problems of an ``agent_start`` answer, each with its clause (``[]`` when it
    is right): the prompt (AGENT-1, PROV-1), the providers' activation (PROV-2, PROV-3) and the
    tools (PROV-5)."""
    problems: list[Problem] = []
    system = answer.get("system")
    parts = prompt_parts(base, blocks)
    problem = prompt_problem(system, parts)
    if problem and system == base and len(parts) > 1:
        problem = Problem(
            "PROV-1",
            f"agent_start answered the base text alone, without the store's blocks: {parts[1:]!r}",
        )
    if problem:
        problems.append(problem.also("agent_start"))
    _, reasons = activation(scripts)
    statuses = answer.get("providers")
    if not isinstance(statuses, list) or len(statuses) != len(scripts):
        problems.append(
            Problem(
                "PROV-2",
                f"agent_start answered providers={statuses!r}; expected one "
                f"{{'name', 'active'}} object per script, in order ({len(scripts)})",
            )
        )
    else:
        for script, reason, status in zip(scripts, reasons, statuses, strict=True):
            active = isinstance(status, Mapping) and status.get("active") is True
            named = isinstance(status, Mapping) and status.get("name") == script.name
            error = status.get("error") if isinstance(status, Mapping) else None
            if not named or active != (reason == "") or (reason and not error):
                clause = "PROV-3" if reason == "unavailable" else "PROV-2"
                want = (
                    "active" if not reason else f"not active, with an 'error' saying why ({reason})"
                )
                problems.append(
                    Problem(
                        clause,
                        f"provider {script.name!r} is {status!r}; expected {want}: the first "
                        "available provider is the one active, a second is refused and leaves "
                        "the first in place, an unavailable one is not started",
                    )
                )
    problem = tools_problem(answer.get("tools"), scripts, answered_active(answer, scripts))
    if problem:
        problems.append(problem)
    return problems


def tools_problem(
    tools: object, scripts: Sequence[Script], active: int | None = None
) -> Problem | None:
    """Returns what is wrong with the tools ``agent_start`` answered, a problem of PROV-5
    (``None`` when nothing): each name once, ``memory`` before every tool of the active provider,
    those in the order :func:`offered_tools` gives, no tool of a refused or unavailable
    provider, and any tools of the agent's own before, between or after them; ``active`` is the
    provider the agent activated, when known (:func:`answered_active`)."""
    if active is None:
        active, _ = activation(scripts)
    wanted = offered_tools(scripts, active)
    if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
        text = f"agent_start answered tools={tools!r}; expected a list of tool names"
        return Problem("PROV-5", text)
    offered_by_active = set(scripts[active].tools) if active is not None else set()
    foreign = {
        name
        for index, script in enumerate(scripts)
        if index != active
        for name in script.tools
        if name not in offered_by_active and name != BUILTIN_TOOL
    }
    places = [tools.index(name) if name in tools else -1 for name in wanted]
    if (
        len(set(tools)) != len(tools)
        or -1 in places
        or places != sorted(places)
        or foreign & set(tools)
    ):
        return Problem(
            "PROV-5",
            f"agent_start offered the tools {tools!r}; expected {wanted!r} among them, each name "
            "once: 'memory' before the active provider's other tools, those in order, no tool of "
            "a refused or unavailable provider; tools of the agent's own may stand before, "
            "between or after them",
        )
    return None


def _recalled_in(content: str, user: str) -> str | None:
    """Returns the recalled text of the block a user message carries after ``user`` (``""`` for
    a message that is the user text alone), or ``None`` when it has another shape."""
    if content == user:
        return ""
    if not content.startswith(user + JOINER):
        return None
    text = recalled_text(content[len(user) + len(JOINER) :])
    return text if text else None


def recalled_so_far(state: AgentState) -> list[str]:
    """Returns the recalled texts the user messages of ``state``'s history were sent with."""
    texts = []
    for index, content in state.sent:
        user = state.history[index][1] if index < len(state.history) else ""
        text = _recalled_in(content, user)
        if text:
            texts.append(text)
    return texts


def _later_call(state: AgentState, got: str, calls: int = 3) -> int | None:
    """Returns which of the provider's next ``calls`` prefetch calls after this turn's (1 for
    the next) recalls ``got`` (``""`` for a failing step), the first that does, or ``None``:
    what a turn that prefetched more than once would carry, and how many calls it used."""
    if state.provider is None:
        return None
    for later in range(1, calls + 1):
        if (state.provider.step(state.calls + later).raw() or "").strip() == got:
            return later
    return None


def broken_turn_clause(state: AgentState, started: float, clause: str) -> str:
    """Returns the clause a turn begun at ``started`` (on the caller's clock) breaks when it
    breaks instead of answering: PROV-3 when its prefetch raises (a failing provider never breaks
    the turn), PROV-4 when it hangs past the timeout, ``clause`` otherwise."""
    running = state.hang_ends > started
    step = state.provider.step(state.calls) if state.provider and not running else None
    if step is not None and step.kind == "raise":
        return "PROV-3"
    if step is not None and step.kind == "hang" and step.seconds >= PREFETCH_TIMEOUT_S:
        return "PROV-4"
    return clause


def judge_turn(
    answer: Mapping[str, Any],
    state: AgentState,
    user: str,
    reply: str,
    *,
    started: float,
    elapsed: float,
) -> tuple[list[Problem], int]:
    """Returns the problems of an ``agent_turn`` answer, each with its clause, and the number of
    prefetch calls to record. ``started`` and ``elapsed`` are on the caller's clock.
    Judged: the prompt (AGENT-2, FENCE-6), the API messages (AGENT-4), the stored history (AGENT-5),
    one prefetch (AGENT-6), a failing provider's isolation (PROV-1, PROV-3, PROV-4)."""
    problems: list[Problem] = []
    step = state.provider.step(state.calls) if state.provider else None
    prefetches = answer.get("prefetches")
    running = state.hang_ends > started
    allowed = {0} if state.provider is None else ({0, 1} if running else {1})
    if prefetches not in allowed or isinstance(prefetches, bool):
        problems.append(
            Problem(
                "AGENT-6",
                f"the turn answered prefetches={prefetches!r}; expected "
                f"{' or '.join(map(str, sorted(allowed)))}: one prefetch per turn when a provider "
                "is active (none while its earlier call still hangs), none without one",
            )
        )
        prefetches = 1 if state.provider and not running else 0
    raw = step.raw() if step is not None and prefetches == 1 else ""
    recalled = (raw or "").strip()
    system = answer.get("system")
    for field in ("messages", "history"):
        shape = _messages_problem(answer.get(field), field)
        if shape:
            problems.append(Problem("AGENT-4" if field == "messages" else "AGENT-5", shape))
    if not isinstance(system, str):
        problems.append(Problem("AGENT-2", f"the turn answered system={system!r}, not the prompt"))
        return problems, int(prefetches or 0)
    frozen = state.answered if state.answered is not None else state.prompt
    misplaced = bool(recalled) and recalled in system and recalled not in frozen
    # FENCE-6: recalled text never enters the system prompt.
    if misplaced:
        problems.append(
            Problem(
                "FENCE-6",
                f"the system prompt holds the recalled text {recalled!r}; recalled text goes "
                "only on the API copy of the current user message",
            )
        )
    elif system != frozen:
        clause = "PROV-1" if frozen.startswith(system) else "AGENT-2"
        problems.append(
            Problem(
                clause,
                f"the turn's prompt is {system!r}; expected the prompt of the last rebuild "
                f"point, byte for byte: {frozen!r}",
            )
        )
    if step is not None and step.kind == "hang" and step.seconds >= PREFETCH_TIMEOUT_S:
        bound = PREFETCH_TIMEOUT_S + TURN_SLACK_S
        # PROV-4: a hanging prefetch is abandoned after the timeout; the turn goes on.
        if prefetches == 1 and elapsed > bound:
            problems.append(
                Problem(
                    "PROV-4",
                    f"the provider's prefetch hangs {step.seconds:g} s and the turn took "
                    f"{elapsed:.1f} s; a prefetch is abandoned after {PREFETCH_TIMEOUT_S:g} s, "
                    f"so the turn answers within {bound:g} s",
                )
            )
    history = answer.get("history")
    expected_history = as_messages((*state.history, ("user", user), ("assistant", reply)))
    messages = answer.get("messages")
    if isinstance(messages, list) and not _messages_problem(messages, "messages"):
        found, used = _judge_messages(messages, state, user, recalled, step, prefetches, misplaced)
        problems += found
        prefetches = used or prefetches  # a turn that recalled a later call used them all
    if isinstance(history, list) and history != expected_history:
        stored = any(
            isinstance(m, Mapping) and FENCE_OPEN in str(m.get("content", "")) for m in history
        )
        clause = "FENCE-6" if stored else "AGENT-5"
        problems.append(
            Problem(
                clause,
                f"the stored history after the turn is {history!r}; expected exactly "
                f"{expected_history!r}: the user's text and the reply, never a recalled block",
            )
        )
    return problems, int(prefetches)


def _judge_messages(
    messages: list[Mapping[str, str]],
    state: AgentState,
    user: str,
    recalled: str,
    step: Recall | None,
    prefetches: int,
    misplaced: bool = False,
) -> tuple[list[Problem], int | None]:
    """Returns the problems of a turn's API messages (AGENT-4, FENCE-6, AGENT-6, PROV-3), and
    the prefetch calls the turn used when it recalled a later call's text (``None`` otherwise);
    ``misplaced`` says the turn's recalled text is in the system prompt (FENCE-6, found)."""
    expected_before = [{"role": "system", "content": state.prompt}, *as_messages(state.history)]
    if len(messages) != len(expected_before) + 1 or messages[0].get("role") != "system":
        return [
            Problem(
                "AGENT-4",
                f"the turn sent {len(messages)} API messages {messages!r}; expected the system "
                f"message, the {len(state.history)} stored messages and the current user message",
            )
        ], None
    problems: list[Problem] = []
    earlier = [dict(m) for m in messages[1:-1]]
    resent = dict(state.sent)
    if any(
        got != want and not (want["role"] == "user" and got == {**want, "content": resent.get(n)})
        for n, (got, want) in enumerate(zip(earlier, expected_before[1:], strict=True))
    ):
        fenced = any(FENCE_OPEN in m["content"] or FENCE_CLOSE in m["content"] for m in earlier)
        problems.append(
            Problem(
                "FENCE-6" if fenced else "AGENT-4",
                f"the API messages before the current one are {earlier!r}; expected copies of "
                f"the stored history {expected_before[1:]!r}, a user message either as stored or "
                "as the exact bytes sent for it at its own turn",
            )
        )
    current = messages[-1]
    got = _recalled_in(current["content"], user) if current.get("role") == "user" else None
    if got == recalled.strip():
        return problems, None
    if got == "" and misplaced:
        return problems, None  # the block went into the system prompt: FENCE-6, judged there
    later = _later_call(state, got) if got is not None else None
    if later is not None:
        problems.append(
            Problem(
                "AGENT-6",
                f"the current user message recalls {got!r}, the text of a later prefetch call "
                f"than this turn's ({recalled!r}): more than one prefetch in a turn",
            )
        )
    elif got and step is not None and step.kind in ("value", "raise", "hang"):
        problems.append(
            Problem(
                "PROV-4" if step.kind == "hang" else "PROV-3",
                f"the provider's prefetch {step.kind}s ({step!r}), yet the turn recalls {got!r}; "
                "a failed prefetch contributes nothing to the turn",
            )
        )
    else:
        want = (
            api_user_content(user, "<memory-context> block of " + repr(recalled))
            if (recalled)
            else user
        )
        problems.append(
            Problem(
                "FENCE-6",
                f"the current user message was sent as {dict(current)!r}; expected the user's "
                f"text, and the recalled block after a blank line when there is one: {want!r}",
            )
        )
    return problems, (1 + later if later is not None else None)


def judge_rebuild(
    answer: Mapping[str, Any],
    state: AgentState,
    point: str,
    blocks: Sequence[str | None],
    entries: Sequence[str],
) -> list[Problem]:
    """Returns the problems of an ``agent_rebuild`` answer (AGENT-3): the prompt built again
    from a fresh load — so it holds every entry of ``entries``, the store's entries at the
    rebuild — and the history kept or emptied as ``point`` says."""
    problems: list[Problem] = []
    system = answer.get("system")
    parts = prompt_parts(state.base, blocks)
    missing = [entry for entry in entries if not isinstance(system, str) or entry not in system]
    if missing:
        problems.append(
            Problem(
                "AGENT-3",
                f"after the rebuild point {point!r} the prompt is {system!r}; expected it built "
                f"from a fresh load of the store, holding {parts!r} and so the entries written "
                f"since: {missing!r}",
            )
        )
    else:
        problem = prompt_problem(system, parts, recalled_so_far(state))
        if problem:
            problems.append(problem.also(f"after the rebuild point {point!r}"))
    after = rebuilt(state, point, blocks)
    if answer.get("history") != as_messages(after.history):
        problems.append(
            Problem(
                "AGENT-3",
                f"after the rebuild point {point!r} the stored history is "
                f"{answer.get('history')!r}; expected {as_messages(after.history)!r} "
                "(new_session empties it, compression and resume keep it)",
            )
        )
    return problems
