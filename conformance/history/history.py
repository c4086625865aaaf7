"""Histories of concurrent sessions, Jepsen-style, and the memory model that checks them.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from memspec.conformance.history.linearizability import Model, Operation
from memspec.conformance.transport.wire import (
    Answer,
    EventType,
    HistoryRecord,
    Request,
    Sample,
    Unanswered,
)
from memspec.spec import codes, model
from memspec.spec.errors import MemspecError
from memspec.spec.operations import Add, Batch, Mutation, Patch, Remove, Replace
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

EVENT_TYPES = ("invoke", "ok", "fail", "info")


class HistoryError(MemspecError, ValueError):
    """A history file is malformed; the message names the line and what is wrong."""


@dataclass(frozen=True)
class Event:
    """An Event is one line of a history."""

    type: EventType
    process: int
    op: Request
    time: float
    value: Answer | Sample | Unanswered | None = None

    @classmethod
    def from_record(cls, record: HistoryRecord) -> Event:
        """Returns the event of a JSON record (raises KeyError, TypeError or ValueError)."""
        return cls(
            record["type"],
            int(record["process"]),
            cast(Request, dict(record["op"])),
            float(record["time"]),
            record.get("value"),
        )

    def sample_entries(self) -> tuple[str, ...] | None:
        """Returns the entries that a reader's sample, this completion's value, saw: ``None``
        when it found the file unreadable. Raises HistoryError for a value with a list of
        neither."""
        value = self.value or {}
        if value.get("unreadable"):
            return None
        entries = value.get("entries", [])
        if not isinstance(entries, list | tuple):
            raise HistoryError(f"a reader's sample holds no list of entries: {self.value!r}")
        return tuple(entries)

    def answer_code(self) -> str | None:
        """Returns the code of the answer this completion carries (``None``: it has none).
        Raises HistoryError for a code that is not a string."""
        code = (self.value or {}).get("code")
        if code is not None and not isinstance(code, str):
            raise HistoryError(f"an answer's code is a string, got {code!r}")
        return code

    def to_json(self) -> HistoryRecord:
        """Returns the event as a JSON-ready record."""
        record: HistoryRecord = {
            "type": self.type,
            "process": self.process,
            "op": self.op,
            "time": self.time,
        }
        if self.value is not None:
            record["value"] = self.value
        return record


@dataclass(frozen=True)
class DiskRead:
    """A reader sampled ``target``'s file: the output is its entries (``None``: unreadable)."""

    target: str


def write_history(path: Path, events: Iterable[Event]) -> None:
    """Writes ``events`` to ``path`` as JSON Lines."""
    with path.open("w", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event.to_json()) + "\n")


def read_history(path: Path) -> list[Event]:
    """Returns the events of a history file (raises HistoryError naming the bad line)."""
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = Event.from_record(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise HistoryError(f"{path}:{number}: not a history event ({error})") from None
        if event.type not in EVENT_TYPES:
            raise HistoryError(f"{path}:{number}: unknown event type {event.type!r}")
        events.append(event)
    return events


def operations(events: Sequence[Event]) -> list[Operation]:
    """Returns the operations of a history: each invoke paired with its process's completion.

    An invoke without a completion, or completed by ``info``, has an unknown outcome.
    """
    pending: dict[int, Event] = {}
    done: list[Operation] = []
    for event in events:
        if event.type == "invoke":
            if event.process in pending:
                raise HistoryError(f"process {event.process} invoked twice without completing")
            pending[event.process] = event
            continue
        start = pending.pop(event.process, None)
        if start is None:
            raise HistoryError(f"process {event.process} completed an operation it never invoked")
        if event.type == "info":
            done.append(Operation(event.process, to_input(start.op), None, start.time))
        else:
            done.append(
                Operation(
                    event.process,
                    to_input(start.op),
                    to_output(start.op, event),
                    start.time,
                    event.time,
                )
            )
    done.extend(Operation(e.process, to_input(e.op), None, e.time) for e in pending.values())
    return sorted(done, key=lambda op: op.call)


def to_input(request: Request) -> Mutation | DiskRead:
    """Returns the model input of a protocol request (or a reader's sample)."""
    if request.get("op") == "read":
        return DiskRead(str(request.get("target")))
    return to_mutation(request)


def to_mutation(request: Request) -> Mutation:
    """Returns the model mutation of a protocol request (raises HistoryError for another op)."""
    op, target = request.get("op"), request.get("target")
    if op == "add":
        return Add(target, request.get("content"))
    if op == "replace":
        return Replace(target, request.get("old_text"), request.get("new_content"))
    if op == "remove":
        return Remove(target, request.get("old_text"))
    if op == "patch":
        return Patch(target, request.get("old_text"), request.get("content"))
    if op == "batch":
        return Batch(target, request.get("operations"))
    raise HistoryError(f"operation {op!r} cannot appear in a history")


def to_output(request: Request, event: Event) -> Any:
    """Returns the observed output: a code for a mutation, a tuple of entries for a read."""
    if request.get("op") == "read":
        return event.sample_entries()
    return event.answer_code()


def _step(state: model.State, given: Mutation | DiskRead, output: Any) -> tuple[bool, model.State]:
    if isinstance(given, DiskRead):
        seen = model.entries_on_disk(state, given.target)
        return output is None or output == seen, state
    if output == codes.E_IO:
        return True, state  # a failed write leaves the previous file intact (ATOMIC-4)
    outcome, after = model.step(state, given)
    return output is None or output == outcome.code, after


def _partition(history: Sequence[Operation]) -> list[list[Operation]]:
    parts: dict[str, list[Operation]] = {}
    for op in history:
        parts.setdefault(str(op.input.target), []).append(op)
    return list(parts.values())


def _describe(state: model.State) -> str:
    return "; ".join(
        f"{target}: {list(model.entries_on_disk(state, target) or [])!r}" for target in TARGETS
    )


def memory_model(
    memory_char_limit: int = DEFAULT_LIMITS["memory"],
    user_char_limit: int = DEFAULT_LIMITS["user"],
    memory: bytes | None = None,
    user: bytes | None = None,
) -> Model[model.State]:
    """Returns the spec model as a linearizability model, starting from the given files."""
    start = model.initial_state(memory_char_limit, user_char_limit, memory, user)
    return Model(init=lambda: start, step=_step, partition=_partition, describe=_describe)


def timeline(events: Sequence[Event], width: int = 100) -> str:
    """Returns a text timeline of the processes: one row per process, one bar per operation."""
    times = [event.time for event in events]
    if not times:
        return "(empty history)"
    start, end = min(times), max(times)
    span = (end - start) or 1.0
    rows: dict[int, list[str]] = {}
    labels: list[str] = []
    for op in operations(events):
        row = rows.setdefault(op.process, [" "] * width)
        left = int((op.call - start) / span * (width - 1))
        right = width - 1 if math.isinf(op.ret) else int((op.ret - start) / span * (width - 1))
        mark = chr(ord("a") + len(labels) % 26)
        for column in range(left, max(left, right) + 1):
            row[column] = mark
        labels.append(f"{mark}: p{op.process} {op.input!r} -> {op.output!r}")
    lines = [f"p{process:<3}|{''.join(row)}|" for process, row in sorted(rows.items())]
    return "\n".join([*lines, *labels])
