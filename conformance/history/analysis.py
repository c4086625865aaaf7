"""A concurrent history taken apart for the checkers of :mod:`memspec.conformance.history.checkers`.

:func:`analyse` splits a history by target into the sessions' mutations (:class:`HistoryCall`) and
one reader's samples (:class:`Sample`, grouped in :class:`Run`), indexes which mutation writes and
may remove each text (:class:`TargetView`), and renders :class:`CheckerFinding`. The index assumes
each text is written by one mutation, as generated programs keep; where a history breaks that,
:meth:`TargetView.sole_producer` is ``None`` and the checkers skip the entry.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memspec.conformance.history.history import Event, timeline
from memspec.conformance.transport.wire import Request
from memspec.spec.codec import decode, normalize_content, parse_text
from memspec.spec.requests import MUTATIONS
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

SHOWN = 8
"""Entries or operations listed in a message before "and N more"."""
TIMELINE_OPS = 16
"""Operations in the timeline of a finding: those nearest to the moment at fault."""


@dataclass(frozen=True)
class CheckerFinding:
    """A CheckerFinding is one violation a checker found: the checker, the clause, and a message a
    person can act on (what was observed, what the model allows, the operations and a timeline).
    ``undecided`` marks a search that ran out of time: no verdict, never a pass."""

    checker: str
    clause: str
    message: str
    undecided: bool = False

    def render(self) -> str:
        """Returns the finding as text: a headline and the message."""
        kind = "undecided" if self.undecided else "violation"
        return f"{self.clause} ({self.checker} checker, {kind}): {self.message}"


# -- the history, taken apart -------------------------------------------------------------------


@dataclass
class HistoryCall:
    """A HistoryCall is one mutation of one session: its request, how it ended, and when.

    ``status`` is ``ok``, ``fail`` or ``info`` (unknown outcome: ``ret`` is infinite).
    """

    process: int
    request: Request
    status: str
    code: str | None
    call: float
    ret: float
    events: tuple[Event, ...]

    def label(self) -> str:
        """Returns the call as ``p1 add memory '[p1.3] ...' -> OK``."""
        request = self.request
        args = [
            short(request[key])
            for key in ("content", "old_text", "new_content")
            if isinstance(request.get(key), str)
        ]
        if request.get("op") == "batch":
            args.append(items_text(request.get("operations")))
        outcome = self.code if self.status != "info" else "(no answer)"
        return f"p{self.process} {request.get('op')} {request.get('target')} " + " ".join(
            [*args, "->", str(outcome)]
        )

    def when(self) -> str:
        """Returns the call's interval in seconds."""
        end = "never answered" if math.isinf(self.ret) else f"{self.ret:.6f}"
        return f"[{self.call:.6f}, {end}]"


@dataclass
class Sample:
    """A Sample is one read of a target's file by the reader: entries, or ``None`` when the
    bytes did not decode."""

    target: str
    call: float
    ret: float
    entries: tuple[str, ...] | None
    events: tuple[Event, ...]
    detail: str = ""


@dataclass
class Run:
    """A Run is consecutive samples of one target that read the same entries."""

    entries: tuple[str, ...] | None
    first: Sample
    last: Sample
    present: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Written:
    """A text a mutation leaves in the file: ``item`` is its batch item (``None`` outside a
    batch), ``replaces`` the ``old_text`` of the entry whose place it takes (``None``: it is
    appended)."""

    text: str
    item: int | None
    replaces: str | None


@dataclass
class Effect:
    """What a mutation writes and which ``old_text``s it removes entries by."""

    written: list[Written] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _text(value: Any) -> str | None:
    return normalize_content(value) if isinstance(value, str) else None


def effect_of(request: Request) -> Effect:
    """Returns the texts a mutation writes and the ``old_text``s it removes by (a batch's items
    are followed in order, so an item acting on an earlier item's entry changes that entry).
    Arguments that are not strings write and remove nothing."""
    op = request.get("op")
    result = Effect()
    steps: list[tuple[int | None, object, object, object]]  # (item, action, content, old_text)
    if op == "batch":
        items = request.get("operations")
        steps = [
            (i, it.get("action"), it.get("content"), it.get("old_text"))
            for i, it in enumerate(items if isinstance(items, list) else [])
            if isinstance(it, Mapping)
        ]
    else:
        steps = [
            (None, op, request.get("content", request.get("new_content")), request.get("old_text"))
        ]
    for item, action, content, old_text in steps:
        text, old = _text(content), _text(old_text)
        if action == "add" and text:
            result.written.append(Written(text, item, None))
            continue
        if action not in ("replace", "remove") or not old:
            continue
        own = next((w for w in result.written if old in w.text), None)
        if own is not None:
            index = result.written.index(own)
            if action == "remove" or not text:
                del result.written[index]
            else:
                result.written[index] = Written(text, own.item, own.replaces)
            continue
        result.removed.append(old)
        if action == "replace" and text:
            result.written.append(Written(text, item, old))
    return result


@dataclass
class TargetView:
    """Everything the cheap checkers know about one target."""

    target: str
    limit: int
    start: tuple[str, ...] | None
    calls: list[HistoryCall]
    samples: list[Sample]
    runs: list[Run]
    effects: dict[int, Effect]
    producers: dict[str, list[tuple[HistoryCall, Written]]]
    matches: dict[str, list[str]]
    """``old_text`` -> the distinct known texts containing it."""
    removers: dict[str, list[tuple[HistoryCall, str]]]
    """text -> the calls (not refused) that remove by an ``old_text`` it contains."""
    present_runs: dict[str, list[int]]
    in_flight: list[frozenset[int]] = field(default_factory=list)
    """Per sample, the ids of the mutations (not refused) in flight while it was read; one that
    never answered is in flight for ever."""
    sample_calls: list[float] = field(default_factory=list)
    """When each sample was taken (its invocation), in order, for bisecting."""
    batch_items: dict[str, list[HistoryCall]] = field(default_factory=dict)
    """A text -> the batches, not refused, one of whose items writes it."""
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What a checker derives from the view once for all checkers (``missing``)."""

    def sole_match(self, old_text: str) -> str | None:
        """Returns the only known text containing ``old_text`` (``None``: none or several)."""
        found = self.matches.get(old_text, [])
        return found[0] if len(found) == 1 else None

    def sole_producer(self, text: str) -> tuple[HistoryCall, Written] | None:
        """Returns the mutation that writes ``text`` when exactly one does and it is not in
        the starting file."""
        found = self.producers.get(text, [])
        in_start = self.start is not None and text in self.start
        return found[0] if len(found) == 1 and not in_start else None


@dataclass
class Analysis:
    """A history taken apart for the cheap checkers: per target, its calls and samples."""

    events: list[Event]
    targets: dict[str, TargetView]
    limits: dict[str, int]
    start: dict[str, bytes | None]


def _pair(events: Sequence[Event]) -> tuple[list[HistoryCall], list[Sample]]:
    calls: list[HistoryCall] = []
    samples: list[Sample] = []
    pending: dict[int, Event] = {}
    for event in events:
        if event.type == "invoke":
            pending[event.process] = event
            continue
        start = pending.pop(event.process, None)
        if start is None:
            continue
        _close(start, event, calls, samples)
    for start in pending.values():
        _close(start, None, calls, samples)
    calls.sort(key=lambda c: c.call)
    samples.sort(key=lambda s: s.call)
    return calls, samples


def _close(
    start: Event, end: Event | None, calls: list[HistoryCall], samples: list[Sample]
) -> None:
    request = start.op
    ret = end.time if end is not None and end.type != "info" else math.inf
    pair = (start,) if end is None else (start, end)
    if request.get("op") == "read":
        if end is None or end.type != "ok":
            return
        entries = end.sample_entries()
        detail = str((end.value or {}).get("error", ""))
        samples.append(Sample(str(request.get("target")), start.time, ret, entries, pair, detail))
        return
    if request.get("op") not in MUTATIONS:
        return
    status = end.type if end is not None else "info"
    code = end.answer_code() if end is not None and status != "info" else None
    calls.append(HistoryCall(start.process, request, status, code, start.time, ret, pair))


def _runs(samples: list[Sample]) -> list[Run]:
    runs: list[Run] = []
    for sample in samples:
        if runs and runs[-1].entries == sample.entries:
            runs[-1].last = sample
            continue
        runs.append(Run(sample.entries, sample, sample, frozenset(sample.entries or ())))
    return runs


def _start_entries(data: bytes | None) -> tuple[str, ...] | None:
    if data is None:
        return ()
    text = decode(data)
    return None if text is None else tuple(parse_text(text))


def _view(
    target: str,
    limit: int,
    start: tuple[str, ...] | None,
    calls: list[HistoryCall],
    samples: list[Sample],
) -> TargetView:
    effects = {id(call): effect_of(call.request) for call in calls}
    producers: dict[str, list[tuple[HistoryCall, Written]]] = {}
    for call in calls:
        for written in effects[id(call)].written:
            producers.setdefault(written.text, []).append((call, written))
    runs = _runs(samples)
    known = list(dict.fromkeys([*(start or ()), *producers, *(e for r in runs for e in r.present)]))
    haystack = "\x00".join(known)
    offsets = []
    position = 0
    for text in known:
        offsets.append(position)
        position += len(text) + 1
    matches: dict[str, list[str]] = {}
    removers: dict[str, list[tuple[HistoryCall, str]]] = {}
    for call in calls:
        for old in effects[id(call)].removed:
            if old not in matches:
                matches[old] = _containing(haystack, offsets, known, old)
            if call.status == "fail":
                continue
            for text in matches[old]:
                removers.setdefault(text, []).append((call, old))
    present_runs: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        for text in run.present:
            present_runs.setdefault(text, []).append(index)
    return TargetView(
        target,
        limit,
        start,
        calls,
        samples,
        runs,
        effects,
        producers,
        matches,
        removers,
        present_runs,
        _in_flight(calls, samples),
        [sample.call for sample in samples],
        _batch_items(calls),
    )


def _batch_items(calls: Sequence[HistoryCall]) -> dict[str, list[HistoryCall]]:
    """Returns, by the normalised text an item writes, the batches (not refused) that hold it."""
    index: dict[str, list[HistoryCall]] = {}
    for call in calls:
        items = call.request.get("operations") if call.request.get("op") == "batch" else None
        if call.status == "fail" or not isinstance(items, list):
            continue
        for content in dict.fromkeys(
            normalize_content(item["content"])
            for item in items
            if isinstance(item, Mapping) and isinstance(item.get("content"), str)
        ):
            index.setdefault(content, []).append(call)
    return index


def _in_flight(calls: Sequence[HistoryCall], samples: Sequence[Sample]) -> list[frozenset[int]]:
    """Returns, per sample, the ids of the calls not refused whose interval overlaps its own."""
    writing = sorted((c for c in calls if c.status != "fail"), key=lambda c: c.call)
    starts = [c.call for c in writing]
    return [
        frozenset(
            id(c) for c in writing[: bisect.bisect_left(starts, sample.ret)] if c.ret > sample.call
        )
        for sample in samples
    ]


def _containing(haystack: str, offsets: list[int], known: list[str], needle: str) -> list[str]:
    """Returns the known texts containing ``needle`` (found in one joined string, quickly)."""
    found: list[str] = []
    at = haystack.find(needle)
    while at != -1:
        index = bisect.bisect_right(offsets, at) - 1
        if not found or found[-1] != known[index]:
            found.append(known[index])
        at = haystack.find(needle, offsets[index] + len(known[index]) + 1)
    return found


def analyse(
    events: Sequence[Event],
    limits: Mapping[str, int],
    start: Mapping[str, bytes | None] | None = None,
) -> Analysis:
    """Returns the history taken apart by target, for the cheap checkers."""
    ordered = sorted(events, key=lambda e: (e.time, e.type != "invoke"))
    calls, samples = _pair(ordered)
    begin = dict(start or {})
    views: dict[str, TargetView] = {}
    for target in TARGETS:
        mine = [c for c in calls if c.request.get("target") == target]
        seen = [s for s in samples if s.target == target]
        if not mine and not seen:
            continue
        limit = int(limits.get(target, DEFAULT_LIMITS[target]))
        views[target] = _view(target, limit, _start_entries(begin.get(target)), mine, seen)
    return Analysis(ordered, views, {t: int(v) for t, v in limits.items()}, begin)


# -- rendering ----------------------------------------------------------------------------------


def short(text: Any, width: int = 40) -> str:
    text = str(text)
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def items_text(items: Any) -> str:
    if not isinstance(items, list):
        return repr(items)
    parts = []
    for item in items:
        if not isinstance(item, Mapping):
            parts.append(repr(item))
            continue
        args = [short(item[k], 24) for k in ("old_text", "content") if k in item]
        parts.append(f"{item.get('action')} " + " ".join(args))
    return "[" + "; ".join(parts) + "]"


def listing(texts: Sequence[str]) -> str:
    shown = ", ".join(short(t) for t in texts[:SHOWN])
    return f"[{shown}" + (f", and {len(texts) - SHOWN} more]" if len(texts) > SHOWN else "]")


def sample_text(sample: Sample) -> str:
    if sample.entries is None:
        return "unreadable" + (f" ({sample.detail})" if sample.detail else "")
    return f"{len(sample.entries)} entries {listing(sample.entries)}"


def sample_at(sample: Sample) -> str:
    return f"the {sample.target} sample of [{sample.call:.6f}, {sample.ret:.6f}]"


def timeline_near(analysis: Analysis, moment: float, calls: Sequence[HistoryCall] = ()) -> str:
    """Returns a timeline of the mutations nearest to ``moment`` (and ``calls``)."""
    everything = [c for view in analysis.targets.values() for c in view.calls]
    nearest = sorted(
        everything, key=lambda c: 0.0 if c.call <= moment <= c.ret else min(
            abs(c.call - moment), abs(c.ret - moment)
        )
    )[:TIMELINE_OPS]  # fmt: skip
    chosen = {id(c): c for c in [*calls, *nearest]}
    events = sorted(
        (e for c in chosen.values() for e in c.events), key=lambda e: (e.time, e.type != "invoke")
    )
    return (
        f"timeline of the {len(chosen)} mutations nearest to {moment:.6f} "
        f"(one row per session, one letter per operation):\n" + timeline(events)
    )


def make_finding(
    analysis: Analysis,
    checker: str,
    clause: str,
    message: str,
    moment: float,
    calls: Sequence[HistoryCall] = (),
    more: int = 0,
) -> CheckerFinding:
    lines = [message]
    for call in calls:
        lines.append(f"  {call.label()} {call.when()}")
    if more:
        lines.append(f"({more} more violations of this kind in the history)")
    lines.append(timeline_near(analysis, moment, calls))
    return CheckerFinding(checker, clause, "\n".join(lines))
