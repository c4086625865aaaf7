"""The checkers of concurrent histories on small histories with known verdicts.

Each history is written by hand: sessions' mutations and a reader's samples with times. Every
checker and clause has a history that it, and it alone, rejects first, and a legal history
passes them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.history.analysis import analyse, effect_of
from memspec.conformance.history.checkers import CHECKERS, CheckerFinding, judge_history
from memspec.conformance.history.history import Event, memory_model, operations, read_history
from memspec.conformance.history.linearizability import check_history
from memspec.conformance.history.spec_search import check_linearizable, effect_windows

READER = 9
LIMITS = {"memory": 10_000, "user": 10_000}
HISTORIES = Path(__file__).parents[1] / "histories"


def mutation(
    process: int, request: dict[str, Any], start: float, end: float | None, code: str = "OK"
) -> list[Event]:
    """An invoke and its completion (``end`` None: the process died, ``info``)."""
    invoke = Event("invoke", process, request, start)
    if end is None:
        return [invoke, Event("info", process, request, start, {"message": "killed"})]
    kind = "ok" if code == "OK" else "fail"
    return [invoke, Event(kind, process, request, end, {"ok": code == "OK", "code": code})]


def add(process: int, text: str, start: float, end: float | None, code: str = "OK") -> list[Event]:
    return mutation(process, {"op": "add", "target": "memory", "content": text}, start, end, code)


def remove(process: int, old: str, start: float, end: float, code: str = "OK") -> list[Event]:
    return mutation(
        process, {"op": "remove", "target": "memory", "old_text": old}, start, end, code
    )


def replace(process: int, old: str, new: str, start: float, end: float) -> list[Event]:
    request = {"op": "replace", "target": "memory", "old_text": old, "new_content": new}
    return mutation(process, request, start, end)


def batch(process: int, items: list[dict[str, Any]], start: float, end: float) -> list[Event]:
    return mutation(process, {"op": "batch", "target": "memory", "operations": items}, start, end)


def read(start: float, entries: list[str] | None, target: str = "memory") -> list[Event]:
    request = {"op": "read", "target": target}
    value = {"unreadable": True} if entries is None else {"entries": entries}
    return [
        Event("invoke", READER, request, start),
        Event("ok", READER, request, start + 0.05, value),
    ]


def judged(*parts: list[Event], limits: dict[str, int] = LIMITS) -> list[CheckerFinding]:
    events = [event for part in parts for event in part]
    return judge_history(events, limits, start={}, timeout=10)


def first(findings: list[CheckerFinding]) -> tuple[str, str]:
    assert findings, "the history was accepted"
    return findings[0].checker, findings[0].clause


def test_a_legal_history_passes_every_checker() -> None:
    findings = judged(
        read(0.0, []),
        add(0, "[a] one", 1.0, 2.0),
        add(1, "[b] two", 1.5, 2.5),
        read(3.0, ["[b] two", "[a] one"]),
        replace(0, "[a]", "[c] three", 4.0, 5.0),
        read(6.0, ["[b] two", "[c] three"]),
        remove(1, "[b]", 7.0, 8.0),
        remove(1, "[b]", 8.5, 8.7, code="E_NOMATCH"),
        batch(
            2, [{"action": "add", "content": "[d] x"}, {"action": "add", "content": "[e] y"}], 9, 10
        ),
        read(11.0, ["[c] three", "[d] x", "[e] y"]),
    )
    assert findings == []
    assert CHECKERS == ("acknowledged", "samples", "limits", "linearizability")


def test_an_acknowledged_add_that_is_lost() -> None:
    # LOCK-3: "[a] one" was acknowledged and never removed, yet the last sample lacks it.
    findings = judged(add(0, "[a] one", 1, 2), add(1, "[b] two", 1.5, 2.5), read(3, ["[b] two"]))
    assert first(findings) == ("acknowledged", "LOCK-3")
    assert "acknowledged write was lost: '[a] one'" in findings[0].message
    assert "timeline of the 2 mutations" in findings[0].message


def test_an_entry_nobody_wrote() -> None:
    # ATOMIC-2: a torn entry ("[a] on") is text no session sent.
    findings = judged(add(0, "[a] one", 1, 2), read(1.5, ["[a] on"]), read(3, ["[a] one"]))
    assert first(findings) == ("acknowledged", "ATOMIC-2")
    assert "no session wrote" in findings[0].message
    assert {f.clause for f in findings} == {"ATOMIC-2"}  # not also a duplicate (LOCK-3)


def test_the_entry_of_a_refused_add_appears() -> None:
    # LIMIT-3: an add refused with E_LIMIT wrote nothing, so its entry never appears.
    findings = judged(add(0, "[a] one", 1, 2, code="E_LIMIT"), read(3, ["[a] one"]))
    assert first(findings) == ("acknowledged", "LIMIT-3")


def test_an_unreadable_sample() -> None:
    findings = judged(add(0, "[a] one", 1, 2), read(1.5, None), read(3, ["[a] one"]))
    assert first(findings) == ("samples", "ATOMIC-2")
    assert "half written" in findings[0].message


def test_an_empty_file_for_a_moment() -> None:
    # ATOMIC-2: truncated in place: the reader sees nothing, then everything again.
    findings = judged(
        add(0, "[a] one", 1, 2),
        add(0, "[b] two", 3, 4),
        read(3.5, []),
        read(5, ["[a] one", "[b] two"]),
    )
    assert first(findings) == ("samples", "ATOMIC-2")
    assert "empty file" in findings[0].message


def test_a_stale_writers_empty_file_is_a_lost_update() -> None:
    # LOCK-3, not ATOMIC-2: the remove read the file before "[a] one" was written and renamed
    # its whole, empty result over it afterwards; the file stays empty.
    findings = judged(
        add(2, "[z] old", 0, 0.5),
        add(0, "[a] one", 1, 2),
        remove(1, "[z]", 0.9, 2.5),
        read(3, []),
        read(4, []),
    )
    assert first(findings) == ("acknowledged", "LOCK-3")
    assert all(f.clause != "ATOMIC-2" for f in findings)


def test_a_sample_both_a_torn_and_a_stale_write_explain_blames_neither() -> None:
    # The empty sample is the stale remove's whole file or the add of "[c] x" caught writing
    # in place, and "[a] one" is back afterwards: no clause is blamed on it.
    findings = judged(
        add(2, "[z] old", 0, 0.5),
        add(0, "[a] one", 1, 2),
        remove(1, "[z]", 0.9, 2.5),
        read(3, []),
        add(3, "[c] x", 2.1, 3.6),
        read(4, ["[a] one", "[c] x"]),
    )
    assert findings == []


def test_a_batch_seen_between_its_items_is_batch_2s() -> None:
    # "[a] one" is what the batch's first item writes and its second item replaces: a file
    # holding it shows the batch half applied (BATCH-2), not a torn entry (ATOMIC-2).
    items = [
        {"action": "add", "content": "[a] one"},
        {"action": "replace", "old_text": "[a]", "content": "[a] two"},
    ]
    findings = judged(batch(0, items, 1, 2), read(1.5, ["[a] one"]), read(3, ["[a] two"]))
    assert {f.clause for f in findings} == {"BATCH-2"}, findings
    # a batch refused for the limit whose first item is in the file anyway: BATCH-2 too
    refused = mutation(0, {"op": "batch", "target": "memory", "operations": items[:1]}, 1, 2,
                       code="E_LIMIT")  # fmt: skip
    assert first(judged(refused, read(3, ["[a] one"]))) == ("acknowledged", "BATCH-2")


def test_a_removed_entry_comes_back() -> None:
    # LOCK-3: a remove was acknowledged, yet a later sample holds the entry again.
    findings = judged(
        add(0, "[a] one", 1, 2),
        remove(1, "[a]", 3, 4),
        read(5, []),
        read(6, ["[a] one"]),
    )
    assert first(findings) == ("samples", "LOCK-3")
    assert "removed entry came back" in findings[0].message


def test_an_entry_twice() -> None:
    findings = judged(add(0, "[a] one", 1, 2), read(3, ["[a] one", "[a] one"]))
    assert first(findings) == ("samples", "LOCK-3")
    assert "2 times" in findings[0].message


def test_a_replace_seen_half_done() -> None:
    # REPLACE-1: the old entry and its replacement are never both in the file.
    findings = judged(
        add(0, "[a] one", 1, 2),
        replace(0, "[a]", "[b] two", 3, 4),
        read(3.5, ["[a] one", "[b] two"]),
        read(5, ["[b] two"]),
    )
    assert first(findings) == ("samples", "REPLACE-1")


def test_a_batch_seen_half_done() -> None:
    # BATCH-2: a batch takes effect as a whole.
    items = [{"action": "add", "content": "[a] one"}, {"action": "add", "content": "[b] two"}]
    findings = judged(
        batch(0, items, 1, 2), read(1.5, ["[a] one"]), read(3, ["[a] one", "[b] two"])
    )
    assert first(findings) == ("samples", "BATCH-2")


def test_entries_in_an_order_no_appends_explain() -> None:
    # LOCK-3: "[a]" was acknowledged before "[b]" was invoked, so it comes first.
    findings = judged(
        add(0, "[a] one", 1, 2),
        add(1, "[b] two", 3, 4),
        read(5, ["[b] two", "[a] one"]),
    )
    assert first(findings) == ("samples", "LOCK-3")
    assert "no order of appends" in findings[0].message


@pytest.mark.parametrize(
    ("user_limit", "clause", "not_clause"),
    [
        # LIMIT-2: the store grew past its limit of 10 code points
        (10, "LIMIT-2", "LIMIT-6"),
        # 7 + 3 + 7 = 17 code points, over memory's 10 but within user's 20: the store counted
        # memory against user's limit (LIMIT-6), as the model's limit rule decides
        (20, "LIMIT-6", "LIMIT-2"),
    ],
)
def test_a_sample_over_the_limit(user_limit: int, clause: str, not_clause: str) -> None:
    findings = judged(
        add(0, "[a] one", 1, 2),
        add(1, "[b] two", 1.5, 2.5),
        read(3, ["[a] one", "[b] two"]),
        limits={"memory": 10, "user": user_limit},
    )
    assert ("limits", clause) in [(f.checker, f.clause) for f in findings]
    assert not_clause not in [f.clause for f in findings]


def test_a_refusal_only_the_search_can_judge() -> None:
    # LOCK-3: E_LIMIT with room to spare: every sample is fine, no order explains the refusal.
    findings = judged(
        add(0, "[a] one", 1, 2),
        read(3, ["[a] one"]),
        add(1, "[b] two", 4, 5, code="E_LIMIT"),
        read(6, ["[a] one"]),
    )
    assert first(findings) == ("linearizability", "LOCK-3")
    message = findings[0].message
    assert "not linearizable" in message and "where the model answers OK" in message
    assert "model state after it (memory): 1 entries ['[a] one']" in message


def test_a_killed_add_may_or_may_not_have_happened() -> None:
    assert judged(add(0, "[a] one", 1, None), read(3, [])) == []
    assert judged(add(0, "[a] one", 1, None), read(3, ["[a] one"])) == []


def test_a_search_out_of_time_is_undecided_never_a_pass() -> None:
    # Twelve concurrent adds and a final sample missing one: every order must be tried.
    texts = [f"[{i}] x" for i in range(12)]
    events = [e for i, text in enumerate(texts) for e in add(i, text, 1, 2)]
    events += read(3, texts[1:])
    findings = check_linearizable(analyse(events, LIMITS, {}), timeout=0.2)
    assert [(f.checker, f.undecided) for f in findings] == [("linearizability", True)]
    assert "undecided" in findings[0].message


def test_effect_of_a_batch_follows_its_items() -> None:
    effect = effect_of(
        {
            "op": "batch",
            "target": "memory",
            "operations": [
                {"action": "add", "content": "[a] one"},
                {"action": "replace", "old_text": "[a]", "content": "[b] two"},
                {"action": "remove", "old_text": "[z]"},
                {"action": "replace", "old_text": "[y]", "content": "[c] three"},
            ],
        }
    )
    assert [w.text for w in effect.written] == ["[b] two", "[c] three"]
    assert effect.removed == ["[z]", "[y]"]


def test_windows_narrow_an_add_to_the_samples_around_its_text() -> None:
    events = [*read(0, []), *add(0, "[a] one", 0, 10), *read(4, []), *read(5, ["[a] one"])]
    view = analyse(events, LIMITS, {}).targets["memory"]
    (window,) = effect_windows(view).values()
    assert (window.low, window.high) == (4, 5.05)


@pytest.mark.parametrize(
    "path", sorted(HISTORIES.glob("*/*.jsonl")), ids=lambda p: f"{p.parent.name}-{p.stem}"
)
def test_narrowed_search_keeps_the_verdict(path: Path) -> None:
    events = read_history(path)
    plain = check_history(memory_model(100_000), operations(events), timeout=30).verdict
    narrowed = check_linearizable(analyse(events, {"memory": 100_000}, {}), timeout=30)
    assert ("ok" if not narrowed else "illegal") == plain


def test_appends_nobody_saw_happen_are_ordered_by_the_file() -> None:
    # Ten sessions append at once and replace their entry before the reader's first sample:
    # the file's order decides the search's order (no trying of 10! orders).
    events: list[Event] = []
    for p in range(10):
        events += add(p, f"[{p}] x", 1, 2)
        events += replace(p, f"[{p}]", f"[{p}.r] y", 2.1, 2.5)
    shown = [f"[{p}.r] y" for p in (7, 3, 9, 0, 1, 8, 2, 6, 5, 4)]
    events += read(3, shown)
    analysis = analyse(events, LIMITS, {})
    assert check_linearizable(analysis, timeout=5) == []
    events += read(4, shown[1:])
    assert first(judged(events)) == ("acknowledged", "LOCK-3")
