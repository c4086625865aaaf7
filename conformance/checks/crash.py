"""Checks of the CRASH clauses: a writer killed with ``kill -9`` leaves each file old or new.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memspec.conformance.checks._disk import assert_written, read_or_none, stray_files
from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.waits import PROBE_TIMEOUT, ROUND_TIMEOUT, START_TIMEOUT
from memspec.conformance.processes.workers import Job, Worker, WorkerResult
from memspec.conformance.tamper.calls import CallRecord, describe_call
from memspec.conformance.tamper.capability import Tampering
from memspec.conformance.tamper.interpose import Fault, Match, Plan
from memspec.conformance.transport.backend import BackendDefect
from memspec.conformance.transport.wire import Request
from memspec.conformance.verdict.findings import Unverified, Violation
from memspec.spec import codes
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.drift_refusal import refuses_worked_on_file
from memspec.spec.model import entries_on_disk, initial_state, step
from memspec.spec.requests import mutation_of

CRASH_LIMIT = 1_000_000
LIMITS = {"memory": CRASH_LIMIT}
ENTRY_WIDTH = 160
"""Code points per entry, so that rewriting the file takes long enough to be caught midway."""
SEED_ENTRIES = 12
MUTATIONS_PER_ROUND = 12
ROUNDS_PER_TRIAL = 4
KILL_DELAY = 0.003
KILL_POINTS = frozenset({"write", "pwrite", "flush", "fsync", "fdatasync", "ftruncate"})
KILL_POINTS |= {"replace", "rename"}
"""The interposed calls at which ``kill_at_each_write_step`` kills: every call that moves,
syncs or renames bytes."""
OPENING = 3
"""Operations a round starts with: load, entries memory, the probe add."""


def _tag(entry: str) -> str:
    return entry.split(" ", 1)[0] if entry.startswith("<k") else repr(entry[:40])


def _show(entries: tuple[str, ...]) -> str:
    tags = [_tag(entry) for entry in entries]
    if len(tags) > 12:
        tags = [*tags[:5], f"... ({len(tags) - 10} more) ...", *tags[-5:]]
    return f"{len(entries)} entries [{', '.join(tags)}]"


def _difference(found: tuple[str, ...], allowed: tuple[str, ...]) -> str:
    missing = [_tag(entry) for entry in allowed if entry not in found]
    extra = [_tag(entry) for entry in found if entry not in allowed]
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing[:8])}")
    if extra:
        parts.append(f"unexpected {', '.join(extra[:8])}")
    if not parts:
        parts.append("the same entries in another order or count")
    return "; ".join(parts)


def _describe_op(request: Request) -> str:
    if request["op"] == "add":
        return f"add {_tag(request['content'])}"
    if request["op"] == "replace":
        return f"replace {request['old_text']} by {_tag(request['new_content'])}"
    return f"{request['op']} {request.get('old_text', '')}".strip()


def _describe_point(call: CallRecord) -> str:
    """Describes a traced call; a temp file is named by its role, its name changes every run."""
    if call.kind == "temp":
        return f"{call.name} of the temp file"
    return describe_call(call)


@dataclass
class Recovery:
    """What the check knows between two crashes: the states the file may be in, what the last
    crash interrupted, the stray files it may have left, the stray files a clean session keeps."""

    ctx: CheckContext
    allowed: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    crash: str = "after the seed adds"
    leftovers: dict[str, tuple[int, int]] = field(default_factory=dict)
    baseline: dict[str, tuple[int, int]] = field(default_factory=dict)
    counter: Iterator[int] = field(default_factory=itertools.count)
    undecodable: bool = False
    """Whether the last crash left MEMORY.md not valid UTF-8 (CRASH-1 failed on it)."""

    def entry(self, label: str) -> str:
        """Returns a new unique entry, ``<kN> label xxx...``."""
        head = f"<k{next(self.counter)}> {label} "
        return head + "x" * max(0, ENTRY_WIDTH - len(head))

    def opening(self) -> tuple[Request, ...]:
        """Returns the operations that open a round: load, entries, probe add."""
        return (
            {"op": "load"},
            {"op": "entries", "target": "memory"},
            {"op": "add", "target": "memory", "content": self.entry("probe")},
        )

    def sure_entries(self) -> list[str]:
        """Returns the entries present in every state the file may be in."""
        states = [set(entries) for entries, _ in self.allowed]
        return [entry for entry in self.allowed[0][0] if all(entry in s for s in states)]

    def judge(self, result: WorkerResult, crash: str) -> None:
        """Judges the recovery at the start of ``result`` and the history after it, and records
        what the crash of this round (described by ``crash``) may have left."""
        if result.status == "error":
            result.expect_done()
        found = self._found(result)
        # Each clause is judged on its own, and the check goes on after a failure: a torn file
        # (CRASH-1) says nothing of the lock (CRASH-3) or of the leftovers (CRASH-2).
        with self.ctx.keep_going():
            # CRASH-1: the file is as it was before the interrupted mutation or as it left it.
            if not any(found == entries for entries, _ in self.allowed):
                raise Violation("CRASH-1", self._torn("a fresh session finds", found))
        probe = next((op for op in result.ops if op.index == OPENING - 1), None)
        whole = any(found == entries for entries, _ in self.allowed)
        refused = probe is not None and refuses_worked_on_file("canonical", probe.answer or {})
        with self.ctx.keep_going():
            # DRIFT-1: the whole file a crash left is the store's own, worked on as it is.
            if whole and refused:
                raise Violation(
                    "DRIFT-1",
                    f"{self.crash}, the next add answered {probe and probe.answer}: the "
                    "file the crash left is a whole file of the store's own, worked on as it is",
                )
        # READ-6: a file the crash left undecodable (CRASH-1's torn file, failed when it was
        # found) refuses every mutation: a lock has nothing to do with that refusal.
        unreadable = (
            self.undecodable
            and probe is not None
            and probe.answer is not None
            and probe.answer.get("code") == codes.E_UNREADABLE
        )
        with self.ctx.keep_going():
            # CRASH-3: the kernel released the crashed writer's flock, so a new mutation
            # completes (or is refused as drift, DRIFT-1's business above).
            completed = probe is not None and (probe.type == "ok" or (whole and refused))
            if not (completed or unreadable):
                raise Violation(
                    "CRASH-3",
                    f"{self.crash}, the next add "
                    + (
                        f"answered {probe.answer}"
                        if probe is not None and probe.answer is not None
                        else f"did not complete within {PROBE_TIMEOUT:g} s"
                    )
                    + ": a crash must never leave the target locked (use flock, which the kernel "
                    "releases when its holder dies, not a lock file whose existence means locked)",
                )
        with self.ctx.keep_going():
            self._judge_strays()
        state = initial_state(memory_char_limit=CRASH_LIMIT, memory=encode_entries(found))
        self.allowed = self._replay(result, state)
        if result.status == "done":
            self.crash = f"after session {result.name} ended normally"
        else:
            between = "" if result.in_flight is not None else " (between operations)"
            self.crash = f"after kill -9 {crash}{between}"
        with self.ctx.keep_going():
            self._judge_disk()

    def _found(self, result: WorkerResult) -> tuple[str, ...]:
        answer = result.answer(1)
        if answer is None or not answer.get("ok"):
            if result.status == "defect":
                result.expect_done()
            raise BackendDefect(
                f"session {result.name} did not answer load + entries after a crash "
                f"({result.message or answer})",
                {"op": "entries", "target": "memory"},
                answer,
            )
        return tuple(answer["entries"])

    def _torn(self, who: str, found: tuple[str, ...]) -> str:
        states = " or ".join(f"{label}: {_show(entries)}" for entries, label in self.allowed)
        closest = min(self.allowed, key=lambda item: len(set(item[0]) ^ set(found)))[0]
        return (
            f"{self.crash}, {who} {_show(found)} ({_difference(found, closest)}); the spec "
            f"allows only {states}"
        )

    def _replay(self, result: WorkerResult, state: Any) -> list[tuple[tuple[str, ...], str]]:
        """Steps the spec model through the acknowledged operations after the opening; returns
        the states the file may be in now (two when an operation was in flight)."""
        for op in result.ops[2:]:
            mutation = mutation_of(op.request["op"], op.request)
            outcome, after = step(state, mutation)
            if op.type == "info":
                return [
                    (entries_on_disk(state, "memory") or (), f"before {_describe_op(op.request)}"),
                    (entries_on_disk(after, "memory") or (), f"after {_describe_op(op.request)}"),
                ]
            code = None if op.answer is None else op.answer.get("code")
            if code != outcome.code:
                # CRASH-1 can be judged only if the backend answered like the model; the answer
                # itself is the business of the operation's own clauses and checks.
                raise Unverified(
                    f"{_describe_op(op.request)} answered {op.answer}, the spec model expects "
                    f"{outcome.code}; the check cannot tell which states a crash may leave"
                )
            state = after
        return [(entries_on_disk(state, "memory") or (), "after the last acknowledged operation")]

    def _judge_disk(self) -> None:
        path = self.ctx.root / "MEMORY.md"
        data = path.read_bytes() if path.exists() else None
        parsed = classify_bytes(data, CRASH_LIMIT).entries
        self.undecodable = parsed is None and data is not None
        # CRASH-1: the bytes on disk right after the kill are a whole old or new file.
        if parsed is None:
            raise Violation(
                "CRASH-1",
                f"{self.crash}, MEMORY.md is not valid UTF-8 ({len(data or b'')} bytes): the "
                "crash left a torn file",
            )
        if not any(parsed == entries for entries, _ in self.allowed):
            raise Violation("CRASH-1", self._torn("the bytes on disk parse to", parsed))

    def _judge_strays(self) -> None:
        now = stray_files(self.ctx.root)
        survivors = sorted(name for name, key in self.leftovers.items() if now.get(name) == key)
        # CRASH-2: what a crash left is removed by the next completed mutation.
        if survivors:
            raise Violation(
                "CRASH-2",
                f"{self.crash}, {', '.join(survivors)} left by that crash "
                f"{'is' if len(survivors) == 1 else 'are'} still in the root after a later "
                "mutation completed; remove stale temp files under the lock so that they never "
                "accumulate",
            )

    def note_leftovers(self) -> None:
        """Records the stray files in the root now (after a crash) that a clean session does
        not keep, so that the next round can require them gone."""
        self.leftovers = {
            name: key
            for name, key in stray_files(self.ctx.root).items()
            if self.baseline.get(name) != key
        }


def _setup(ctx: CheckContext) -> Recovery:
    """Writes the seed entries in a clean session and notes the stray files it keeps."""
    recovery = Recovery(ctx)
    seeds = tuple(recovery.entry("seed") for _ in range(SEED_ENTRIES))
    adds: list[Request] = [{"op": "add", "target": "memory", "content": s} for s in seeds]
    ops: tuple[Request, ...] = ({"op": "load"}, *adds)
    with Worker(Job(ctx.backend, ctx.root, ops, LIMITS, name="setup")) as worker:
        worker.finish(ROUND_TIMEOUT).expect_done()
    # a crash cannot be judged against seed adds that never reached the file
    assert_written(read_or_none(ctx.root / "MEMORY.md"), seeds, f"each of {len(seeds)} seed adds")
    recovery.allowed = [(seeds, "after the seed adds")]
    recovery.baseline = stray_files(ctx.root)
    return recovery


def _job(recovery: Recovery, mutations: list[Request], name: str, plan: Plan | None = None) -> Job:
    """Returns the job of one round: the opening, then ``mutations``."""
    ctx = recovery.ctx
    ops = (*recovery.opening(), *mutations)
    return Job(ctx.backend, ctx.root, ops, LIMITS, plan=plan, name=name)


def _round(
    recovery: Recovery,
    mutations: list[Request],
    name: str,
    *,
    rng: random.Random | None = None,
) -> WorkerResult:
    """Runs one round; with ``rng`` the harness kills it after a random operation."""
    return _drive(_job(recovery, mutations, name), rng)


def _drive_whole(job: Job) -> WorkerResult:
    """Runs a round's job, killed only when its probe does not complete."""
    return _drive(job, None)


def _drive(job: Job, rng: random.Random | None) -> WorkerResult:
    """Runs a round's job: kills it when its probe does not complete, and with ``rng`` after
    a random operation."""
    ops = job.operations
    with Worker(job) as worker:
        worker.wait_until(lambda w: w.opened is not None or w.ended, START_TIMEOUT)
        if not worker.wait_until(lambda w: w.completed(2) or w.ended, PROBE_TIMEOUT):
            worker.kill()
        elif rng is not None:
            kill_at = rng.randrange(OPENING, len(ops))
            worker.wait_until(lambda w: w.invoked(kill_at) or w.ended, ROUND_TIMEOUT)
            time.sleep(rng.uniform(0, KILL_DELAY))
            worker.kill()
        result = worker.finish(ROUND_TIMEOUT)
    return result


def _random_mutations(recovery: Recovery, rng: random.Random) -> list[Request]:
    """Returns adds, replaces and removes of entries sure to be present, as requests."""
    present = recovery.sure_entries()
    mutations: list[Request] = []
    for _ in range(MUTATIONS_PER_ROUND):
        roll = rng.random()
        if roll < 0.5 or len(present) < 4:
            content = recovery.entry("added")
            mutations.append({"op": "add", "target": "memory", "content": content})
            present.append(content)
        elif roll < 0.8:
            old = present.pop(rng.randrange(len(present)))
            new = recovery.entry("replacement")
            mutations.append(
                {"op": "replace", "target": "memory", "old_text": _tag(old), "new_content": new}
            )
            present.append(new)
        else:
            old = present.pop(rng.randrange(len(present)))
            mutations.append({"op": "remove", "target": "memory", "old_text": _tag(old)})
    return mutations


def _final(recovery: Recovery) -> None:
    """A last clean session judges the last crash; its completed probe must have removed what
    the crashes left (CRASH-2)."""
    result = _round(recovery, [], "final")
    recovery.judge(result, "")
    # killed by the harness only when its probe did not complete: CRASH-3's, judged above
    if result.status != "killed":
        result.expect_done()


@check("CRASH-1", "CRASH-2", "CRASH-3", id="crash.kill_at_random_moments")
def kill_at_random_moments(ctx: CheckContext) -> None:
    """Kills a session with SIGKILL at random moments while it adds, replaces and removes
    (``trials`` x 4 rounds, however fast the machine); after each kill the file is old or new,
    every acknowledged operation is kept, the target is not locked and leftovers do not pile up
    (CRASH-1..3)."""
    confirm_plain_run(ctx, "a kill")
    rng = random.Random(ctx.seed if ctx.seed is not None else 9)
    recovery = _setup(ctx)
    for number in range(ctx.profile.trials * ROUNDS_PER_TRIAL):
        mutations = _random_mutations(recovery, rng)
        result = _round(recovery, mutations, f"round{number}", rng=rng)
        in_flight = result.in_flight
        where = (
            f"during {_describe_op(in_flight.request)} (round {number})"
            if in_flight is not None and in_flight.index >= OPENING
            else f"in round {number}"
        )
        recovery.judge(result, where)
        recovery.note_leftovers()
    _final(recovery)


@check("CRASH-1", "CRASH-2", "CRASH-3", id="crash.kill_at_each_write_step")
def kill_at_each_write_step(ctx: CheckContext) -> None:
    """Traces one add, then kills the session right before and right after each of its writes,
    flushes, syncs and renames (interposed for a Python backend, by strace for a command);
    after each kill the file is old or new, the target is not locked and leftovers are removed
    by the next mutation (CRASH-1..3)."""
    tamper = ctx.tampering
    tamper.require()
    confirm_plain_run(ctx, "a kill")
    recovery = _setup(ctx)
    target: Request = {"op": "add", "target": "memory", "content": recovery.entry("traced")}
    traced = _job(recovery, [target], "traced", Plan(trace=True))
    traced_round = tamper.run(traced, ctx.scratch, _drive_whole)
    recovery.judge(traced_round, "")
    traced_round.expect_done()
    points = [call for call in traced_round.calls_during(OPENING) if call.name in KILL_POINTS]
    if not points:
        raise Unverified(
            "the add made no traced write, sync or rename: the backend writes through code "
            "memspec cannot interpose (a C extension?), so there is no step to crash at"
        )
    match = Match(frozenset(KILL_POINTS), op=OPENING)
    missed: list[str] = []
    for number, point in enumerate(points, 1):
        for when in ("before", "after"):
            fault = Fault(match, action=f"kill-{when}", nth=number)
            where = f"{when} {_describe_point(point)} (step {number} of {len(points)} of an add)"
            problem = _kill(recovery, tamper, fault, where, f"{when}{number}")
            if problem is not None:
                missed.append(f"{where}: {problem}")
    _final(recovery)
    if missed:
        raise Unverified(
            f"{tamper.name} could not kill the backend at {len(missed)} of {2 * len(points)} "
            f"steps (each tried {tamper.kill_attempts} times; every kill that landed was "
            f"judged): {'; '.join(missed)}"
        )


def _kill(
    recovery: Recovery, tamper: Tampering, fault: Fault, where: str, label: str
) -> str | None:
    """Kills a round's add at the step ``fault`` selects; its crash is judged by the next
    round, also when the kill landed on another step of the add or on none, which is then tried
    again (:attr:`Tampering.kill_attempts`). Returns None, or why the kill missed its step every
    time. A kill that landed outside the add (in the opening, whose probe it would fail) is
    never judged: the check is then not applicable."""
    problem: str | None = None
    for attempt in range(tamper.kill_attempts):
        add: Request = {"op": "add", "target": "memory", "content": recovery.entry(label)}
        job = _job(recovery, [add], f"{label}-{attempt}")
        killed = tamper.kill(job, fault, recovery.ctx.scratch, _drive_whole)
        if killed.unplaced:
            # The recording did not reach the step (its probe may have stuck on a lock the last
            # crash left, CRASH-3): the round, run as it is, is judged first.
            recovery.judge(killed.result, "")
            raise Unverified(
                f"the add recorded before the kill {where} made fewer writes, syncs and "
                "renames than the traced add: the backend's calls differ from run to run"
            )
        if killed.outside is not None:
            raise Unverified(
                f"{tamper.name}'s kill {where} landed outside the add ({killed.outside}), so "
                "the round cannot be judged: the backend's calls differ from run to run"
            )
        problem = killed.missed
        recovery.judge(
            killed.result, where if problem is None else f"at an unplanned step ({problem})"
        )
        recovery.note_leftovers()
        if problem is None:
            return None
    return problem
