"""The linearizability checker of :func:`~memspec.conformance.history.checkers.judge_history`
(LOCK-3).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from memspec.conformance.history.analysis import (
    SHOWN,
    Analysis,
    CheckerFinding,
    HistoryCall,
    Sample,
    TargetView,
    listing,
    short,
    timeline_near,
)
from memspec.conformance.history.history import DiskRead, memory_model, operations
from memspec.conformance.history.linearizability import Explanation, Model, Operation, check_history
from memspec.spec import model
from memspec.spec.targets import DEFAULT_LIMITS


def _describe_entries(entries: Sequence[str] | None) -> str:
    return "unreadable" if entries is None else f"{len(entries)} entries {listing(entries)}"


def _spec_model(analysis: Analysis) -> Model[model.State]:
    limits = analysis.limits
    return memory_model(
        limits.get("memory", DEFAULT_LIMITS["memory"]),
        limits.get("user", DEFAULT_LIMITS["user"]),
        analysis.start.get("memory"),
        analysis.start.get("user"),
    )


def _state_after(analysis: Analysis, linearized: Sequence[Operation]) -> model.State:
    memory = _spec_model(analysis)
    state = memory.init()
    for op in linearized:
        _, state = memory.step(state, op.input, op.output)
    return state


def _observed(state: model.State, op: Operation) -> str:
    given = op.input
    target = str(given.target)
    if not isinstance(given, DiskRead):
        outcome, _ = model.step(state, given)
        return f"answered {op.output}, where the model answers {outcome.code}"
    seen = model.entries_on_disk(state, target) or ()
    observed = op.output
    if observed is None:
        return "read an unreadable file"
    missing = [e for e in seen if e not in observed]
    extra = [e for e in observed if e not in seen]
    parts = [f"read {_describe_entries(observed)}"]
    if missing:
        parts.append(f"lacking {listing(missing)} of the model's state")
    if extra:
        parts.append(f"with {listing(extra)} that the model's state lacks")
    if not missing and not extra:
        parts.append("in another order than the model's state")
    return ", ".join(parts)


def _explain(analysis: Analysis, explanation: Explanation) -> tuple[str, float]:
    """Returns the explanation rendered compactly, and the moment it concerns."""
    linearized = explanation.linearized
    state = _state_after(analysis, linearized)
    stuck = sorted(explanation.stuck, key=lambda op: op.ret)
    lines = [f"longest legal prefix: {len(linearized)} operations; the last of them:"]
    for op in linearized[-4:]:
        lines.append(f"  p{op.process} {_op_label(op)} [{op.call:.6f}, {op.ret:.6f}]")
    target = str(stuck[0].input.target) if stuck else "memory"
    lines.append(
        f"model state after it ({target}): "
        f"{_describe_entries(model.entries_on_disk(state, target))}"
    )
    lines.append("no operation can come next; the first that cannot be linearized:")
    for op in stuck[:SHOWN]:
        lines.append(
            f"  p{op.process} {_op_label(op)} [{op.call:.6f}, {op.ret:.6f}]: {_observed(state, op)}"
        )
    return "\n".join(lines), (stuck[0].call if stuck else 0.0)


def _op_label(op: Operation) -> str:
    given = op.input
    if isinstance(given, DiskRead):
        return f"read {given.target}"
    kind = type(given).__name__.lower()
    args = [
        short(getattr(given, name))
        for name in ("content", "old_text", "new_content")
        if isinstance(getattr(given, name, None), str)
    ]
    return f"{kind} {given.target} " + " ".join([*args, "->", str(op.output)])


def _memoised(base: Model[model.State]) -> Model[model.State]:
    """Returns ``base`` with its steps remembered: a backtracking search asks the same step of
    the same state many times, and each step parses the whole file."""
    memo: dict[tuple[Any, Any, Any], tuple[bool, model.State]] = {}

    def step(state: model.State, given: Any, output: Any) -> tuple[bool, model.State]:
        key = (state, given, output)
        found = memo.get(key)
        if found is None:
            found = memo[key] = base.step(state, given, output)
        return found

    return Model(base.init, step, base.partition, base.describe)


@dataclass(frozen=True)
class Window:
    """When a mutation's effect must have happened, by the samples: after ``low``, no later than
    ``high``; ``rank`` is the order in which its text first appears (the file order of
    appends), the order in which the search tries mutations whose windows open together."""

    low: float
    high: float
    rank: int = 0


def effect_windows(view: TargetView) -> dict[int, Window]:
    """Returns, per acknowledged call (by id), the window its effect must fall in, from the samples:
    around the first sample showing its text, around the last one holding a text it removes, and
    ordered with other appends as their entries stand in the file. With one writer and one remover
    per text this holds in every linearization, so the narrowed search reaches the same verdict."""
    order = {id(sample): index for index, sample in enumerate(view.samples)}
    samples = view.samples
    windows: dict[int, tuple[float, float]] = {}
    ranks: dict[int, int] = {}

    def narrow(call: HistoryCall, low: float, high: float) -> None:
        old_low, old_high = windows.get(id(call), (call.call, call.ret))
        windows[id(call)] = (max(old_low, low), min(old_high, high))

    def readable(index: int, step: int) -> Sample | None:
        while 0 <= index < len(samples):
            if samples[index].entries is not None:
                return samples[index]
            index += step
        return None

    for text, present in view.present_runs.items():
        sole = view.sole_producer(text)
        if sole is not None and sole[0].status == "ok":
            first = view.runs[present[0]].first
            before = readable(order[id(first)] - 1, -1)
            narrow(sole[0], before.call if before is not None else -math.inf, first.ret)
        removers = view.removers.get(text, [])
        if len(removers) != 1 or removers[0][0].status != "ok":
            continue
        remover, old = removers[0]
        if view.sole_match(old) != text or len(view.producers.get(text, [])) > 1:
            continue
        last = view.runs[present[-1]].last
        after = readable(order[id(last)] + 1, 1)
        narrow(remover, last.call, after.ret if after is not None else math.inf)
    _chain_appends(view, windows, ranks)
    return {
        key: Window(low, high, ranks.get(key, 0))
        for key, (low, high) in windows.items()
        if low <= high
    }


def _chain_appends(
    view: TargetView, windows: dict[int, tuple[float, float]], ranks: dict[int, int]
) -> None:
    """Makes the windows of appends monotone in the file order of their entries, and ranks
    them by first appearance: where an entry stands before another, its append came first (a
    replacement stands where the entry it replaced was appended, REPLACE-1)."""
    for run in view.runs:
        appends: list[HistoryCall] = []
        fresh = False
        for text in run.entries or ():
            call = _append_of(view, text)
            if call is None:
                continue
            windows.setdefault(id(call), (call.call, call.ret))
            if not appends or appends[-1] is not call:
                appends.append(call)
            if id(call) not in ranks:
                ranks[id(call)] = len(ranks) + 1
                fresh = True
        if not fresh:
            continue
        low = -math.inf
        for call in appends:
            low = max(low, windows[id(call)][0])
            windows[id(call)] = (low, windows[id(call)][1])
        high = math.inf
        for call in reversed(appends):
            high = min(high, windows[id(call)][1])
            windows[id(call)] = (windows[id(call)][0], high)


def _append_of(view: TargetView, text: str, depth: int = 0) -> HistoryCall | None:
    """Returns the acknowledged append that made ``text``'s place in the file: its writer, or,
    for a replacement, the append of the entry it replaced (``None``: unknown)."""
    sole = view.sole_producer(text)
    if sole is None or sole[0].status != "ok" or depth > 64:
        return None
    call, written = sole
    if written.replaces is None:
        return call
    replaced = view.sole_match(written.replaces)
    return None if replaced is None else _append_of(view, replaced, depth + 1)


def _narrowed(analysis: Analysis, ops: list[Operation]) -> list[tuple[Operation, Operation]]:
    """Returns ``ops`` with each acknowledged mutation's interval narrowed by
    :func:`effect_windows`, in the order of their narrowed calls and ranks, each paired with the
    operation as recorded."""
    windows: dict[tuple[int, float], Window] = {}
    for view in analysis.targets.values():
        calls = {id(call): call for call in view.calls}
        for key, effect in effect_windows(view).items():
            windows[(calls[key].process, calls[key].call)] = effect
    narrowed: list[tuple[float, int, int, Operation, Operation]] = []
    for index, op in enumerate(ops):
        window = windows.get((op.process, op.call))
        if window is None or isinstance(op.input, DiskRead):
            narrowed.append((op.call, 0, index, op, op))
            continue
        new = replace(op, call=window.low, ret=window.high)
        narrowed.append((window.low, window.rank, index, new, op))
    return [(new, op) for *_, new, op in sorted(narrowed, key=lambda item: item[:3])]


def check_linearizable(analysis: Analysis, timeout: float = 60.0) -> list[CheckerFinding]:
    """The whole history is linearizable against the spec model (LOCK-3); a search that runs out of
    time is an undecided finding, never a pass. The intervals are narrowed by
    :func:`effect_windows`."""
    memory = _memoised(_spec_model(analysis))
    pairs = _narrowed(analysis, operations(analysis.events))
    ops = [new for new, _ in pairs]
    result = check_history(memory, ops, timeout=timeout)
    scale = f"{len(ops)} operations"
    if result.verdict == "unknown":
        return [
            CheckerFinding(
                "linearizability",
                "LOCK-3",
                f"undecided: the linearizability search of {scale} ran out of time "
                f"after {result.seconds:.1f} s and {result.states_explored:,} states",
                undecided=True,
            )
        ]
    if result.verdict == "ok":
        return []
    assert result.explanation is not None
    originals = {id(new): old for new, old in pairs}
    text, moment = _explain(analysis, _recorded(result.explanation, originals))
    message = (
        f"the history of {scale} is not linearizable: no order of the mutations that "
        "respects real time explains what the sessions were answered and what the reader saw.\n"
        + text
    )
    return [
        CheckerFinding(
            "linearizability", "LOCK-3", message + "\n" + timeline_near(analysis, moment)
        )
    ]


def _recorded(explanation: Explanation, originals: dict[int, Operation]) -> Explanation:
    """Returns ``explanation`` with the operations' recorded intervals."""
    return Explanation(
        tuple(originals.get(id(op), op) for op in explanation.linearized),
        tuple(originals.get(id(op), op) for op in explanation.stuck),
        explanation.state,
    )
