"""Tests of provider orchestration: one built-in store, at most one external provider (PROV)."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memspec.reference_impl.fence import build_fence
from memspec.reference_impl.providers import MemoryOrchestrator, provider_name

RECALLED = "User prefers tabs"


@dataclass
class FakeStore:
    """A built-in store stand-in with fixed snapshot blocks; records which targets were asked."""

    blocks: dict[str, str | None] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def snapshot(self, target: str) -> str | None:
        self.asked.append(target)
        return self.blocks.get(target)


@dataclass
class FakeProvider:
    """An external provider that recalls fixed text and records its calls."""

    name: str = "fake"
    recalled: object = RECALLED
    queries: list[str] = field(default_factory=list)
    turns: list[tuple[str, str]] = field(default_factory=list)

    def prefetch(self, query: str) -> str:
        self.queries.append(query)
        return self.recalled  # type: ignore[return-value]

    def sync_turn(self, user: str, assistant: str) -> None:
        self.turns.append((user, assistant))


class BrokenProvider:
    """An external provider whose every call raises."""

    name = "broken"

    def prefetch(self, query: str) -> str:
        raise ConnectionError("provider is down")

    def sync_turn(self, user: str, assistant: str) -> None:
        raise TimeoutError("provider timed out")


def block_of(raw: str) -> str:
    """Returns the fenced block the orchestrator must append for recalled text ``raw``."""
    block = build_fence(raw)
    assert block, "BUG IN TEST CASE: the recalled text fences to nothing"
    return block


# --- one external provider at most ---------------------------------------------------------


def test_without_an_external_provider_only_the_builtin_works() -> None:
    orchestrator = MemoryOrchestrator(FakeStore({"memory": "M"}))
    assert orchestrator.external is None
    # No provider: nothing is recalled and syncing a turn is a no-op.
    assert orchestrator.recall("q") == ""
    orchestrator.sync_turn("u", "a")
    assert orchestrator.system_prompt("base") == "base\n\nM"


def test_an_external_provider_given_at_construction_is_active() -> None:
    provider = FakeProvider()
    orchestrator = MemoryOrchestrator(FakeStore(), provider)
    assert orchestrator.external is provider


def test_a_second_external_provider_is_refused() -> None:
    first, second = FakeProvider(name="mem0"), FakeProvider(name="honcho")
    orchestrator = MemoryOrchestrator(FakeStore(), first)
    # At most one external provider: the second is refused, naming both.
    with pytest.raises(ValueError, match=r"'mem0' is already active.*'honcho'"):
        orchestrator.set_external(second)
    assert orchestrator.external is first
    # The same provider twice is still a second registration.
    with pytest.raises(ValueError, match="at most one external provider"):
        orchestrator.set_external(first)


def test_set_external_on_an_empty_orchestrator() -> None:
    orchestrator = MemoryOrchestrator(FakeStore())
    provider = FakeProvider()
    orchestrator.set_external(provider)
    assert orchestrator.external is provider


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        (FakeProvider(name="mem0"), "mem0"),
        (FakeProvider(name=""), "FakeProvider"),
        (object(), "object"),
        (type("Odd", (), {"name": 42})(), "Odd"),
    ],
    ids=["named", "empty-name", "no-name", "non-str-name"],
)
def test_provider_name_falls_back_to_the_class(provider: object, expected: str) -> None:
    assert provider_name(provider) == expected


# --- recall and failure isolation ----------------------------------------------------------


def test_recall_fences_the_providers_text() -> None:
    provider = FakeProvider(recalled="  User prefers tabs  ")
    orchestrator = MemoryOrchestrator(FakeStore(), provider)
    assert orchestrator.recall("editor?") == build_fence("  User prefers tabs  ")
    assert provider.queries == ["editor?"]


def test_recall_of_blank_text_is_empty() -> None:
    orchestrator = MemoryOrchestrator(FakeStore(), FakeProvider(recalled="   "))
    assert orchestrator.recall("q") == build_fence("   ") == ""


def test_a_raising_provider_is_isolated(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore({"memory": "M", "user": "U"})
    orchestrator = MemoryOrchestrator(store, BrokenProvider())
    with caplog.at_level(logging.WARNING, logger="memspec.reference_impl.providers"):
        # A failing provider recalls nothing and the failure is logged, not raised.
        assert orchestrator.recall("q") == ""
        orchestrator.sync_turn("u", "a")
    messages = [record.getMessage() for record in caplog.records]
    assert any("'broken' failed in prefetch" in message for message in messages)
    assert any("'broken' failed in sync_turn" in message for message in messages)
    assert all(record.exc_info for record in caplog.records)
    # The built-in memory keeps working.
    assert orchestrator.system_prompt("base") == "base\n\nM\n\nU"


@pytest.mark.parametrize("recalled", [None, b"bytes", 42, ["list"]])
def test_a_provider_returning_a_non_str_is_isolated(
    recalled: object, caplog: pytest.LogCaptureFixture
) -> None:
    orchestrator = MemoryOrchestrator(FakeStore(), FakeProvider(name="odd", recalled=recalled))
    with caplog.at_level(logging.WARNING, logger="memspec.reference_impl.providers"):
        assert orchestrator.recall("q") == ""
    assert f"returned {type(recalled).__name__} from prefetch" in caplog.text


def test_an_interrupt_is_not_swallowed() -> None:
    class Interrupted(FakeProvider):
        def prefetch(self, query: str) -> str:
            raise KeyboardInterrupt

    orchestrator = MemoryOrchestrator(FakeStore(), Interrupted())
    # Only ordinary errors are isolated; a user interrupt still stops the agent.
    with pytest.raises(KeyboardInterrupt):
        orchestrator.recall("q")


def test_sync_turn_reaches_the_provider() -> None:
    provider = FakeProvider()
    orchestrator = MemoryOrchestrator(FakeStore(), provider)
    orchestrator.sync_turn("hello", "hi there")
    assert provider.turns == [("hello", "hi there")]


# --- system prompt -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ({"memory": "M", "user": "U"}, "base\n\nM\n\nU"),
        ({"memory": None, "user": "U"}, "base\n\nU"),
        ({"memory": "M", "user": None}, "base\n\nM"),
        ({}, "base"),
    ],
)
def test_system_prompt_appends_the_frozen_blocks(
    blocks: dict[str, str | None], expected: str
) -> None:
    store = FakeStore(blocks)
    orchestrator = MemoryOrchestrator(store, FakeProvider())
    # Memory then user, targets without a block skipped, joined by a blank line.
    assert orchestrator.system_prompt("base") == expected
    assert store.asked == ["memory", "user"]


def test_recalled_text_never_enters_the_system_prompt() -> None:
    provider = FakeProvider()
    orchestrator = MemoryOrchestrator(FakeStore({"memory": "M"}), provider)
    orchestrator.api_messages([{"role": "user", "content": "hi"}], "hi")
    assert RECALLED not in orchestrator.system_prompt("base")


# --- API-time copies of the conversation ---------------------------------------------------


def conversation() -> list[dict]:
    """Returns a conversation whose current user message is not the last message."""
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question", "name": "alice"},
        {"role": "tool", "content": "tool output"},
    ]


def test_the_block_goes_on_a_copy_of_the_last_user_message_only() -> None:
    messages = conversation()
    original = copy.deepcopy(messages)
    provider = FakeProvider()
    result = MemoryOrchestrator(FakeStore(), provider).api_messages(messages, "second question")
    # Only the current user message's copy gets the fenced block, after a blank line.
    expected = copy.deepcopy(original)
    expected[3]["content"] = "second question\n\n" + block_of(RECALLED)
    assert result == expected
    assert provider.queries == ["second question"]
    # The stored conversation and its dicts are never changed, and every dict is a new object.
    assert messages == original
    assert result is not messages
    assert all(new is not old for new, old in zip(result, messages, strict=True))


def test_without_a_block_the_messages_are_plain_copies() -> None:
    messages = conversation()
    for orchestrator in (
        MemoryOrchestrator(FakeStore()),
        MemoryOrchestrator(FakeStore(), FakeProvider(recalled="")),
        MemoryOrchestrator(FakeStore(), BrokenProvider()),
    ):
        result = orchestrator.api_messages(messages, "q")
        assert result == conversation()
        assert all(new is not old for new, old in zip(result, messages, strict=True))


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "assistant", "content": "hi"}],
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        [{"role": "user"}],
    ],
    ids=["empty", "no-user-message", "non-str-content", "no-content"],
)
def test_no_current_text_user_message_means_no_recall(messages: list[dict]) -> None:
    original = copy.deepcopy(messages)
    provider = FakeProvider()
    result = MemoryOrchestrator(FakeStore(), provider).api_messages(messages, "q")
    # Nothing to append to: plain copies, and the provider is not asked.
    assert result == original
    assert messages == original
    assert provider.queries == []


message_dicts = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool"]),
        "content": st.one_of(st.text(max_size=20), st.none()),
    }
)


@given(st.lists(message_dicts, max_size=6), st.text(min_size=1, max_size=30).filter(str.strip))
def test_api_messages_never_mutates_and_changes_at_most_one_copy(
    messages: list[dict], recalled: str
) -> None:
    original = copy.deepcopy(messages)
    orchestrator = MemoryOrchestrator(FakeStore(), FakeProvider(recalled=recalled))
    result = orchestrator.api_messages(messages, "q")
    assert messages == original
    changed = [i for i, (new, old) in enumerate(zip(result, original, strict=True)) if new != old]
    users = [i for i, message in enumerate(original) if message["role"] == "user"]
    block = build_fence(recalled)
    if users and isinstance(original[users[-1]]["content"], str) and block:
        # Exactly the last user message changed, by appending the block.
        assert changed == [users[-1]]
        assert result[users[-1]]["content"] == original[users[-1]]["content"] + "\n\n" + block
    else:
        assert changed == []
