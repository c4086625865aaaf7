"""What the fuzz strategies generate reaches a backend over JSON Lines as the harness judges it."""

from __future__ import annotations

import json
from itertools import product

from hypothesis import given
from hypothesis import strategies as st

from memspec.conformance.transport.wire import Request
from memspec.fuzz.strategies import (
    SURROGATES,
    entry_texts,
    fence_payloads,
    lone_surrogates,
    requests,
)


def test_a_high_surrogate_before_a_low_one_is_kept_apart() -> None:
    # JSON reads "\ud800\udc00" as U+10000: a port stored that one character, correctly, and
    # was blamed on ENTRY-3 for not refusing two lone surrogates it never received.
    assert json.loads(json.dumps("\ud800\udc00")) == "\U00010000"
    assert lone_surrogates("a\ud800\udc00b\udc00\ud800") == "a\ud800 \udc00b\udc00\ud800"
    for first, second in product(SURROGATES, repeat=2):
        kept = lone_surrogates(first + second)
        assert json.loads(json.dumps(kept)) == kept


@given(st.one_of(entry_texts(), fence_payloads()))
def test_generated_text_survives_json(text: str) -> None:
    assert json.loads(json.dumps(text)) == text


class _Recorder:
    """Stands in for ``st.data()``: hands out ``values`` and records each strategy drawn."""

    def __init__(self, values: list[int]) -> None:
        self.values = values
        self.drawn: list[object] = []

    def draw(self, strategy: object) -> int:
        self.drawn.append(strategy)
        return self.values.pop(0)


def test_the_scheduler_draws_one_strategy_whoever_is_enabled() -> None:
    from memspec.conformance.schedule.schedule import Decision
    from memspec.fuzz.interleavings import hypothesis_chooser

    decisions = [
        Decision(0, ("p0", "p1", "p2"), {}, None),
        Decision(1, ("p0",), {}, "p1"),  # the last one blocked: one other
        Decision(2, ("p0", "p2"), {}, "p0"),  # two others
        Decision(3, ("p1",), {}, "p1"),  # no other
    ]
    data = _Recorder([0, 3, 7, 255])
    chooser = hypothesis_chooser(data)
    picks = [chooser(decision) for decision in decisions]
    assert picks == ["p0", "p0", "p2", "p1"]
    assert len(data.drawn) == len(decisions) and len(set(map(repr, data.drawn))) == 1


@given(requests(batch=True, patch=True, malformed=False))
def test_a_search_of_accepted_operations_draws_no_malformed_batch_item(request: Request) -> None:
    # The round trip drew {"action": "add", "content": 7}, on which every Hermes release with
    # batches dies (CONTRACT-6): its search ended there, before any delimiter was tried.
    for item in request.get("operations", [{"action": "add", "content": "x"}]):
        assert isinstance(item, dict) and item["action"] in ("add", "replace", "remove")
        assert all(isinstance(item[key], str) for key in ("content", "old_text") if key in item)
    assert request.get("operations", [None]) != []
