"""Every schedule of two adding sessions up to a bound of preemptions, under the deterministic
scheduler (LOCK-2, LOCK-3): docs/architecture.md, "Reproducing a race"."""

from __future__ import annotations

import time

from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.schedule.exploration import (
    Execution,
    Exploration,
    Program,
    execute,
    explore,
    fresh_root,
)
from memspec.conformance.schedule.repro import fail_with_repro
from memspec.conformance.schedule.schedule import Chooser
from memspec.conformance.transport.wire import Request
from memspec.conformance.verdict.findings import Unverified

NOTES = ("Project uses Go 1.22", "Editor: helix")
SEED_ENTRY = b"User prefers tabs over spaces"


def _adds(*per_session: int) -> Program:
    """Sessions that load and then add ``per_session[i]`` entries each, to a store holding one."""
    sessions = tuple(
        (f"p{index}", _load_then_add(index, count)) for index, count in enumerate(per_session)
    )
    return Program(sessions, files={"memory": SEED_ENTRY})


def _load_then_add(index: int, count: int) -> tuple[Request, ...]:
    """Returns the requests of session ``p{index}``: a load, then ``count`` adds of notes."""
    adds: list[Request] = [
        {"op": "add", "target": "memory", "content": f"Note {index}.{n}: {NOTES[n]}"}
        for n in range(count)
    ]
    return ({"op": "load"}, *adds)


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    id="interleavings.preemption_bounded_schedules",
)
def preemption_bounded_schedules(ctx: CheckContext) -> None:
    """Every schedule of two adders with few switches keeps both adds (LOCK-2, LOCK-3). Under a
    randomized profile the fixed exploration of ``ci`` runs first; the profile's wider one then
    hunts until its share of the budget, and stopping there leaves what ``ci`` verifies
    verified."""
    ctx.tampering.require()
    confirm_plain_run(ctx, "a schedule")
    profile = ctx.profile
    allowance = ctx.allowance
    hunting = allowance is not None and not allowance.fixed_work
    floor = profile.fixed_sample
    stages = [floor, profile] if hunting and floor != profile else [profile]
    started = time.monotonic()

    def run_one(choose: Chooser) -> Execution:
        with fresh_root(ctx) as root:
            return execute(ctx.backend, root, program, choose, ctx.tampering)

    undecided = []
    for stage in stages:
        bound, program = stage.preemption_bound, _adds(*stage.adds_per_session)
        summary = Exploration()
        first = stage is not stages[-1]
        for execution in explore(run_one, bound, stage.schedule_budget, summary):
            ctx.figures.update(
                {
                    "schedules run": summary.runs,
                    "preemption bound": bound,
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
            if execution.finding is not None:
                fail_with_repro(ctx, execution)
            if execution.undecided:
                undecided.append(execution.undecided)
            if hunting and not first and allowance is not None and allowance.search_spent():
                ctx.figures["hunt after ci's exploration"] = allowance.search_stop()
                break
        if first:
            ctx.figures["ci's exploration"] = f"{summary.runs} schedules, bound {bound}"
    ctx.figures["every schedule within the bound run"] = summary.complete
    if undecided:
        raise Unverified(f"the linearizability search was undecided: {undecided[0]}")
