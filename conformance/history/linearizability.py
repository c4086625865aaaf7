"""A linearizability checker for any model: Wing & Gong's search with Lowe's memoisation.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

S = TypeVar("S", bound=Hashable)

SearchVerdict = Literal["ok", "illegal", "unknown"]


@dataclass(frozen=True)
class Model(Generic[S]):
    """A Model is a pure sequential specification: ``step(state, input, output)`` returns whether
    ``output`` is legal for ``input`` in ``state`` (``None``, unknown, is accepted whenever the
    input applies) and the state after it; ``partition`` splits a history into independent
    sub-histories; ``describe`` renders a state."""

    init: Callable[[], S]
    step: Callable[[S, Any, Any], tuple[bool, S]]
    partition: Callable[[Sequence[Operation]], list[list[Operation]]] | None = None
    describe: Callable[[S], str] = repr


@dataclass(frozen=True)
class Operation:
    """An Operation is one call in a history: who, what, what came back, and when.

    ``output`` is ``None`` and ``ret`` is ``inf`` when the outcome is unknown.
    """

    process: int
    input: Any
    output: Any
    call: float
    ret: float = math.inf

    @property
    def completed(self) -> bool:
        """Whether the operation's outcome is known."""
        return math.isfinite(self.ret)


@dataclass(frozen=True)
class Explanation:
    """Why a history is not linearizable, at the deepest point the search reached: ``linearized``
    the longest legal order found, ``stuck`` the completed operations none of which could come next
    from ``state``."""

    linearized: tuple[Operation, ...]
    stuck: tuple[Operation, ...]
    state: str

    def render(self, tail: int = 12) -> str:
        """Returns the explanation as text a person can follow (the prefix's last ``tail``)."""
        lines = [f"longest legal prefix ({len(self.linearized)} operations):"]
        shown = self.linearized[-tail:]
        if len(self.linearized) > len(shown):
            lines.append(f"  ... {len(self.linearized) - len(shown)} earlier operations")
        first = len(self.linearized) - len(shown) + 1
        lines += [
            f"  {i:>3}. p{op.process} {op.input!r} -> {op.output!r}"
            for i, op in enumerate(shown, first)
        ]
        lines.append(f"model state after it: {self.state}")
        lines.append("no operation can come next; the candidates were:")
        lines += [
            f"  p{op.process} {op.input!r} -> {op.output!r} "
            f"(called {op.call:.6f}, returned {op.ret:.6f})"
            for op in self.stuck
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class Result:
    """The verdict of :func:`check_history`, with an explanation when it is ``illegal``."""

    verdict: SearchVerdict
    explanation: Explanation | None = None
    states_explored: int = 0
    seconds: float = 0.0


@dataclass
class _Entry:
    """A call or return event in the doubly linked event list of the search."""

    op_index: int
    is_call: bool
    time: float
    match: _Entry | None = None
    prev: _Entry | None = None
    next: _Entry | None = None


def _event_list(ops: Sequence[Operation]) -> _Entry:
    events: list[_Entry] = []
    for index, op in enumerate(ops):
        call = _Entry(index, True, op.call)
        events.append(call)
        if op.completed:
            ret = _Entry(index, False, op.ret, match=call)
            call.match = ret
            events.append(ret)
    # Closed intervals: at equal times calls sort before returns, so the operations overlap.
    events.sort(key=lambda e: (e.time, not e.is_call))
    head = _Entry(-1, False, -math.inf)
    previous = head
    for event in events:
        previous.next, event.prev = event, previous
        previous = event
    return head


def _lift(entry: _Entry) -> None:
    assert entry.prev is not None
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    ret = entry.match
    if ret is not None:
        assert ret.prev is not None
        ret.prev.next = ret.next
        if ret.next is not None:
            ret.next.prev = ret.prev


def _unlift(entry: _Entry) -> None:
    ret = entry.match
    if ret is not None:
        assert ret.prev is not None
        ret.prev.next = ret
        if ret.next is not None:
            ret.next.prev = ret
    assert entry.prev is not None
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


@dataclass
class _Search(Generic[S]):
    model: Model[S]
    ops: Sequence[Operation]
    deadline: float
    explored: int = 0
    best: tuple[tuple[int, ...], S] | None = None
    best_stuck: list[int] = field(default_factory=list)

    def run(self) -> SearchVerdict:
        head = _event_list(self.ops)
        state = self.model.init()
        linearized = 0  # a bitset of operation indexes
        cache: set[tuple[int, S]] = {(0, state)}
        stack: list[tuple[_Entry, S]] = []
        order: list[int] = []
        entry = head.next
        tried: list[int] = []
        while True:
            if entry is None:
                return "ok"  # no return is left: only calls of unknown outcomes remain
            if entry.is_call:
                self.explored += 1
                if self.explored % 4096 == 0 and time.monotonic() > self.deadline:
                    return "unknown"
                op = self.ops[entry.op_index]
                legal, after = self.model.step(state, op.input, op.output)
                key = (linearized | (1 << entry.op_index), after)
                if legal and key not in cache:
                    cache.add(key)
                    stack.append((entry, state))
                    order.append(entry.op_index)
                    state, linearized = after, key[0]
                    _lift(entry)
                    entry = head.next
                    tried = []
                else:
                    tried.append(entry.op_index)
                    entry = entry.next
                continue
            # A return: its operation was not linearized before it, so this branch is dead.
            self._remember(order, state, [*tried, entry.op_index])
            if not stack:
                return "illegal"
            entry, state = stack.pop()
            order.pop()
            linearized &= ~(1 << entry.op_index)
            _unlift(entry)
            entry = entry.next
            tried = []

    def _remember(self, order: list[int], state: S, stuck: list[int]) -> None:
        if self.best is None or len(order) > len(self.best[0]):
            self.best = (tuple(order), state)
            self.best_stuck = [i for i in dict.fromkeys(stuck) if self.ops[i].completed]

    def explanation(self) -> Explanation:
        order, state = self.best if self.best is not None else ((), self.model.init())
        return Explanation(
            tuple(self.ops[i] for i in order),
            tuple(self.ops[i] for i in self.best_stuck),
            self.model.describe(state),
        )


def check_history(model: Model[S], history: Sequence[Operation], timeout: float = 60.0) -> Result:
    """Returns whether ``history`` is linearizable with respect to ``model``.

    Each partition (see :attr:`Model.partition`) is searched on its own; the first illegal one
    decides, and any partition that times out makes the verdict ``unknown``.
    """
    started = time.monotonic()
    deadline = started + timeout
    parts = model.partition(history) if model.partition else [list(history)]
    explored = 0
    verdict: SearchVerdict = "ok"
    for part in parts:
        search = _Search(model, part, deadline)
        outcome = search.run()
        explored += search.explored
        if outcome == "illegal":
            return Result("illegal", search.explanation(), explored, time.monotonic() - started)
        if outcome == "unknown":
            verdict = "unknown"
    return Result(verdict, None, explored, time.monotonic() - started)
