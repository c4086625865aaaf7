"""Agents broken on purpose, one defect each: the reference store with its agent changed in one
place, so that a check of ``conformance/checks/agent.py`` fails on the clause the defect breaks
(``tests/power/test_agent_power.py``; the zoo lists them under the area ``agent``).

Each factory is ``open_store``-shaped and names its defect; the reference's agent
(:class:`~memspec.reference_impl.agent.AgentSession`) is subclassed, never copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memspec.reference_impl.agent import AgentSession, ScriptedProvider
from memspec.reference_impl.providers import MemoryOrchestrator, MemoryProvider
from memspec.reference_impl.store import Store
from memspec.spec import codes
from memspec.spec.targets import TARGETS


class RebuiltEveryTurn(AgentSession):
    """AGENT-2: loads the store and rebuilds the prompt at every turn."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        if self.base is not None:
            self._rebuild()
        return super().turn(user, reply)


class FrozenForever(AgentSession):
    """AGENT-3: a rebuild point builds the prompt from the first load's blocks, not a new load."""

    def _rebuild(self) -> None:
        assert self.base is not None
        if not self.prompt:
            self.store.load()
        self.prompt = self.orchestrator.system_prompt(self.base)


class JoinedByOneNewline(AgentSession):
    """AGENT-1: the prompt's parts are joined by one line feed instead of a blank line."""

    def _rebuild(self) -> None:
        assert self.base is not None
        self.store.load()
        blocks = [self.store.snapshot(target) for target in TARGETS]
        self.prompt = "\n".join([self.base, *(block for block in blocks if block is not None)])


class OwnTextAroundTheBlocks(AgentSession):
    """Not broken: the prompt holds text of the agent's own before, between and after the base
    and the blocks — guidance, a line between the two blocks, the number of the rebuild it was
    built at — each a part of its own, built at a rebuild point and then held fixed (AGENT-1,
    AGENT-2)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.rebuilds = 0

    def _rebuild(self) -> None:
        assert self.base is not None
        self.store.load()
        memory, user = (self.store.snapshot(target) for target in TARGETS)
        self.rebuilds += 1
        parts = [
            "Guidance: keep notes short.",
            self.base,
            memory,
            "What the user told you follows.",
            user,
            f"Session {self.rebuilds} started.",
        ]
        self.prompt = "\n\n".join(part for part in parts if part is not None)


class OwnTools(OwnTextAroundTheBlocks):
    """Not broken: besides the prompt's own text, offers tools of its own before ``memory``,
    between it and the provider's tools and after them, each name once (PROV-5)."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        answer = super().start(base, providers)
        if answer["ok"]:
            memory, *others = answer["tools"]
            answer["tools"] = ["terminal", memory, "web_search", *others, "clarify"]
        return answer


class LiveStateInThePrompt(AgentSession):
    """AGENT-2: the prompt ends with the number of turns so far, so it changes at every turn."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.built = ""
        self.turns = 0

    def _rebuild(self) -> None:
        super()._rebuild()
        self.built, self.turns = self.prompt, 0
        self.prompt = f"{self.built}\n\nTurns so far: 0"

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        if self.base is not None:
            self.turns += 1
            self.prompt = f"{self.built}\n\nTurns so far: {self.turns}"
        return super().turn(user, reply)


class SendsOnlyTheCurrentMessage(AgentSession):
    """AGENT-4: the API messages leave out the history before the current user message."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        if answer["ok"]:
            answer["messages"] = [answer["messages"][0], answer["messages"][-1]]
        return answer


class StoredTurnEdited(AgentSession):
    """An agent that changes its stored history after each turn (:meth:`edit`), and answers the
    history as it then is."""

    def edit(self, answer: dict[str, Any]) -> None:
        """Changes ``self.history`` after the turn that gave ``answer``."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        if answer["ok"]:
            self.edit(answer)
            answer["history"] = [dict(message) for message in self.history]
        return answer


class ForgetsReplies(StoredTurnEdited):
    """AGENT-5: the stored history keeps the user's messages but not the replies."""

    def edit(self, answer: dict[str, Any]) -> None:
        self.history.pop()


class StoresTheBlock(StoredTurnEdited):
    """FENCE-6: the recalled block is appended to the stored user message, not to a copy."""

    def edit(self, answer: dict[str, Any]) -> None:
        self.history[-2] = dict(answer["messages"][-1])


class BlockInTheSystemPrompt(AgentSession):
    """FENCE-6: the recalled block goes into the system message instead of the user message."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        if answer["ok"]:
            current = answer["messages"][-1]
            content = current["content"]
            if content != user and isinstance(user, str):
                current["content"] = user
                block = content[len(user) + 2 :]
                answer["messages"][0]["content"] += "\n\n" + block
                answer["system"] = answer["messages"][0]["content"]
        return answer


class TwoPrefetchesPerTurn(AgentSession):
    """AGENT-6: each turn prefetches twice (a warm-up call, then the one it uses)."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        if self.base is not None and isinstance(user, str):
            self.orchestrator.recall(user)
        return super().turn(user, reply)


class RaisingProviderBreaksTheTurn(AgentSession):
    """PROV-3: an exception from the provider's prefetch escapes the turn."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        provider = self.orchestrator.external
        if isinstance(provider, ScriptedProvider) and isinstance(user, str):
            step = provider.script.step(provider._calls)
            if step.kind == "raise":
                provider.prefetch(user)
        return super().turn(user, reply)


class PassesNonStrings(MemoryOrchestrator):
    """PROV-3: a prefetch that returns something other than a string is fenced as its text."""

    def _prefetch(self, provider: MemoryProvider, query: str) -> object:
        raw = super()._prefetch(provider, query)
        return raw if isinstance(raw, str) else str(raw)


class NonStringPassedThrough(AgentSession):
    """PROV-3: non-string recall reaches the model as text."""

    orchestrator_type = PassesNonStrings


class UnboundedHang(AgentSession):
    """PROV-4: a prefetch is waited for however long it hangs."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        answer = super().start(base, providers)
        self.orchestrator.prefetch_timeout = 60.0
        return answer


class ReplacingOrchestrator(MemoryOrchestrator):
    """An orchestrator whose second external provider replaces the first."""

    def set_external(self, provider: MemoryProvider) -> None:
        self._external = provider


class SecondProviderReplacesTheFirst(AgentSession):
    """PROV-2: activating a second external provider replaces the first."""

    orchestrator_type = ReplacingOrchestrator


class ShadowingTools(AgentSession):
    """PROV-5: the provider's tools are offered as it names them, a ``memory`` tool included."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        answer = super().start(base, providers)
        external = self.orchestrator.external
        if answer["ok"] and external is not None:
            answer["tools"] = ["memory", *getattr(external, "tools", ())]
        return answer


class BuiltinDroppedOnFailure(AgentSession):
    """PROV-1: when the provider's prefetch fails, the turn's prompt loses the built-in blocks."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        provider = self.orchestrator.external
        if answer["ok"] and isinstance(provider, ScriptedProvider):
            step = provider.script.step(provider._calls - 1)
            if step.kind in ("raise", "value"):
                answer["system"] = answer["messages"][0]["content"] = self.base
        return answer


class DiesWithAProvider(AgentSession):
    """PROV-1: ``agent_start`` raises whenever a provider is configured, as matrix-agent-symphony
    0.1.0's does on its own ``ImportError``; without one it starts."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        if providers:
            raise ImportError("cannot import name '_CORE_TOOLS' from 'toolsets'")
        return super().start(base, providers)


class DiesAtStart(AgentSession):
    """AGENT-1: ``agent_start`` raises, with providers or without."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        raise ImportError("cannot import name '_CORE_TOOLS' from 'toolsets'")


class RefusesWhatItClaims(AgentSession):
    """AGENT-7: claims ``agent`` but answers ``agent_start`` ``E_UNSUPPORTED``."""

    def start(self, base: object, providers: object) -> dict[str, Any]:
        return {"ok": False, "code": codes.E_UNSUPPORTED, "message": "no agent here"}


class ResendsWhatItSent(AgentSession):
    """Not broken: sends each earlier user message again with exactly the bytes sent for it at
    its own turn (its block included), as an agent keeping the prefix cache warm does
    (AGENT-4); the stored history stays clean."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.sent: dict[int, str] = {}

    def _resent(self, answer: dict[str, Any]) -> dict[str, Any]:
        messages = answer["messages"]
        for index, content in self.sent.items():
            messages[1 + index] = {"role": "user", "content": content}
        self.sent[len(messages) - 2] = messages[-1]["content"]
        return answer

    def start(self, base: object, providers: object) -> dict[str, Any]:
        self.sent = {}
        return super().start(base, providers)

    def rebuild(self, point: object) -> dict[str, Any]:
        if point == "new_session":
            self.sent = {}
        return super().rebuild(point)

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        return self._resent(answer) if answer["ok"] else answer


class ResendsWithTheCurrentBlock(AgentSession):
    """FENCE-6: sends every earlier user message again with the current turn's block."""

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        answer = super().turn(user, reply)
        if answer["ok"] and isinstance(user, str):
            block = answer["messages"][-1]["content"][len(user) :]
            for message in answer["messages"][1:-1]:
                if message["role"] == "user" and block:
                    message["content"] += block
        return answer


def _factory(agent: type[AgentSession]) -> Any:
    def open_store(
        root: Path, *, memory_char_limit: int = 2200, user_char_limit: int = 1375
    ) -> Store:
        store = Store(
            Path(root).absolute(),
            memory_char_limit=memory_char_limit,
            user_char_limit=user_char_limit,
        )
        store._agent = agent(store)
        return store

    open_store.__doc__ = agent.__doc__
    return open_store


rebuilt_every_turn = _factory(RebuiltEveryTurn)
frozen_forever = _factory(FrozenForever)
joined_by_one_newline = _factory(JoinedByOneNewline)
own_tools = _factory(OwnTools)
live_state_in_the_prompt = _factory(LiveStateInThePrompt)
sends_only_the_current_message = _factory(SendsOnlyTheCurrentMessage)
forgets_replies = _factory(ForgetsReplies)
stores_the_block = _factory(StoresTheBlock)
block_in_the_system_prompt = _factory(BlockInTheSystemPrompt)
two_prefetches_per_turn = _factory(TwoPrefetchesPerTurn)
raising_provider_breaks_the_turn = _factory(RaisingProviderBreaksTheTurn)
non_string_passed_through = _factory(NonStringPassedThrough)
unbounded_hang = _factory(UnboundedHang)
second_provider_replaces_the_first = _factory(SecondProviderReplacesTheFirst)
shadowing_tools = _factory(ShadowingTools)
builtin_dropped_on_failure = _factory(BuiltinDroppedOnFailure)
refuses_what_it_claims = _factory(RefusesWhatItClaims)
dies_with_a_provider = _factory(DiesWithAProvider)
dies_at_start = _factory(DiesAtStart)
resends_what_it_sent = _factory(ResendsWhatItSent)
resends_with_the_current_block = _factory(ResendsWithTheCurrentBlock)
