"""The random-schedule check: generated programs under schedules Hypothesis draws (LOCK-3).

``random_schedules`` runs programs of three sessions of a Python backend under the deterministic
scheduler (:mod:`memspec.conformance.schedule`), the switches drawn by Hypothesis; its
systematic sibling is ``interleavings.preemption_bounded_schedules``. A failure saves a repro file
that ``memspec repro FILE`` replays. Under ``smoke`` and ``ci`` a race found ends the search, as
found; ``thorough`` shrinks it towards the fewest switches within its budget.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.search import plan
from memspec.conformance.history.programs import generate_program, limits_for
from memspec.conformance.schedule.exploration import Program, execute, fresh_root
from memspec.conformance.schedule.repro import fail_with_repro
from memspec.conformance.schedule.schedule import Chooser, Decision

SCHEDULES_RUN = "schedules run"
"""The figure of the schedules the check ran, Hypothesis' replay of a failure included."""
FIRST_FAILING = "first failing schedule"
"""The figure of the number of the first schedule that failed, counted as ``SCHEDULES_RUN`` is:
the runs after it are the cost of a race found (one, the replay, under ``ci``)."""

SWITCH = st.integers(0, 255)
"""The one draw of every decision, whoever is enabled: a replay that meets other sessions than
the run it replays draws the same strategy, which Hypothesis requires (a draw that depends on
the decision ended a thorough run in FlakyStrategyDefinition)."""


def hypothesis_chooser(data: Any, switch_one_in: int = 4) -> Chooser:
    """Returns a Chooser whose switches Hypothesis draws from ``data`` (``st.data()``): at
    each decision the last session goes on unless a switch is drawn (about one in
    ``switch_one_in``), so shrinking (towards 0) leads to the fewest switches."""

    def choose(decision: Decision) -> str:
        drawn = data.draw(SWITCH)
        others = [name for name in decision.enabled if name != decision.last]
        if decision.last in decision.enabled and (
            not others or drawn % switch_one_in != switch_one_in - 1
        ):
            return str(decision.last)
        return others[drawn // switch_one_in % len(others)]

    return choose


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    "LIMIT-2",
    id="interleavings.random_schedules",
)
def random_schedules(ctx: CheckContext) -> None:
    """Generated programs of several sessions under drawn schedules stay linearizable (LOCK-3)."""
    ctx.tampering.require()
    confirm_plain_run(ctx, "a schedule")
    count, length = ctx.profile.schedule_sessions, ctx.profile.schedule_operations
    batch = "batch" in ctx.claimed_features()
    examples = max(5, ctx.profile.examples // 5)  # each example starts its sessions' processes
    # A shrink step is a whole scheduled run: a race found ends the search (search.plan). The
    # draws are the schedule, which the failure shows as a timeline and saves in its repro file.
    run = replace(plan(ctx, max_examples=examples, shrink=False), draws_shown=False)
    figures = ctx.figures

    @given(seed=st.integers(0, 2**16), data=st.data())
    def schedules(seed: int, data: Any) -> None:
        rng = random.Random(seed)
        programs = [generate_program(p, rng, length, batch=batch) for p in range(count)]
        program = Program(
            tuple((f"p{p}", ops) for p, ops in enumerate(programs)), limits_for(programs)
        )
        with fresh_root(ctx) as root:
            chooser = hypothesis_chooser(data)
            execution = execute(ctx.backend, root, program, chooser, ctx.tampering)
        figures[SCHEDULES_RUN] = number = int(figures.get(SCHEDULES_RUN, 0)) + 1
        if execution.finding is not None:
            figures.setdefault(FIRST_FAILING, number)
            fail_with_repro(ctx, execution, seed)

    run.run(run.apply(schedules))
