"""Certify checks over chosen interleavings of concurrent sessions (LOCK-2, LOCK-3, ATOMIC-2).

Both run Python backends only: the scheduler needs the interposed file-system calls of the
backend's own code (:mod:`memspec.fuzz.schedule`).

- ``preemption_bounded_schedules`` explores, systematically, every schedule of two sessions
  adding to a store that already holds an entry, with at most one switch between sessions at a
  moment the running one could have gone on (two under the ``thorough`` profile). The lost
  update of a store that reads before it locks, locks a file that a rename replaces, or writes
  a list it loaded earlier, needs exactly one such switch.
- ``random_schedules`` runs longer generated programs of three sessions under schedules whose
  switches Hypothesis draws, and shrinks a failure to the fewest switches and operations.

A failure saves a repro file (backend, operations, schedule) in the artifacts directory and
names the command that replays it, ``memspec repro FILE``, with the interleaving as a
timeline.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memspec.conformance.registry import CheckContext, NotApplicable, check
from memspec.conformance.workers import require_python_backend
from memspec.fuzz.exploration import (
    Execution,
    Exploration,
    Program,
    execute,
    explore,
    hypothesis_chooser,
    render_interleaving,
)
from memspec.fuzz.programs import generate_program, limits_for
from memspec.fuzz.repro import repro_of, save_repro
from memspec.fuzz.runner import fresh_root, plan
from memspec.fuzz.schedule import Chooser

BOUNDS = {"smoke": (1, 30, (1, 1)), "ci": (1, 200, (1, 1)), "thorough": (2, 5000, (2, 1))}
"""Preemption bound, most schedules run and adds per session, per profile. Two adds by one
session and two switches let a session lock the new file of a rename while another still holds
the old one (a lock on the data file itself)."""
NOTES = ("Project uses Go 1.22", "Editor: helix")
SEED_ENTRY = b"User prefers tabs over spaces"
SESSIONS = {"smoke": (2, 3), "ci": (3, 4), "thorough": (3, 8)}
"""Sessions and operations per session of the random schedules, per profile."""


def _artifacts(ctx: CheckContext) -> Path:
    return ctx.artifacts or ctx.scratch


def fail_with_repro(
    ctx: CheckContext, execution: Execution, check_id: str, seed: int | None = None
) -> None:
    """Saves the failing execution's repro file and raises the AssertionError that explains it."""
    finding = execution.finding
    assert finding is not None
    # One file per check: Hypothesis replays its shrunk example last, so the file ends minimal.
    name = f"repro-{check_id.rsplit('.', 1)[-1]}.json"
    spec = getattr(ctx.backend, "spec", "?")
    path = save_repro(_artifacts(ctx) / name, repro_of(execution, spec, check_id, seed))
    raise AssertionError(
        f"{finding.render()}\n\nReplay it with: memspec repro {path}\n\n"
        f"{render_interleaving(execution)}"
    )


def _adds(*per_session: int) -> Program:
    """Sessions that load and then add ``per_session[i]`` entries each, to a store holding one."""
    sessions = tuple(
        (
            f"p{index}",
            (
                {"op": "load"},
                *(
                    {"op": "add", "target": "memory", "content": f"Note {index}.{n}: {NOTES[n]}"}
                    for n in range(count)
                ),
            ),
        )
        for index, count in enumerate(per_session)
    )
    return Program(sessions, files={"memory": SEED_ENTRY})


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    features=("multi-process",),
    python_only=True,
    id="interleavings.preemption_bounded_schedules",
)
def preemption_bounded_schedules(ctx: CheckContext) -> None:
    """Every schedule of two adders with few switches keeps both adds (LOCK-2, LOCK-3)."""
    require_python_backend(ctx.backend)
    bound, budget, adds = BOUNDS.get(ctx.profile.name, BOUNDS["ci"])
    program = _adds(*adds)
    summary = Exploration()
    started = time.monotonic()

    def run_one(choose: Chooser) -> Execution:
        with fresh_root(ctx) as root:
            return execute(ctx.backend, root, program, choose)

    undecided = []
    for execution in explore(run_one, bound, budget, summary):
        ctx.figures.update(
            {
                "schedules run": summary.runs,
                "preemption bound": bound,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        if execution.finding is not None:
            fail_with_repro(ctx, execution, "interleavings.preemption_bounded_schedules")
        if execution.undecided:
            undecided.append(execution.undecided)
    ctx.figures["every schedule within the bound run"] = summary.complete
    if undecided:
        raise NotApplicable(f"LOCK-3: undecided: {undecided[0]}")


@check(
    "LOCK-3",
    "LOCK-2",
    "ATOMIC-2",
    "LIMIT-2",
    features=("multi-process",),
    python_only=True,
    id="interleavings.random_schedules",
)
def random_schedules(ctx: CheckContext) -> None:
    """Generated programs of several sessions under drawn schedules stay linearizable (LOCK-3)."""
    require_python_backend(ctx.backend)
    count, length = SESSIONS.get(ctx.profile.name, SESSIONS["ci"])
    check_id = "interleavings.random_schedules"
    batch = "batch" in ctx.claimed_features()
    run = plan(ctx, check_id)
    examples = max(5, ctx.profile.examples // 5)  # each example starts its sessions' processes
    run = replace(run, settings=settings(run.settings, max_examples=examples))

    @given(seed=st.integers(0, 2**16), data=st.data())
    def schedules(seed: int, data: Any) -> None:
        rng = random.Random(seed)
        programs = [generate_program(p, rng, length, batch=batch) for p in range(count)]
        program = Program(
            tuple((f"p{p}", ops) for p, ops in enumerate(programs)), limits_for(programs)
        )
        with fresh_root(ctx) as root:
            execution = execute(ctx.backend, root, program, hypothesis_chooser(data))
        if execution.finding is not None:
            fail_with_repro(ctx, execution, check_id, seed)

    run.run(run.apply(schedules))
