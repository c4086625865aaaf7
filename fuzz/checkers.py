"""Checkers of a concurrent history, cheapest first (LOCK-3, ATOMIC-2, ATOMIC-5, LIMIT-2, ...).

A history (:mod:`memspec.fuzz.history`) holds the mutations of several sessions and the
``read`` samples of a reader process. :func:`judge_history` runs four checkers over it, each a
pure function, and returns what they found:

1. ``acknowledged`` — every acknowledged entry is still there for every sample taken after the
   acknowledgement until someone could have removed it (LOCK-3, ATOMIC-5), and no entry appears
   that no invoked mutation could have written: none written by a refused one (CONTRACT-3,
   LIMIT-3, BATCH-2), none before its mutation was invoked, none that nobody sent (ATOMIC-2).
2. ``samples`` — every sample is a state the store could have been in: it decodes, it does not
   miss an entry that it had before and has again after (a partial or empty file, ATOMIC-2), it
   does not show a removed entry again (a lost remove, LOCK-3), an entry twice (LOCK-3), both
   the old and the new text of a replace (REPLACE-1), part of a batch (BATCH-2), or entries in
   an order no sequence of appends explains (LOCK-3).
3. ``limits`` — no sample is over its limit, unless the file started over it and has not grown
   since (LIMIT-2, LIMIT-4).
4. ``linearizability`` — the whole history is linearizable against the spec model
   (:mod:`memspec.fuzz.linearizability`): the final word, which also judges every refusal code.

The first three are sound approximations of the fourth: whatever they report, no order of the
mutations explains. They work on entries, never on a search, so they take time linear in the
size of the history, and their message names the entry, the sample and the operations involved.
When one of them finds something, the search is skipped (it could only agree, slowly).

They rest on one assumption that the generated programs (:mod:`memspec.fuzz.programs`) keep
and that the search does not need: a text that a mutation writes is written by no other
mutation, so an entry in a sample names the operation that wrote it. Where a history breaks it
(the same text written twice), the cheap checkers skip that entry rather than guess.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memspec.fuzz.history import DiskRead, Event, memory_model, operations, timeline
from memspec.fuzz.linearizability import Explanation, Model, Operation, check_history
from memspec.spec import model
from memspec.spec.codec import decode, normalize_content, parse_text, usage
from memspec.spec.requests import MUTATIONS
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

CHECKERS = ("acknowledged", "samples", "limits", "linearizability")
"""The checkers in the order :func:`judge_history` runs them, cheapest first."""
SHOWN = 8
"""Entries or operations listed in a message before "and N more"."""
TIMELINE_OPS = 16
"""Operations in the timeline of a finding: those nearest to the moment at fault."""


@dataclass(frozen=True)
class Finding:
    """A Finding is one violation a checker found: the checker, the clause, and a message a
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
class Call:
    """A Call is one mutation of one session: its request, how it ended, and when.

    ``status`` is ``ok``, ``fail`` or ``info`` (unknown outcome: ``ret`` is infinite).
    """

    process: int
    request: dict[str, Any]
    status: str
    code: str | None
    call: float
    ret: float
    events: tuple[Event, ...]

    def label(self) -> str:
        """Returns the call as ``p1 add memory '[p1.3] ...' -> OK``."""
        request = self.request
        args = [
            _short(request[key])
            for key in ("content", "old_text", "new_content")
            if isinstance(request.get(key), str)
        ]
        if request.get("op") == "batch":
            args.append(_items(request.get("operations")))
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


def effect_of(request: Mapping[str, Any]) -> Effect:
    """Returns the texts a mutation writes and the ``old_text``s it removes by (a batch's items
    are followed in order, so an item acting on an earlier item's entry changes that entry).
    Arguments that are not strings write and remove nothing."""
    op = request.get("op")
    result = Effect()
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
    calls: list[Call]
    samples: list[Sample]
    runs: list[Run]
    effects: dict[int, Effect]
    producers: dict[str, list[tuple[Call, Written]]]
    matches: dict[str, list[str]]
    """``old_text`` -> the distinct known texts containing it."""
    removers: dict[str, list[tuple[Call, str]]]
    """text -> the calls (not refused) that remove by an ``old_text`` it contains."""
    present_runs: dict[str, list[int]]

    def sole_match(self, old_text: str) -> str | None:
        """Returns the only known text containing ``old_text`` (``None``: none or several)."""
        found = self.matches.get(old_text, [])
        return found[0] if len(found) == 1 else None

    def sole_producer(self, text: str) -> tuple[Call, Written] | None:
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


def _pair(events: Sequence[Event]) -> tuple[list[Call], list[Sample]]:
    calls: list[Call] = []
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


def _close(start: Event, end: Event | None, calls: list[Call], samples: list[Sample]) -> None:
    request = start.op
    value = (end.value if end is not None else None) or {}
    ret = end.time if end is not None and end.type != "info" else math.inf
    pair = (start,) if end is None else (start, end)
    if request.get("op") == "read":
        if end is None or end.type != "ok":
            return
        entries = None if value.get("unreadable") else tuple(value.get("entries", ()))
        detail = str(value.get("error", ""))
        samples.append(Sample(str(request.get("target")), start.time, ret, entries, pair, detail))
        return
    if request.get("op") not in MUTATIONS:
        return
    status = end.type if end is not None else "info"
    code = value.get("code") if status != "info" else None
    calls.append(Call(start.process, request, status, code, start.time, ret, pair))


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
    target: str, limit: int, start: tuple[str, ...] | None, calls: list[Call], samples: list[Sample]
) -> TargetView:
    effects = {id(call): effect_of(call.request) for call in calls}
    producers: dict[str, list[tuple[Call, Written]]] = {}
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
    removers: dict[str, list[tuple[Call, str]]] = {}
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
    )


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
    views = {}
    for target in TARGETS:
        mine = [c for c in calls if c.request.get("target") == target]
        seen = [s for s in samples if s.target == target]
        if not mine and not seen:
            continue
        limit = int(limits.get(target, DEFAULT_LIMITS[target]))
        views[target] = _view(target, limit, _start_entries(begin.get(target)), mine, seen)
    return Analysis(ordered, views, {t: int(v) for t, v in limits.items()}, begin)


# -- rendering ----------------------------------------------------------------------------------


def _short(text: Any, width: int = 40) -> str:
    text = str(text)
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _items(items: Any) -> str:
    if not isinstance(items, list):
        return repr(items)
    parts = []
    for item in items:
        if not isinstance(item, Mapping):
            parts.append(repr(item))
            continue
        args = [_short(item[k], 24) for k in ("old_text", "content") if k in item]
        parts.append(f"{item.get('action')} " + " ".join(args))
    return "[" + "; ".join(parts) + "]"


def _listing(texts: Sequence[str]) -> str:
    shown = ", ".join(_short(t) for t in texts[:SHOWN])
    return f"[{shown}" + (f", and {len(texts) - SHOWN} more]" if len(texts) > SHOWN else "]")


def _sample_text(sample: Sample) -> str:
    if sample.entries is None:
        return "unreadable" + (f" ({sample.detail})" if sample.detail else "")
    return f"{len(sample.entries)} entries {_listing(sample.entries)}"


def _at(sample: Sample) -> str:
    return f"the {sample.target} sample of [{sample.call:.6f}, {sample.ret:.6f}]"


def _timeline(analysis: Analysis, moment: float, calls: Sequence[Call] = ()) -> str:
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


def _finding(
    analysis: Analysis,
    checker: str,
    clause: str,
    message: str,
    moment: float,
    calls: Sequence[Call] = (),
    more: int = 0,
) -> Finding:
    lines = [message]
    for call in calls:
        lines.append(f"  {call.label()} {call.when()}")
    if more:
        lines.append(f"({more} more violations of this kind in the history)")
    lines.append(_timeline(analysis, moment, calls))
    return Finding(checker, clause, "\n".join(lines))


# -- 1. acknowledged ----------------------------------------------------------------------------


def _deadline(view: TargetView, text: str, producer: Call) -> float:
    """Returns when ``text`` may first be removed: the earliest call of a mutation, other than
    its producer, that removes by an ``old_text`` it contains."""
    return min(
        (c.call for c, _ in view.removers.get(text, ()) if c is not producer), default=math.inf
    )


@dataclass(frozen=True)
class _Missing:
    text: str
    producer: Call
    run: Run
    transient: bool


def _missing(view: TargetView) -> list[_Missing]:
    """Acknowledged texts absent from a run in which they must be present, with whether they
    come back later in the same window (a partial file) or not (a lost write)."""
    found: list[_Missing] = []
    samples_calls = [s.call for s in view.samples]
    samples_rets = [s.ret for s in view.samples]
    run_starts = [r.first.call for r in view.runs]
    for text in view.producers:
        sole = view.sole_producer(text)
        if sole is None or sole[0].status != "ok":
            continue
        producer = sole[0]
        first = bisect.bisect_right(samples_calls, producer.ret)
        last = bisect.bisect_left(samples_rets, _deadline(view, text, producer)) - 1
        if first > last or first >= len(view.samples):
            continue
        r0 = bisect.bisect_right(run_starts, view.samples[first].call) - 1
        r1 = bisect.bisect_right(run_starts, view.samples[last].call) - 1
        present = view.present_runs.get(text, [])
        inside = bisect.bisect_right(present, r1) - bisect.bisect_left(present, r0)
        if inside == r1 - r0 + 1:
            continue
        if text not in view.runs[r1].present:
            found.append(_Missing(text, producer, view.runs[r1], False))
            continue
        gap = next(i for i in range(r0, r1 + 1) if text not in view.runs[i].present)
        found.append(_Missing(text, producer, view.runs[gap], True))
    return sorted(found, key=lambda m: m.run.first.call)


def _refusal_clause(call: Call) -> str:
    if call.code == "E_LIMIT":
        return "LIMIT-3"
    return "BATCH-2" if call.request.get("op") == "batch" else "CONTRACT-3"


def check_acknowledged(analysis: Analysis) -> list[Finding]:
    """Every acknowledged entry survives until it could have been removed (LOCK-3, ATOMIC-5);
    nothing appears that no invoked, unrefused mutation wrote (ATOMIC-2, CONTRACT-3)."""
    findings: list[Finding] = []
    for view in analysis.targets.values():
        lost = [m for m in _missing(view) if not m.transient]
        if lost:
            m = lost[0]
            sample = m.run.first
            # LOCK-3, ATOMIC-5: an acknowledged write is in the file for every later reader.
            findings.append(
                _finding(
                    analysis,
                    "acknowledged",
                    "LOCK-3",
                    f"LOCK-3: an acknowledged write was lost: {_short(m.text)} was written by "
                    f"the call below, acknowledged at {m.producer.ret:.6f}, and no mutation that "
                    f"could remove it was invoked before {_at(sample)}, which lacks it and "
                    f"holds {_sample_text(sample)}. "
                    "A session wrote the file from a copy read before the other's write "
                    "(a lost update; LOCK-1, LOCK-2, ATOMIC-5)",
                    sample.call,
                    [m.producer],
                    len(lost) - 1,
                )
            )
        findings.extend(_unwritten(analysis, view))
    return findings


def _unwritten(analysis: Analysis, view: TargetView) -> list[Finding]:
    """Entries in samples that no invoked, unrefused mutation wrote."""
    problems: list[tuple[float, str, str, Sample, list[Call]]] = []
    start = set(view.start or ())
    for run in view.runs:
        sample = run.first
        for text in run.entries or ():
            if text in start:
                continue
            made = view.producers.get(text, [])
            if not made:
                problems.append(
                    (
                        sample.call,
                        "ATOMIC-2",
                        f"ATOMIC-2: {_at(sample)} holds {_short(text, 80)}, which no session "
                        f"wrote: a torn or partial entry; it holds {_sample_text(sample)}",
                        sample,
                        [],
                    )
                )
                continue
            calls = [c for c, _ in made]
            if all(c.status == "fail" for c in calls):
                clause = _refusal_clause(calls[0])
                problems.append(
                    (
                        sample.call,
                        clause,
                        f"{clause}: {_at(sample)} holds {_short(text)}, written only by a "
                        f"mutation that was refused with {calls[0].code}: a refusal must "
                        "leave the file as it was",
                        sample,
                        calls,
                    )
                )
            elif min(c.call for c in calls) > sample.ret:
                problems.append(
                    (
                        sample.call,
                        "LOCK-3",
                        f"LOCK-3: {_at(sample)} holds {_short(text)} before the mutation that "
                        "writes it was invoked",
                        sample,
                        calls,
                    )
                )
    if not problems:
        return []
    problems.sort(key=lambda p: p[0])
    moment, clause, message, _sample, calls = problems[0]
    return [_finding(analysis, "acknowledged", clause, message, moment, calls, len(problems) - 1)]


# -- 2. samples ---------------------------------------------------------------------------------


def check_samples(analysis: Analysis) -> list[Finding]:
    """Every sample is a state the store could have been in (ATOMIC-2, LOCK-3, REPLACE-1,
    BATCH-2): decodable, not partial, no removed entry back, no duplicate, no half of a replace
    or batch, in an order appends explain."""
    findings: list[Finding] = []
    for view in analysis.targets.values():
        problems = [
            *_unreadable(view),
            *_partial(view),
            *_revived(view),
            *_duplicated(view),
            *_mixed(view),
            *_misordered(view),
        ]
        if problems:
            problems.sort(key=lambda p: p[0])
            moment, clause, message, calls = problems[0]
            findings.append(
                _finding(analysis, "samples", clause, message, moment, calls, len(problems) - 1)
            )
    return findings


Problem = tuple[float, str, str, list[Call]]


def _unreadable(view: TargetView) -> list[Problem]:
    # ATOMIC-2: a reader sees the whole old file or the whole new one, which always decodes.
    return [
        (
            s.call,
            "ATOMIC-2",
            f"ATOMIC-2: {_at(s)} was {_sample_text(s)}: every file a store writes is UTF-8, so "
            "the reader caught one half written",
            [],
        )
        for s in view.samples
        if s.entries is None
    ]


def _partial(view: TargetView) -> list[Problem]:
    problems: list[Problem] = []
    for m in _missing(view):
        if not m.transient:
            continue
        sample = m.run.first
        what = "an empty file" if not sample.entries else "a partial file"
        # ATOMIC-2: never an empty or partial file, not even for a moment.
        problems.append(
            (
                sample.call,
                "ATOMIC-2",
                f"ATOMIC-2: the reader saw {what}: {_short(m.text)}, acknowledged at "
                f"{m.producer.ret:.6f} and not removable before a later sample has it again, "
                f"is missing from {_at(sample)}, which holds {_sample_text(sample)}. The file "
                "was truncated or written in place (write a temp file and rename it)",
                [m.producer],
            )
        )
    return problems


def _gone(view: TargetView) -> dict[str, Call]:
    """Texts certainly removed: an acknowledged mutation removed by an ``old_text`` only that
    text contains, and no mutation invoked after it writes the text again."""
    gone: dict[str, Call] = {}
    for call in view.calls:
        if call.status != "ok":
            continue
        for old in view.effects[id(call)].removed:
            text = view.sole_match(old)
            if text is None or any(
                c.call >= call.call and c is not call for c, _ in view.producers.get(text, [])
            ):
                continue
            if text not in gone or gone[text].ret > call.ret:
                gone[text] = call
    return gone


def _revived(view: TargetView) -> list[Problem]:
    gone = _gone(view)
    problems: list[Problem] = []
    for run in view.runs:
        for text in run.present:
            remover = gone.get(text)
            if remover is None or run.last.call <= remover.ret:
                continue
            sample = next(s for s in (run.first, run.last) if s.call > remover.ret)
            # LOCK-3: an acknowledged remove stays done (a revived entry is a lost remove).
            problems.append(
                (
                    sample.call,
                    "LOCK-3",
                    f"LOCK-3: a removed entry came back: {_short(text)} was removed by the call "
                    f"below, acknowledged at {remover.ret:.6f}, yet {_at(sample)} holds it "
                    "again: a session wrote the file from a copy read before the removal "
                    "(a lost update)",
                    [remover],
                )
            )
    return problems


def _duplicated(view: TargetView) -> list[Problem]:
    problems: list[Problem] = []
    start = Counter(view.start or ())
    for run in view.runs:
        counts = Counter(run.entries or ())
        for text, count in counts.items():
            made = [w for _, w in view.producers.get(text, [])]
            replaces = sum(1 for w in made if w.replaces is not None)
            adds = 1 if any(w.replaces is None for w in made) else 0
            if count <= start[text] + replaces + adds:
                continue
            # LOCK-3, DUP-1: an add takes effect once.
            problems.append(
                (
                    run.first.call,
                    "LOCK-3",
                    f"LOCK-3: {_at(run.first)} holds {_short(text)} {count} times; no order of "
                    "the mutations writes it more than once",
                    [c for c, _ in view.producers.get(text, [])],
                )
            )
    return problems


def _mixed(view: TargetView) -> list[Problem]:
    """Both the old and the new text of one replace, or part of one batch, in a sample."""
    problems: list[Problem] = []
    for run in view.runs:
        sample = run.first
        checked: set[int] = set()
        for text in run.present:
            sole = view.sole_producer(text)
            if sole is None or id(sole[0]) in checked:
                continue
            call = sole[0]
            checked.add(id(call))
            problem = _half_done(view, call, run)
            if problem is not None:
                problems.append((sample.call, *problem, [call]))
    return problems


def _half_done(view: TargetView, call: Call, run: Run) -> tuple[str, str] | None:
    effect = view.effects[id(call)]
    batch = call.request.get("op") == "batch"
    clause = "BATCH-2" if batch else "REPLACE-1"
    sample = run.first
    for old in effect.removed:
        victim = view.sole_match(old)
        if victim is None or victim not in run.present:
            continue
        if any(c is not call for c, _ in view.producers.get(victim, [])):
            continue
        # REPLACE-1, BATCH-2: a mutation takes effect as a whole.
        return clause, (
            f"{clause}: {_at(sample)} holds both {_short(victim)}, which the call below "
            "removes, and text the same call writes: a mutation seen half done"
        )
    if not batch:
        return None
    for written in effect.written:
        if written.text in run.present or view.sole_producer(written.text) is None:
            continue
        removers = view.removers.get(written.text, ())
        if any(c.call <= sample.ret for c, _ in removers if c is not call):
            continue
        return clause, (
            f"{clause}: {_at(sample)} holds part of the batch below but not "
            f"{_short(written.text)}, which it writes and nobody removed: a batch seen half done"
        )
    return None


def _slot(view: TargetView, text: str, depth: int = 0) -> tuple[float, float, int, int] | None:
    """Returns when the append that made ``text``'s place happened: (call, ret, call id, item).
    Entries of the starting file come first, in order; a replace inherits the replaced entry's
    place. ``None`` when unknown (text written twice, or replacing an unknown entry)."""
    start = view.start or ()
    if text in start and text not in view.producers and start.count(text) == 1:
        moment = -1e9 * (len(start) - start.index(text))
        return moment, moment, 0, 0
    sole = view.sole_producer(text)
    if sole is None or depth > 64:
        return None
    call, written = sole
    if written.replaces is None:
        return call.call, call.ret, id(call), written.item or 0
    replaced = view.sole_match(written.replaces)
    return None if replaced is None else _slot(view, replaced, depth + 1)


def _misordered(view: TargetView) -> list[Problem]:
    problems: list[Problem] = []
    slots: dict[str, tuple[float, float, int, int] | None] = {}
    for run in view.runs:
        latest: tuple[str, tuple[float, float, int, int]] | None = None
        items: dict[int, tuple[int, str]] = {}
        for text in run.entries or ():
            if text not in slots:
                slots[text] = _slot(view, text)
            slot = slots[text]
            if slot is None:
                continue
            call, ret, call_id, item = slot
            earlier = latest
            if earlier is not None and ret < earlier[1][0]:
                # LOCK-3: entries stand in the order of their appends, which real time orders.
                problems.append(
                    (
                        run.first.call,
                        "LOCK-3",
                        f"LOCK-3: {_at(run.first)} has {_short(earlier[0])} before "
                        f"{_short(text)}, but the append of the second was acknowledged "
                        f"({ret:.6f}) before the append of the first was invoked "
                        f"({earlier[1][0]:.6f}): no order of appends puts them so",
                        [],
                    )
                )
                break
            seen = items.get(call_id)
            if call_id and seen is not None and seen[0] > item:
                problems.append(
                    (
                        run.first.call,
                        "BATCH-3",
                        f"BATCH-3: {_at(run.first)} has {_short(seen[1])} before "
                        f"{_short(text)}, the reverse of their order in one batch",
                        [],
                    )
                )
                break
            items[call_id] = (max(item, seen[0]) if seen else item, text)
            if earlier is None or call > earlier[1][0]:
                latest = (text, slot)
    return problems


# -- 3. limits ----------------------------------------------------------------------------------


def check_limits(analysis: Analysis) -> list[Finding]:
    """No sample is over its limit, unless the file started over it and has not grown since
    (LIMIT-2, LIMIT-4)."""
    findings: list[Finding] = []
    for view in analysis.targets.values():
        bound = max(view.limit, usage(view.start or ()))
        over = [
            (run, usage(run.entries))
            for run in view.runs
            if run.entries is not None and usage(run.entries) > bound
        ]
        if not over:
            continue
        run, used = over[0]
        # LIMIT-2: a mutation whose result exceeds the limit (and the current usage) is refused.
        findings.append(
            _finding(
                analysis,
                "limits",
                "LIMIT-2",
                f"LIMIT-2: {_at(run.first)} uses {used:,} code points, over the {view.target} "
                f"limit of {view.limit:,} (the file started at {usage(view.start or ()):,}): "
                f"some mutation grew the file past its limit; it holds "
                f"{_sample_text(run.first)}",
                run.first.call,
                [],
                len(over) - 1,
            )
        )
    return findings


# -- 4. linearizability -------------------------------------------------------------------------


def _describe_entries(entries: Sequence[str] | None) -> str:
    return "unreadable" if entries is None else f"{len(entries)} entries {_listing(entries)}"


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
        parts.append(f"lacking {_listing(missing)} of the model's state")
    if extra:
        parts.append(f"with {_listing(extra)} that the model's state lacks")
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
        _short(getattr(given, name))
        for name in ("content", "old_text", "new_content")
        if isinstance(getattr(given, name, None), str)
    ]
    return f"{kind} {given.target} " + " ".join([*args, "->", str(op.output)])


def check_linearizable(analysis: Analysis, timeout: float = 60.0) -> list[Finding]:
    """The whole history is linearizable against the spec model (LOCK-3); a search that runs
    out of time is an undecided finding, never a pass."""
    memory = _spec_model(analysis)
    ops = operations(analysis.events)
    result = check_history(memory, ops, timeout=timeout)
    scale = f"{len(ops)} operations"
    if result.verdict == "unknown":
        return [
            Finding(
                "linearizability",
                "LOCK-3",
                f"LOCK-3: undecided: the linearizability search of {scale} ran out of time "
                f"after {result.seconds:.1f} s and {result.states_explored:,} states",
                undecided=True,
            )
        ]
    if result.verdict == "ok":
        return []
    assert result.explanation is not None
    text, moment = _explain(analysis, result.explanation)
    message = (
        f"LOCK-3: the history of {scale} is not linearizable: no order of the mutations that "
        "respects real time explains what the sessions were answered and what the reader saw.\n"
        + text
    )
    return [Finding("linearizability", "LOCK-3", message + "\n" + _timeline(analysis, moment))]


def judge_history(
    events: Sequence[Event],
    limits: Mapping[str, int],
    *,
    start: Mapping[str, bytes | None] | None = None,
    timeout: float = 60.0,
) -> list[Finding]:
    """Runs the checkers cheapest first and returns their findings (empty: all green).
    `events` are fuzz.history.Event (mutations of the sessions + `read` samples of a reader);
    `start` the files' bytes before the run (None: absent).

    The linearizability search runs only when the cheap checkers found nothing: each of their
    findings already makes the history illegal.
    """
    relevant = [e for e in events if e.op.get("op") in (*MUTATIONS, "read")]
    analysis = analyse(relevant, limits, start)
    findings = [
        *check_acknowledged(analysis),
        *check_samples(analysis),
        *check_limits(analysis),
    ]
    if findings:
        return findings
    return check_linearizable(analysis, timeout)
