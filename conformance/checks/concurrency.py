"""Concurrent sessions and a file-sampling reader, judged as a history (LOCK-3, ATOMIC-2):
``processes`` sessions start together at a barrier and run generated programs while a reader samples
the files; :func:`~memspec.conformance.history.checkers.judge_history` judges the history
(docs/architecture.md, "Concurrent writers")."""

from __future__ import annotations

import random
import time
from pathlib import Path

from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.waits import (
    LINEARIZABILITY_TIMEOUT,
    SECONDS_PER_OPERATION,
    SESSION_TIMEOUT,
)
from memspec.conformance.history.checkers import CheckerFinding, judge_history
from memspec.conformance.history.history import Event, write_history
from memspec.conformance.history.programs import generate_program, limits_for
from memspec.conformance.processes.reader import Reader
from memspec.conformance.processes.workers import (
    Job,
    history,
    run_together,
)
from memspec.conformance.verdict.findings import Unverified, Violation
from memspec.spec.targets import TARGETS

SEED = 20240605
"""The seed of the programs when the run names none (profile ``ci``: the same every run)."""
HISTORY_FILE = "concurrency-history.jsonl"


def run_history(
    ctx: CheckContext, seed: int
) -> tuple[list[Event], dict[str, int], dict[str, float]]:
    """Runs the sessions and the reader on ``ctx.root``; returns the history, the limits and
    timings (seconds: ``run``)."""
    processes, count = ctx.profile.processes, ctx.profile.operations
    batch = "batch" in ctx.claimed_features()
    rng = random.Random(seed)
    programs = [generate_program(p, rng, count, TARGETS, batch=batch) for p in range(processes)]
    limits = limits_for(programs)
    jobs = [
        Job(ctx.backend, ctx.root, program, limits, name=f"p{p}")
        for p, program in enumerate(programs)
    ]
    started = time.monotonic()
    with Reader(ctx.root, TARGETS, process=processes) as reader:
        timeout = SESSION_TIMEOUT + processes * count * SECONDS_PER_OPERATION
        results = run_together(jobs, timeout=timeout)
        samples = [Event.from_record(record) for record in reader.stop()]
    seconds = time.monotonic() - started
    for result in results:
        result.expect_done()
    events = [Event.from_record(record) for record in history(results)]
    ordered = sorted([*events, *samples], key=lambda e: (e.time, e.type != "invoke"))
    return ordered, limits, {"run": seconds, "samples": len(samples) / 2}


def _save(ctx: CheckContext, events: list[Event]) -> Path:
    folder = ctx.artifacts or ctx.scratch
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / HISTORY_FILE
    write_history(path, events)
    return path


def _seed(ctx: CheckContext) -> int:
    """The seed of the programs: ``--seed``; else fixed for a derandomized profile (``ci``),
    drawn for one that is not (``thorough``) and named in any failure."""
    if ctx.seed is not None:
        return ctx.seed
    return SEED if ctx.profile.derandomize else random.SystemRandom().randrange(2**32)


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    "ATOMIC-5",
    "LIMIT-2",
    "BATCH-2",
    id="concurrency.history_is_linearizable",
)
def history_is_linearizable(ctx: CheckContext) -> None:
    """Concurrent sessions and a reader form a history every checker accepts (LOCK-3)."""
    confirm_plain_run(ctx, "a concurrent history")
    seed = _seed(ctx)
    events, limits, extra = run_history(ctx, seed)
    seconds: dict[str, float] = {}
    findings = judge_history(
        events, limits, start={}, timeout=LINEARIZABILITY_TIMEOUT, seconds=seconds
    )
    ctx.figures.update(
        {
            "sessions": ctx.profile.processes,
            "operations per session": ctx.profile.operations,
            "samples": int(extra["samples"]),
            "seed": seed,
            "run seconds": round(extra["run"], 2),
            **{f"{name} seconds": round(value, 3) for name, value in seconds.items()},
        }
    )
    if not findings:
        return
    saved = _save(ctx, events)
    violations = [f for f in findings if not f.undecided]
    scale = (
        f"{ctx.profile.processes} sessions x {ctx.profile.operations} operations, "
        f"{int(extra['samples'])} samples, seed {seed}"
    )
    if not violations:
        raise Unverified(f"{findings[0].message} ({scale}; history saved to {saved})")
    first: CheckerFinding = violations[0]
    others = "".join(f"\nalso: {f.clause} ({f.checker})" for f in violations[1:])
    # LOCK-3 and the clause of the checker at fault: every checker accepts the history.
    raise Violation(
        first.clause,
        f"the {first.checker} checker rejects the history of {scale} "
        f"(saved to {saved}; limits {limits}; repeat the programs with --seed {seed}):\n"
        f"{first.message}{others}",
    )
