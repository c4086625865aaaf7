"""Provider orchestration: the built-in store plus at most one external memory provider.

The built-in store is always present and used directly: its frozen snapshot blocks go into the
system prompt. An external provider (mem0, Honcho, ...) is optional; its recalled text is fenced
with ``<memory-context>`` and appended to an API-time copy of the current user message, so the
stored conversation and the system prompt never change. A provider that fails is isolated: the
failure is logged and the built-in memory keeps working. No network is used here; providers
bring their own.

    orchestrator = MemoryOrchestrator(store, external=my_provider)
    system = orchestrator.system_prompt("You are a helpful agent.")
    to_send = orchestrator.api_messages(conversation, query=latest_user_text)
"""

from __future__ import annotations

import logging
from typing import Protocol

from memspec.reference_impl.fence import build_fence
from memspec.spec.targets import TARGETS

logger = logging.getLogger(__name__)


class MemoryProvider(Protocol):
    """An external memory provider: recalls text for a query and learns from finished turns."""

    name: str

    def prefetch(self, query: str) -> str:
        """Returns the raw text recalled for ``query`` ("" for nothing)."""
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

    def __init__(self, builtin: SnapshotSource, external: MemoryProvider | None = None) -> None:
        self.builtin = builtin
        self._external: MemoryProvider | None = None
        if external is not None:
            self.set_external(external)

    @property
    def external(self) -> MemoryProvider | None:
        """The active external provider, or ``None``."""
        return self._external

    def set_external(self, provider: MemoryProvider) -> None:
        """Makes ``provider`` the external provider; raises ``ValueError`` if one is active.

        At most one external provider is active at a time (PROV-2): two would both inject
        recalled text and contradict each other, so a second one is refused rather than silently
        replacing or joining the first.
        """
        if self._external is not None:
            raise ValueError(
                f"external memory provider {provider_name(self._external)!r} is already active; "
                f"refusing a second one, {provider_name(provider)!r}: at most one external "
                "provider may be active at a time (the built-in memory is always on)"
            )
        self._external = provider

    def recall(self, query: str) -> str:
        """Returns the external provider's text for ``query`` as a ``<memory-context>`` block.

        "" when there is no provider, when it recalls nothing, or when it fails: a provider that
        raises or returns something other than a ``str`` is logged and ignored, never allowed to
        break the turn (PROV-3). The raw text is sanitised and framed by
        :func:`~memspec.reference_impl.fence.build_fence` (PROV-3, FENCE-1).
        """
        provider = self._external
        if provider is None:
            return ""
        try:
            raw = provider.prefetch(query)
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
        """Returns ``base`` followed by the built-in store's frozen snapshot blocks.

        Blocks come in target order (memory, then user), targets without a block are skipped, and
        the parts are joined by a blank line. The blocks are the ones captured at the store's last
        ``load()``, so the prompt stays byte-identical between loads (SNAP-1) and recalled
        text never enters it (FENCE-6).
        """
        blocks = [self.builtin.snapshot(target) for target in TARGETS]
        return "\n\n".join([base, *(block for block in blocks if block is not None)])

    def api_messages(self, messages: list[dict], query: str) -> list[dict]:
        """Returns copies of ``messages`` for one API call, the recalled block appended to the
        current user message.

        The current user message is the last one with ``role == "user"``; when its ``content`` is
        a ``str`` and :meth:`recall` returns a block, the copy's content becomes
        ``content + "\\n\\n" + block``. Every dict is a shallow copy and neither ``messages`` nor
        its dicts are changed, so the stored conversation never contains recalled text
        (FENCE-6). Example: ``[{"role": "user", "content": "hi"}]`` becomes
        ``[{"role": "user", "content": "hi\\n\\n<memory-context>\\n...</memory-context>"}]``.
        No user message, non-text content or no block: plain copies.
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
