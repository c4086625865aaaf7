"""The linearizability checker and the memory model on histories with known verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memspec.conformance.history.history import (
    DiskRead,
    Event,
    HistoryError,
    memory_model,
    operations,
    read_history,
    timeline,
    write_history,
)
from memspec.conformance.history.linearizability import Model, Operation, check_history

HISTORIES = Path(__file__).parents[1] / "histories"


def _files(verdict: str) -> list[Path]:
    return sorted((HISTORIES / verdict).glob("*.jsonl"))


@pytest.mark.parametrize("path", _files("linearizable"), ids=lambda p: p.stem)
def test_linearizable_histories_pass(path: Path) -> None:
    result = check_history(memory_model(100_000), operations(read_history(path)), timeout=30)
    assert result.verdict == "ok"


@pytest.mark.parametrize("path", _files("illegal"), ids=lambda p: p.stem)
def test_illegal_histories_are_found_and_explained(path: Path) -> None:
    # LOCK-3: a lost or unexplainable write makes the history illegal, with the reason.
    result = check_history(memory_model(100_000), operations(read_history(path)), timeout=30)
    assert result.verdict == "illegal"
    assert result.explanation is not None
    text = result.explanation.render()
    assert "no operation can come next" in text and result.explanation.stuck


def _register() -> Model[int]:
    def step(state: int, given: tuple[str, int], output: object) -> tuple[bool, int]:
        kind, value = given
        if kind == "write":
            return True, value
        return output is None or output == state, state

    return Model(init=lambda: 0, step=step)


def test_closed_intervals_make_equal_times_concurrent() -> None:
    # write 1 returns at 2 and read 0 is invoked at 2: concurrent, so reading 0 is legal.
    history = [Operation(0, ("write", 1), None, 0, 2), Operation(1, ("read", 0), 0, 2, 3)]
    assert check_history(_register(), history).verdict == "ok"
    later = [Operation(0, ("write", 1), None, 0, 2), Operation(1, ("read", 0), 0, 2.5, 3)]
    assert check_history(_register(), later).verdict == "illegal"


def test_unknown_outcomes_may_or_may_not_happen() -> None:
    happened = [Operation(0, ("write", 7), None, 0), Operation(1, ("read", 0), 7, 1, 2)]
    never = [Operation(0, ("write", 7), None, 0), Operation(1, ("read", 0), 0, 1, 2)]
    assert check_history(_register(), happened).verdict == "ok"
    assert check_history(_register(), never).verdict == "ok"


def test_timeout_is_unknown_never_ok() -> None:
    # Unknown never reads as a pass: a search cut short says so.
    def step(state: int, given: int, output: object) -> tuple[bool, int]:
        return output != "never", state + given

    model = Model(init=lambda: 0, step=step)
    history = [Operation(p, 1, None, 0, 10) for p in range(22)]
    history.append(Operation(99, 0, "never", 11, 12))
    assert check_history(model, history, timeout=0.2).verdict == "unknown"


def test_history_round_trip_and_timeline(tmp_path: Path) -> None:
    source = HISTORIES / "linearizable" / "killed-writer-may-or-may-not-have-happened.jsonl"
    events = read_history(source)
    copy = tmp_path / "copy.jsonl"
    write_history(copy, events)
    assert read_history(copy) == events
    ops = operations(events)
    assert [op.completed for op in ops].count(False) == 2
    assert isinstance(ops[-1].input, DiskRead)
    picture = timeline(events, width=40)
    assert picture.splitlines()[0].startswith("p0  |") and "in flight" in picture
    assert timeline([]) == "(empty history)"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{"], "not a history event"),
        ([json.dumps({"type": "nope", "process": 0, "op": {}, "time": 0})], "unknown event type"),
    ],
)
def test_bad_history_files(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(HistoryError, match=message):
        read_history(path)


def test_inconsistent_event_sequences() -> None:
    add = {"op": "add", "target": "memory", "content": "x"}
    with pytest.raises(HistoryError, match="invoked twice"):
        operations([Event("invoke", 0, add, 0), Event("invoke", 0, add, 1)])
    with pytest.raises(HistoryError, match="never invoked"):
        operations([Event("ok", 0, add, 0, {"code": "OK"})])
    with pytest.raises(HistoryError, match="cannot appear"):
        operations([Event("invoke", 0, {"op": "load"}, 0)])


def test_a_sample_or_a_code_of_another_type_is_a_history_error() -> None:
    read = {"op": "read", "target": "memory"}
    add = {"op": "add", "target": "memory", "content": "x"}
    sampled = [Event("invoke", 1, read, 0), Event("ok", 1, read, 1, {"entries": ["x"]})]
    answered = [Event("invoke", 0, add, 0), Event("ok", 0, add, 1, {"code": "OK"})]
    assert [op.output for op in operations([*sampled, *answered])] == [("x",), "OK"]
    # A sample's entries are a list and an answer's code a string, never read letter by letter.
    with pytest.raises(HistoryError, match="no list of entries"):
        operations([Event("invoke", 1, read, 0), Event("ok", 1, read, 1, {"entries": "ab"})])
    with pytest.raises(HistoryError, match="code is a string"):
        operations([Event("invoke", 0, add, 0), Event("ok", 0, add, 1, {"code": 7})])
