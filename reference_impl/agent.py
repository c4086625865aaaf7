"""The agent around the reference store: its system prompt, a turn's API messages and the stored
history, driven by the ``agent`` ops of the contract (AGENT, PROV, FENCE-6).

An :class:`AgentSession` is one conversation over one store session: its prompt is built from a
fresh ``load()`` at a rebuild point and then stays byte-identical (AGENT-1, AGENT-2, AGENT-3); a
turn prefetches once and sends the recalled block on a copy of the current user message only
(AGENT-4, AGENT-6, FENCE-6); the history keeps the user's text and the reply (AGENT-5).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from memspec.reference_impl.providers import MemoryOrchestrator
from memspec.spec import codes
from memspec.spec.agent import (
    REBUILD_POINTS,
    Recall,
    Script,
    ScriptError,
    parse_scripts,
)

logger = logging.getLogger(__name__)


class LoadableStore(Protocol):
    """The part of a store the agent uses: ``load()`` at a rebuild point, and the frozen blocks."""

    def load(self) -> None:
        """Reads the files and freezes the snapshot blocks."""
        ...

    def snapshot(self, target: str) -> str | None:
        """Returns the frozen block of ``target``."""
        ...


class ScriptedProvider:
    """An external provider that plays a harness script: each ``prefetch`` call performs the next
    step — returns its text, raises, sleeps then returns, or returns a value that is not a
    string — and past the last step recalls nothing."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.name = script.name
        self.tools = script.tools
        self._calls = 0

    def prefetch(self, query: str) -> object:
        """Performs the next step of the script (``query`` is not used by a script)."""
        step: Recall = self.script.step(self._calls)
        self._calls += 1
        if step.kind == "raise":
            raise RuntimeError(step.text or "scripted provider failure")
        if step.kind == "hang":
            time.sleep(step.seconds)
        return step.value if step.kind == "value" else step.text

    def sync_turn(self, user: str, assistant: str) -> None:
        """Learns nothing: a script's recall does not depend on the conversation."""


def _failure(message: str) -> dict[str, Any]:
    return {"ok": False, "code": codes.E_INVALID, "message": message}


class AgentSession:
    """One conversation of the agent over one store session; its methods answer the ``agent``
    ops (``agent_start``, ``agent_turn``, ``agent_rebuild``) as contract answers."""

    orchestrator_type: type[MemoryOrchestrator] = MemoryOrchestrator
    """What orchestrates the built-in store and the external provider of each session."""

    def __init__(self, store: LoadableStore) -> None:
        self.store = store
        self.base: str | None = None
        self.prompt = ""
        self.history: list[dict[str, str]] = []
        self.orchestrator = self.orchestrator_type(store)

    def start(self, base: object, providers: object) -> dict[str, Any]:
        """Starts a new session (a rebuild point, AGENT-3): loads the store, builds the prompt
        and activates the scripted providers in order — an unavailable one is not started
        (PROV-3), the first available becomes the external provider and any later one is refused
        with the first kept (PROV-2)."""
        if not isinstance(base, str):
            return _failure(f"agent_start needs 'base', a string; got {base!r}")
        try:
            scripts = parse_scripts(providers)
        except ScriptError as error:
            return _failure(f"agent_start: {error}")
        self.base, self.history = base, []
        self.orchestrator = self.orchestrator_type(self.store)
        statuses: list[dict[str, Any]] = []
        for script in scripts:
            status: dict[str, Any] = {"name": script.name, "active": False}
            if script.unavailable:
                status["error"] = f"provider {script.name!r} is unavailable; not started"
                logger.warning("%s", status["error"])
            else:
                try:
                    self.orchestrator.set_external(ScriptedProvider(script))
                    status["active"] = True
                except ValueError as error:
                    status["error"] = str(error)
            statuses.append(status)
        self._rebuild()
        return {
            "ok": True,
            "code": codes.OK,
            "system": self.prompt,
            "providers": statuses,
            "tools": self.orchestrator.tool_names(),
        }

    def turn(self, user: object, reply: object) -> dict[str, Any]:
        """Runs one turn: stores the user's text, prefetches once (AGENT-6), sends the prompt and
        copies of the history with the recalled block on the current user message only (AGENT-4,
        FENCE-6), then stores the reply (AGENT-5). A failing provider costs the turn its block
        and nothing else (PROV-3, PROV-4)."""
        if self.base is None:
            return _failure("agent_turn before agent_start; start the agent first")
        if not isinstance(user, str) or not isinstance(reply, str):
            return _failure(
                f"agent_turn needs 'user' and 'reply', strings; got {user!r}, {reply!r}"
            )
        before = self.orchestrator.prefetch_calls
        self.history.append({"role": "user", "content": user})
        copies = self.orchestrator.api_messages(self.history, query=user)
        messages = [{"role": "system", "content": self.prompt}, *copies]
        self.history.append({"role": "assistant", "content": reply})
        self.orchestrator.sync_turn(user, reply)
        return {
            "ok": True,
            "code": codes.OK,
            "system": self.prompt,
            "messages": messages,
            "history": [dict(message) for message in self.history],
            "prefetches": self.orchestrator.prefetch_calls - before,
        }

    def rebuild(self, point: object) -> dict[str, Any]:
        """Rebuilds the prompt at a rebuild point from a fresh load (AGENT-3); ``new_session``
        also empties the history, ``compression`` and ``resume`` keep it."""
        if self.base is None:
            return _failure("agent_rebuild before agent_start; start the agent first")
        if point not in REBUILD_POINTS:
            return _failure(
                f"agent_rebuild needs 'point', one of {list(REBUILD_POINTS)}; got {point!r}"
            )
        if point == "new_session":
            self.history = []
        self._rebuild()
        return {
            "ok": True,
            "code": codes.OK,
            "system": self.prompt,
            "history": [dict(message) for message in self.history],
        }

    def _rebuild(self) -> None:
        """Loads the store and builds the prompt from ``base`` and the fresh blocks (AGENT-1)."""
        assert self.base is not None
        self.store.load()
        self.prompt = self.orchestrator.system_prompt(self.base)
