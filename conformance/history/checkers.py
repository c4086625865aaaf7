"""Checkers of a concurrent history, cheapest first (LOCK-3, ATOMIC-2, ATOMIC-5, LIMIT-2, ...).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memspec.conformance.history.analysis import (
    Analysis,
    CheckerFinding,
    HistoryCall,
    Run,
    Sample,
    TargetView,
    analyse,
    make_finding,
    sample_at,
    sample_text,
    short,
)
from memspec.conformance.history.history import Event
from memspec.conformance.history.spec_search import check_linearizable
from memspec.conformance.verdict.blame import Answered, blame
from memspec.spec.codec import usage
from memspec.spec.requests import MUTATIONS
from memspec.spec.rules import Outcome, exceeds_limit

__all__ = [
    "CHECKERS",
    "CheckerFinding",
    "check_acknowledged",
    "check_limits",
    "check_linearizable",
    "check_samples",
    "judge_history",
]

CHECKERS = ("acknowledged", "samples", "limits", "linearizability")
"""The checkers in the order :func:`judge_history` runs them, cheapest first."""


# -- 1. acknowledged ----------------------------------------------------------------------------


def _deadline(view: TargetView, text: str, producer: HistoryCall) -> float:
    """Returns when ``text`` may first be removed: the earliest call of a mutation, other than
    its producer, that removes by an ``old_text`` it contains."""
    return min(
        (c.call for c, _ in view.removers.get(text, ()) if c is not producer), default=math.inf
    )


@dataclass(frozen=True)
class _Missing:
    """An acknowledged text absent from a sample: ``cause`` is ``lost`` (a whole file written
    from a stale copy, LOCK-3), ``torn`` (a file caught while written in place, ATOMIC-2) or
    ``either`` (both explain it, so the history blames neither)."""

    text: str
    producer: HistoryCall
    sample: Sample
    cause: str


def _comes_back(view: TargetView, text: str, index: int) -> bool:
    present = view.present_runs.get(text, [])
    return bisect.bisect_right(present, index) < len(present)


def _run_samples(view: TargetView, run: Run) -> range:
    """Returns the indexes of ``run``'s samples in ``view.samples``."""
    calls = view.sample_calls
    return range(
        bisect.bisect_left(calls, run.first.call), bisect.bisect_right(calls, run.last.call)
    )


def _mid_write(view: TargetView, run: Run, spared: set[int]) -> bool:
    """Whether every sample of ``run`` was read while a mutation, not refused and not in
    ``spared``, was in flight (one that never answered is in flight for ever)."""
    return all(not view.in_flight[index] <= spared for index in _run_samples(view, run))


def _torn(view: TargetView, text: str, producer: HistoryCall, index: int) -> bool:
    """Whether writes caught half done explain run ``index`` lacking ``text``: it was read
    mid-write (by a mutation that does not remove ``text``), and ``text`` comes back later or
    every later run without it until it may be removed was read mid-write too."""
    removers = {id(c) for c, _ in view.removers.get(text, ())}
    if not _mid_write(view, view.runs[index], removers):
        return False
    if _comes_back(view, text, index):
        return True
    deadline = _deadline(view, text, producer)
    return all(
        _mid_write(view, run, removers)
        for run in view.runs[index + 1 :]
        if run.first.call < deadline
    )


def _stale(view: TargetView, producer: HistoryCall, sample: Sample) -> bool:
    """Whether ``sample`` can be the whole file of a session that read the file before
    ``producer`` wrote and wrote after it did (a lost update): a mutation, not refused, that
    was invoked before the sample was read and had not answered before the producer was
    invoked, whose own texts the sample holds. Its copy may be as old as its session."""
    held = set(sample.entries or ())
    return any(
        call is not producer
        and call.status != "fail"
        and call.ret > producer.call
        and call.call < sample.ret
        and all(w.text in held for w in view.effects[id(call)].written)
        for call in view.calls
    )


def _cause(view: TargetView, text: str, producer: HistoryCall, sample: Sample, index: int) -> str:
    """Decides what run ``index`` lacking an acknowledged ``text`` is evidence of
    (:class:`_Missing`). With neither explanation, an empty file or a text that comes back is
    a torn write, and a text gone for good a lost update."""
    torn = _torn(view, text, producer, index)
    stale = _stale(view, producer, sample)
    if torn and stale:
        return "either"
    if torn or stale:
        return "torn" if torn else "lost"
    empty = not view.runs[index].entries
    return "torn" if empty or _comes_back(view, text, index) else "lost"


def _missing(view: TargetView) -> list[_Missing]:
    """Acknowledged texts absent from a sample taken after the acknowledgement and before any
    mutation that could remove them was invoked, at the first such sample, with what the
    absence is evidence of (:func:`_cause`). Computed once per view, for every checker."""
    if "missing" not in view.memo:
        view.memo["missing"] = _find_missing(view)
    return view.memo["missing"]


def _find_missing(view: TargetView) -> list[_Missing]:
    found: list[_Missing] = []
    samples_calls = view.sample_calls
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
        at = bisect.bisect_left(present, r0)
        if bisect.bisect_right(present, r1) - at == r1 - r0 + 1:
            continue
        gap = r0
        while at < len(present) and present[at] == gap:
            at, gap = at + 1, gap + 1
        if view.runs[gap].entries is None:
            continue  # an undecodable sample is _unreadable's (ATOMIC-2)
        sample = view.samples[first] if gap == r0 else view.runs[gap].first
        cause = _cause(view, text, producer, sample, gap)
        found.append(_Missing(text, producer, sample, cause))
    return sorted(found, key=lambda m: m.sample.call)


def _refusal_clause(call: HistoryCall) -> str:
    """The clause a refused mutation breaks when its text is in the file anyway, as
    :func:`~memspec.conformance.verdict.blame.blame` decides it (BATCH-2, LIMIT-3, CONTRACT-3)."""
    answer = {"ok": False, "code": call.code}
    (problem,) = blame(Answered(call.request, answer, Outcome(str(call.code)), written=True))
    return problem.clause


def check_acknowledged(analysis: Analysis) -> list[CheckerFinding]:
    """Every acknowledged entry survives until it could have been removed (LOCK-3, ATOMIC-5);
    nothing appears that no invoked, unrefused mutation wrote (ATOMIC-2, CONTRACT-3)."""
    findings: list[CheckerFinding] = []
    for view in analysis.targets.values():
        lost = [m for m in _missing(view) if m.cause == "lost"]
        if lost:
            m = lost[0]
            sample = m.sample
            # LOCK-3, ATOMIC-5: an acknowledged write is in the file for every later reader.
            findings.append(
                make_finding(
                    analysis,
                    "acknowledged",
                    "LOCK-3",
                    f"an acknowledged write was lost: {short(m.text)} was written by "
                    f"the call below, acknowledged at {m.producer.ret:.6f}, and no mutation that "
                    f"could remove it was invoked before {sample_at(sample)}, which lacks it and "
                    f"holds {sample_text(sample)}. "
                    "Typically a session wrote the file from a copy it read before that write "
                    "(a lost update; LOCK-1, LOCK-2, ATOMIC-5)",
                    sample.call,
                    [m.producer],
                    len(lost) - 1,
                )
            )
        findings.extend(_unwritten(analysis, view))
    return findings


def _between_items(view: TargetView, text: str) -> list[HistoryCall]:
    """Returns the batches, not refused, one of whose items writes ``text`` that a later item
    of the same batch changes: a file holding it shows the batch half applied."""
    return view.batch_items.get(text, [])


def _unwritten(analysis: Analysis, view: TargetView) -> list[CheckerFinding]:
    """Entries in samples that no invoked, unrefused mutation wrote."""
    problems: list[tuple[float, str, str, Sample, list[HistoryCall]]] = []
    start = set(view.start or ())
    for run in view.runs:
        sample = run.first
        for text in run.entries or ():
            if text in start:
                continue
            made = view.producers.get(text, [])
            between = [] if made else [c for c in _between_items(view, text) if c.call < sample.ret]
            if not made and between:
                # BATCH-2: an item's text that a later item of the same batch changes.
                problems.append(
                    (
                        sample.call,
                        "BATCH-2",
                        f"{sample_at(sample)} holds {short(text, 80)}, which the batch "
                        "below writes only between its items (a later item changes it): a batch "
                        "seen half done",
                        sample,
                        between[:1],
                    )
                )
                continue
            if not made:
                problems.append(
                    (
                        sample.call,
                        "ATOMIC-2",
                        f"{sample_at(sample)} holds {short(text, 80)}, which no session "
                        f"wrote: a torn or partial entry; it holds {sample_text(sample)}",
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
                        f"{sample_at(sample)} holds {short(text)}, written only by a "
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
                        f"{sample_at(sample)} holds {short(text)} before the mutation that "
                        "writes it was invoked",
                        sample,
                        calls,
                    )
                )
    if not problems:
        return []
    problems.sort(key=lambda p: p[0])
    moment, clause, message, _sample, calls = problems[0]
    return [
        make_finding(analysis, "acknowledged", clause, message, moment, calls, len(problems) - 1)
    ]


# -- 2. samples ---------------------------------------------------------------------------------


def check_samples(analysis: Analysis) -> list[CheckerFinding]:
    """Every sample is a state the store could have been in (ATOMIC-2, LOCK-3, REPLACE-1,
    BATCH-2): decodable, not partial, no removed entry back, no duplicate, no half of a replace
    or batch, in an order appends explain."""
    findings: list[CheckerFinding] = []
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
                make_finding(analysis, "samples", clause, message, moment, calls, len(problems) - 1)
            )
    return findings


Problem = tuple[float, str, str, list[HistoryCall]]


def _unreadable(view: TargetView) -> list[Problem]:
    # ATOMIC-2: a reader sees the whole old file or the whole new one, which always decodes.
    return [
        (
            s.call,
            "ATOMIC-2",
            f"{sample_at(s)} was {sample_text(s)}: every file a store writes is "
            "UTF-8, so the reader caught one half written",
            [],
        )
        for s in view.samples
        if s.entries is None
    ]


def _partial(view: TargetView) -> list[Problem]:
    problems: list[Problem] = []
    for m in _missing(view):
        if m.cause != "torn":
            continue
        sample = m.sample
        what = "an empty file" if not sample.entries else "a partial file"
        again = ", though a later sample has it again" if sample.entries else ""
        # ATOMIC-2: never an empty or partial file, not even for a moment.
        problems.append(
            (
                sample.call,
                "ATOMIC-2",
                f"the reader saw {what}: {short(m.text)}, acknowledged at "
                f"{m.producer.ret:.6f} and not removable yet, is missing from {sample_at(sample)}, "
                f"which holds {sample_text(sample)}{again}. The file was truncated and written "
                "in place (write a temp file and rename it over the file)",
                [m.producer],
            )
        )
    return problems


def _gone(view: TargetView) -> dict[str, HistoryCall]:
    """Texts certainly removed: an acknowledged mutation removed by an ``old_text`` only that
    text contains, and no mutation invoked after it writes the text again."""
    gone: dict[str, HistoryCall] = {}
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
                    f"a removed entry came back: {short(text)} was removed by the call "
                    f"below, acknowledged at {remover.ret:.6f}, yet {sample_at(sample)} holds it "
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
            if not made and not start[text]:
                continue  # text no session wrote: a torn entry (_unwritten, ATOMIC-2)
            replaces = sum(1 for w in made if w.replaces is not None)
            adds = 1 if any(w.replaces is None for w in made) else 0
            if count <= start[text] + replaces + adds:
                continue
            # LOCK-3, DUP-1: an add takes effect once.
            problems.append(
                (
                    run.first.call,
                    "LOCK-3",
                    f"{sample_at(run.first)} holds {short(text)} {count} times; no order "
                    "of the mutations writes it more than once",
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


def _half_done(view: TargetView, call: HistoryCall, run: Run) -> tuple[str, str] | None:
    effect = view.effects[id(call)]
    batch = call.request.get("op") == "batch"
    clause = "BATCH-2" if batch else "REPLACE-1"
    sample = run.first
    for old in effect.removed:
        victim = view.sole_match(old)
        if victim is None or victim not in run.present:
            continue
        in_start = view.start is not None and victim in view.start
        if len(view.producers.get(victim, [])) + in_start > 1:
            continue  # written twice: it may have come back
        # REPLACE-1, BATCH-2: a mutation takes effect as a whole.
        return clause, (
            f"{sample_at(sample)} holds both {short(victim)}, which the call below "
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
            f"{sample_at(sample)} holds part of the batch below but not "
            f"{short(written.text)}, which it writes and nobody removed: a batch seen half done"
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
                        f"{sample_at(run.first)} has {short(earlier[0])} before "
                        f"{short(text)}, but the append of the second was acknowledged "
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
                        f"{sample_at(run.first)} has {short(seen[1])} before "
                        f"{short(text)}, the reverse of their order in one batch",
                        [],
                    )
                )
                break
            items[call_id] = (max(item, seen[0]) if seen else item, text)
            if earlier is None or call > earlier[1][0]:
                latest = (text, slot)
    return problems


# -- 3. limits ----------------------------------------------------------------------------------


def check_limits(analysis: Analysis) -> list[CheckerFinding]:
    """No sample is over its limit, unless the file started over it and has not grown since
    (LIMIT-2, LIMIT-4; LIMIT-6 when the sample fits the other target's limit)."""
    findings: list[CheckerFinding] = []
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
        started = usage(view.start or ())
        # LIMIT-2: a mutation whose result exceeds the limit (and the current usage) is refused;
        # one that another target's limit would allow was counted against it (LIMIT-6, as the
        # model's limit_rule decides)
        start = view.start or ()
        other = [
            n
            for t, n in analysis.limits.items()
            if t != view.target and not exceeds_limit(run.entries or (), start, n)
        ]
        why = f", which the {other[0]:,} of the other target allows" if other else ""
        findings.append(
            make_finding(
                analysis,
                "limits",
                "LIMIT-6" if other else "LIMIT-2",
                f"{sample_at(run.first)} uses {used:,} code points, over the "
                f"{view.target} limit of {view.limit:,}{why} (the file started at {started:,}): "
                f"some mutation grew the file past its limit; it holds "
                f"{sample_text(run.first)}",
                run.first.call,
                [],
                len(over) - 1,
            )
        )
    return findings


def _unclear(analysis: Analysis) -> bool:
    """Whether some sample lacks an acknowledged text that a torn write and a stale whole file
    explain alike (``either``, :func:`_cause`). The reader's samples are then evidence of
    neither ATOMIC-2 nor LOCK-3, and the linearizability search judges the sessions' answers
    alone."""
    return any(m.cause == "either" for view in analysis.targets.values() for m in _missing(view))


def judge_history(
    events: Sequence[Event],
    limits: Mapping[str, int],
    *,
    start: Mapping[str, bytes | None] | None = None,
    timeout: float = 60.0,
    seconds: dict[str, float] | None = None,
) -> list[CheckerFinding]:
    """Runs the checkers cheapest first and returns their findings (empty: all green). ``events``
    are the sessions' mutations and a reader's ``read`` samples; ``start`` the files' bytes before
    the run (None: absent). The linearizability search runs only when the cheap checkers found
    nothing. ``seconds``, when given, receives the time each checker took."""
    clock = seconds if seconds is not None else {}
    started = time.monotonic()
    relevant = [e for e in events if e.op.get("op") in (*MUTATIONS, "read")]
    analysis = analyse(relevant, limits, start)
    findings: list[CheckerFinding] = []
    checkers = (
        ("analysis", None),
        ("acknowledged", check_acknowledged),
        ("samples", check_samples),
        ("limits", check_limits),
    )
    for name, checker in checkers:
        if checker is not None:
            findings.extend(checker(analysis))
        now = time.monotonic()
        clock[name], started = now - started, now
    if findings:
        return findings
    if _unclear(analysis):
        mutations = [e for e in relevant if e.op.get("op") != "read"]
        analysis = analyse(mutations, limits, start)
    findings = check_linearizable(analysis, timeout)
    clock["linearizability"] = time.monotonic() - started
    return findings
