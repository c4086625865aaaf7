"""Provider orchestration: the built-in store plus at most one external memory provider.

The built-in store's frozen snapshot blocks go into the system prompt; an external provider's
recalled text is fenced and appended to an API-time copy of the current user message, so the stored
conversation and the system prompt never change. A failing provider is logged and isolated. No
network is used here; providers bring their own.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from memspec.reference_impl.fence import build_fence
from memspec.spec.agent import BUILTIN_TOOL, PREFETCH_TIMEOUT_S, build_prompt
from memspec.spec.targets import TARGETS

logger = logging.getLogger(__name__)


class MemoryProvider(Protocol):
    """An external memory provider: recalls text for a query and learns from finished turns."""

    name: str

    def prefetch(self, query: str) -> object:
        """Returns the raw text recalled for ``query`` ("" for nothing); anything else a provider
        returns is logged and ignored by the orchestrator (PROV-3)."""
        ...

    def sync_turn(self, user: str, assistant: str) -> None:
        """Records one finished turn of the conversation."""
        ...


class SnapshotSource(Protocol):
    """The part of the built-in store the orchestrator uses: its frozen snapshot blocks."""

    def snapshot(self, target: str) -> str | None:
        """Returns the frozen block of ``target``, or ``None`` when it had no entries."""
        ...


def provider_name(provider: object) -> str:
    """Returns a provider's ``name`` for messages, or its class name when it has none."""
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) and name else type(provider).__name__


class MemoryOrchestrator:
    """The built-in memory store, always present (PROV-1), plus at most one external provider
    (PROV-2)."""

    def __init__(
        self,
        builtin: SnapshotSource,
        external: MemoryProvider | None = None,
        *,
        prefetch_timeout: float = PREFETCH_TIMEOUT_S,
    ) -> None:
        self.builtin = builtin
        self.prefetch_timeout = prefetch_timeout
        self.prefetch_calls = 0
        """How many times the external provider's ``prefetch`` was called (AGENT-6)."""
        self._external: MemoryProvider | None = None
        self._running: threading.Thread | None = None
        if external is not None:
            self.set_external(external)

    @property
    def external(self) -> MemoryProvider | None:
        """The active external provider, or ``None``."""
        return self._external

    def set_external(self, provider: MemoryProvider) -> None:
        """Makes ``provider`` the external provider; raises ``ValueError`` if one is active
        (PROV-2)."""
        if self._external is not None:
            raise ValueError(
                f"external memory provider {provider_name(self._external)!r} is already active; "
                f"refusing a second one, {provider_name(provider)!r}: at most one external "
                "provider may be active at a time (the built-in memory is always on)"
            )
        self._external = provider

    def recall(self, query: str) -> str:
        """Returns the external provider's text for ``query`` as a ``<memory-context>`` block
        (PROV-3, FENCE-1); ``""`` when there is no provider, it recalls nothing, or it fails.

        A provider that raises or returns a non-``str`` is logged and ignored (PROV-3); one that has
        not answered within ``prefetch_timeout`` seconds is abandoned (PROV-4) and skipped while
        that call still runs (AGENT-6).
        """
        provider = self._external
        if provider is None:
            return ""
        if self._running is not None and self._running.is_alive():
            logger.warning(
                "memory provider %r is still in an earlier prefetch; skipping it this turn",
                provider_name(provider),
            )
            return ""
        try:
            raw = self._prefetch(provider, query)
        except TimeoutError:
            logger.warning(
                "memory provider %r did not answer its prefetch within %g s; continuing without "
                "it (its late answer is discarded)",
                provider_name(provider),
                self.prefetch_timeout,
            )
            return ""
        except Exception:
            logger.warning(
                "memory provider %r failed in prefetch; continuing with the built-in memory only",
                provider_name(provider),
                exc_info=True,
            )
            return ""
        if not isinstance(raw, str):
            logger.warning(
                "memory provider %r returned %s from prefetch instead of str; ignoring it",
                provider_name(provider),
                type(raw).__name__,
            )
            return ""
        return build_fence(raw)

    def _prefetch(self, provider: MemoryProvider, query: str) -> object:
        """Returns what ``provider.prefetch(query)`` returned, re-raising what it raised; raises
        ``TimeoutError`` after ``prefetch_timeout`` seconds (PROV-4). The call runs on a remembered
        daemon thread, so :meth:`recall` can skip the provider until it ends (AGENT-6)."""
        outcome: list[object] = []
        failure: list[BaseException] = []

        def call() -> None:
            try:
                outcome.append(provider.prefetch(query))
            except BaseException as error:
                failure.append(error)

        self.prefetch_calls += 1
        thread = threading.Thread(target=call, daemon=True, name="memspec-prefetch")
        thread.start()
        thread.join(self.prefetch_timeout)
        if thread.is_alive():
            self._running = thread
            raise TimeoutError(f"prefetch still running after {self.prefetch_timeout:g} s")
        if failure:
            raise failure[0]
        return outcome[0]

    def tool_names(self) -> list[str]:
        """Returns the tools the agent offers: the built-in ``memory`` first, then the external
        provider's ``tools`` in order, leaving out one named ``memory`` and repeats, so that no
        provider shadows the built-in tool (PROV-1, PROV-5)."""
        names = [BUILTIN_TOOL]
        provider_tools = getattr(self._external, "tools", ()) if self._external else ()
        for name in provider_tools:
            if name in names:
                logger.warning(
                    "memory provider %r offers a tool named %r, which the agent already offers "
                    "(the built-in memory tool is never shadowed); ignoring it",
                    provider_name(self._external),
                    name,
                )
                continue
            names.append(name)
        return names

    def sync_turn(self, user: str, assistant: str) -> None:
        """Passes a finished turn to the external provider, if any; its failure is logged and
        ignored (PROV-3). The built-in store learns only through its own tool calls."""
        provider = self._external
        if provider is None:
            return
        try:
            provider.sync_turn(user, assistant)
        except Exception:
            logger.warning(
                "memory provider %r failed in sync_turn; the turn is not synced to it",
                provider_name(provider),
                exc_info=True,
            )

    def system_prompt(self, base: str) -> str:
        """Returns ``base`` followed by the built-in store's frozen snapshot blocks in target order,
        joined by a blank line (AGENT-1): byte-identical between loads (SNAP-1, AGENT-2), never
        holding recalled text (FENCE-6)."""
        return build_prompt(base, [self.builtin.snapshot(target) for target in TARGETS])

    def api_messages(self, messages: list[dict], query: str) -> list[dict]:
        """Returns shallow copies of ``messages`` for one API call, the recalled block appended as
        ``content + "\\n\\n" + block`` to the last ``user`` message whose content is a ``str``;
        ``messages`` is never changed, so the stored conversation holds no recalled text (FENCE-6).
        """
        copies = [dict(message) for message in messages]
        current = next(
            (copy for copy in reversed(copies) if copy.get("role") == "user"),
            None,
        )
        if current is None or not isinstance(current.get("content"), str):
            return copies
        block = self.recall(query)
        if block:
            current["content"] = current["content"] + "\n\n" + block
        return copies
