"""The deterministic scheduler forces interleavings, finds races and replays them exactly.

Racy stores of ``tests/backends/procs.py`` are caught by systematic exploration of two sessions
(one switch between them is enough), their repro files replay the failure 10 times out of 10,
and the reference store passes every schedule explored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.commands.cli import main
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.schedule.exploration import (
    Execution,
    Exploration,
    Program,
    execute,
    explore,
    preemptions,
    render_interleaving,
)
from memspec.conformance.schedule.repro import load_repro, replay, repro_of, save_repro
from memspec.conformance.schedule.schedule import Chooser, Decision, follow, keep_running
from memspec.conformance.tamper.capability import tampering
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.verdict.findings import Violation, verdict_of
from memspec.fuzz.interleavings import FIRST_FAILING, SCHEDULES_RUN
from tests.budgeted import run_in_budget

REFERENCE = "memspec.reference_impl:open_store"
SEED = b"User prefers tabs over spaces"


def _adders(count: int = 2) -> Program:
    return Program(
        tuple(
            (f"p{n}", ({"op": "load"}, {"op": "add", "target": "memory", "content": f"note {n}"}))
            for n in range(count)
        ),
        files={"memory": SEED},
    )


def _backend(name: str) -> InProcessBackend:
    spec = name if ":" in name else f"tests.backends.procs:{name}"
    return InProcessBackend(spec, 10.0)


def _first_failure(backend: InProcessBackend, tmp_path: Path, bound: int = 1) -> Execution:
    roots = iter(range(10_000))

    def run_one(choose: Chooser) -> Execution:
        root = tmp_path / f"root-{next(roots)}"
        root.mkdir()
        return execute(backend, root, _adders(), choose, tampering(backend))

    for execution in explore(run_one, bound, 200):
        if execution.finding is not None:
            return execution
    raise AssertionError("no schedule within the bound failed")


class _BothReadFirst:
    """Forces: session p0 reads the file for its add, then p1 runs its whole add, then p0."""

    def __init__(self) -> None:
        self.p0_read = False

    def choose(self, decision: Decision) -> str:
        if not self.p0_read:
            parked = decision.calls.get("p0")
            call = parked.call if parked is not None else None
            if "p0" in decision.enabled and not (
                call is not None and call.name == "read" and call.op == 1 and call.kind == "data"
            ):
                return "p0"
            if "p0" in decision.enabled:
                self.p0_read = True
                return "p0"  # the read itself
        return "p1" if "p1" in decision.enabled else decision.enabled[0]


def test_a_schedule_is_followed_exactly(tmp_path: Path) -> None:
    backend = _backend(REFERENCE)
    first = execute(backend, _mk(tmp_path / "a"), _adders(), keep_running, tampering(backend))
    assert first.finding is None
    # keep_running: p0 makes every call of its session before p1 starts.
    processes = [step.process for step in first.run.steps]
    assert processes == sorted(processes)
    again = execute(
        backend, _mk(tmp_path / "b"), _adders(), follow(first.schedule), tampering(backend)
    )
    calls = [(s.process, s.call.name, s.call.kind) for s in again.run.steps]
    assert calls == [(s.process, s.call.name, s.call.kind) for s in first.run.steps]


def _mk(path: Path) -> Path:
    path.mkdir()
    return path


def test_the_lock_model_keeps_a_waiting_session_parked(tmp_path: Path) -> None:
    """While p0 holds MEMORY.md.lock, p1 parked at its flock is not enabled (LOCK-1)."""
    backend = _backend(REFERENCE)
    root = _mk(tmp_path / "r")
    execution = execute(backend, root, _adders(), _BothReadFirst().choose, tampering(backend))
    assert execution.finding is None
    steps, enabled = execution.run.steps, execution.run.enabled
    waits = [
        number
        for number, who in enumerate(enabled)
        if who == ("p0",)
        and any(s.process == "p1" for s in steps[number:])
        and next(s for s in steps[number:] if s.process == "p1").call.name == "flock"
    ]
    assert waits, "p1 was never kept waiting at its flock while p0 held the lock"


def test_both_sessions_read_before_either_writes_loses_an_add(tmp_path: Path) -> None:
    """The forced interleaving of the issue: a store that reads before it locks loses an add."""
    chooser = _BothReadFirst()
    backend = _backend("open_read_before_lock")
    root = _mk(tmp_path / "r")
    execution = execute(backend, root, _adders(), chooser.choose, tampering(backend))
    assert execution.finding is not None and execution.finding.clause == "LOCK-3"
    steps = execution.run.steps
    reads = [s.number for s in steps if s.call.name == "read" and s.call.kind == "data"]
    renames = [s.number for s in steps if s.call.name in ("replace", "rename")]
    assert len(reads) >= 2 and reads[1] < renames[0], "both reads come before the first write"


@pytest.mark.parametrize(
    "broken", ["open_no_lock", "open_read_before_lock", "open_loaded_list", "open_in_place"]
)
def test_exploration_catches_and_the_repro_replays_10_of_10(
    broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = _backend(broken)
    failing = _first_failure(backend, tmp_path)
    assert preemptions(failing.schedule, failing.run.enabled) <= 1
    path = save_repro(tmp_path / "repro.json", repro_of(failing, backend.spec, "test"))
    repro = load_repro(path)
    outcomes = [replay(repro, backend) for _ in range(10)]
    assert [o.diverged for o in outcomes] == [""] * 10
    assert all(o.reproduced for o in outcomes), "every replay fails again"
    clauses = {o.execution.finding.clause for o in outcomes if o.execution and o.execution.finding}
    assert failing.finding is not None and clauses == {failing.finding.clause}
    assert main(["repro", str(path), "--times", "2"]) == 1
    printed = capsys.readouterr().out
    assert "reproduced 2/2" in printed and "step  p0" in printed


def test_the_reference_passes_every_schedule_with_one_switch(tmp_path: Path) -> None:
    backend = _backend(REFERENCE)
    summary = Exploration()
    roots = iter(range(10_000))

    def run_one(choose: Chooser) -> Execution:
        root = _mk(tmp_path / f"r{next(roots)}")
        return execute(backend, root, _adders(), choose, tampering(backend))

    for execution in explore(run_one, 1, 500, summary):
        assert execution.finding is None, render_interleaving(execution)
    assert summary.complete and summary.runs >= 20


def test_a_fixed_repro_passes_and_exits_0(tmp_path: Path, capsys: Any) -> None:
    failing = _first_failure(_backend("open_no_lock"), tmp_path)
    spec = "tests.backends.procs:open_no_lock"
    path = save_repro(tmp_path / "repro.json", repro_of(failing, spec, "test"))
    assert main(["repro", str(path), "--backend", REFERENCE]) == 0
    out = capsys.readouterr().out
    # The reference takes a lock, so the racy store's schedule cannot be followed on it.
    assert "diverged" in out and "reproduced 0/1" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("memspec"), "marker"),
        (lambda r: r.update(version=9), "version 9"),
        (lambda r: r.update(schedule=["p7"]), "schedule"),
        (lambda r: r.update(files={"memory": "zz"}), "hex"),
        (lambda r: r.update(sessions=[{"name": "p0", "operations": [{"op": "drop"}]}]), "op"),
        (lambda r: r.update(limits={"memory": -1}), "limits"),
    ],
)
def test_a_broken_repro_file_is_a_usage_error(
    tmp_path: Path, capsys: Any, change: Any, message: str
) -> None:
    good = repro_of(Execution(_adders(), _empty_run(), [], None), REFERENCE, "test").to_json()
    change(good)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(good))
    assert main(["repro", str(path)]) == 2
    assert message in capsys.readouterr().err


def _empty_run() -> Any:
    from memspec.conformance.schedule.schedule import ScheduledRun

    return ScheduledRun([], [], ["p0"], [("p0",)])


def preemption_bounded_schedules(ctx: CheckContext) -> None:
    run_in_budget(all_checks()["interleavings.preemption_bounded_schedules"], ctx)


def random_schedules(ctx: CheckContext) -> None:
    run_in_budget(all_checks()["interleavings.random_schedules"], ctx)


def test_certify_checks_pass_on_the_reference_and_save_repros_on_racy_stores(
    tmp_path: Path,
) -> None:
    def context(name: str, where: Path) -> CheckContext:
        root, scratch = _mk(where / "root"), _mk(where / "scratch")
        return CheckContext(_backend(name), root, scratch, PROFILES["smoke"], artifacts=where)

    preemption_bounded_schedules(context(REFERENCE, _mk(tmp_path / "ref")))
    random_schedules(context(REFERENCE, _mk(tmp_path / "ref2")))
    racy = _mk(tmp_path / "racy")
    with pytest.raises(Violation, match=r"(?s)LOCK-3: .*\n\nReplay it with: memspec repro "):
        preemption_bounded_schedules(context("open_no_lock", racy))
    (saved,) = racy.glob("repro-*.json")
    assert replay(load_repro(saved)).reproduced


def test_random_schedules_catch_a_lock_on_the_data_file_and_replay_it(tmp_path: Path) -> None:
    """A flock on MEMORY.md itself needs a session to lock the renamed file while another holds
    the old inode: Hypothesis-drawn schedules of three sessions find it; the repro is exact."""
    where = _mk(tmp_path / "w")
    context = CheckContext(
        _backend("open_data_file_lock"),
        _mk(where / "root"),
        _mk(where / "scratch"),
        PROFILES["ci"],
        artifacts=where,
    )
    with pytest.raises(Violation, match=r"(?s)(LOCK-3|ATOMIC-2): .*Replay it with") as failed:
        random_schedules(context)
    # the verdict blames the clause the checker named, not every clause the check cites
    assert verdict_of(failed.value).blamed in ("LOCK-3", "ATOMIC-2")
    (saved,) = where.glob("repro-random_schedules.json")
    repro = load_repro(saved)
    assert repro.seed is not None and len(repro.program.sessions) == 3
    assert all(replay(repro).reproduced for _ in range(10))


def test_a_race_found_by_random_schedules_ends_the_search(tmp_path: Path) -> None:
    """Under ci the first failing schedule ends the search: Hypothesis replays it once, and that
    is all (shrinking a schedule costs a whole run per step: it ran on to the budget's share,
    45 s of a 51 s certification). The verdict, the repro file and the reproduction are those of
    the race as found."""
    where = _mk(tmp_path / "w")
    context = CheckContext(
        _backend("open_no_lock"),
        _mk(where / "root"),
        _mk(where / "scratch"),
        PROFILES["ci"],
        artifacts=where,
    )
    with pytest.raises(Violation) as failed:
        random_schedules(context)
    figures = context.figures
    first = int(figures[FIRST_FAILING])
    # one run after the first failing schedule: its replay
    assert figures[SCHEDULES_RUN] == first + 1, figures
    assert verdict_of(failed.value).blamed == "LOCK-3"
    message = str(failed.value)
    assert "\n\nReplay it with: memspec repro " in message and "Draw 1:" not in message
    assert message.endswith(
        "Reproduce with: memspec certify --backend tests.backends.procs:open_no_lock "
        "-k interleavings.random_schedules"
    ), message[-300:]
    (saved,) = where.glob("repro-random_schedules.json")
    repro = load_repro(saved)
    assert repro.failure is not None and repro.failure["clause"] == "LOCK-3"
    assert replay(repro).reproduced


def test_a_thorough_exploration_cut_after_cis_passes_and_ci_still_catches(tmp_path: Path) -> None:
    # Under thorough the exploration of ci runs first: stopped at its budget after it, the
    # check passes, saying so; a racy store still fails within ci's exploration.
    import time

    from memspec.conformance.core.budgets import Allowance

    check = all_checks()["interleavings.preemption_bounded_schedules"]

    def context(name: str, where: Path) -> CheckContext:
        spent = Allowance(check.id, "thorough", 1.0, time.monotonic(), fixed_work=False)
        root, scratch = _mk(where / "root"), _mk(where / "scratch")
        return CheckContext(
            _backend(name), root, scratch, PROFILES["thorough"], artifacts=where, allowance=spent
        )

    passing = context(REFERENCE, _mk(tmp_path / "ref"))
    check.function(passing)
    # what happened: the hunt stopped itself at three quarters of its budget
    hunt = passing.figures["hunt after ci's exploration"]
    assert re.fullmatch(
        r"stopped itself at 3/4 of its 1 s budget \([0-9.]+ s, profile thorough\)", str(hunt)
    )
    assert passing.figures["ci's exploration"].endswith("schedules, bound 1")
    assert passing.figures["every schedule within the bound run"] is False
    with pytest.raises(AssertionError, match="LOCK-3"):
        check.function(context("open_no_lock", _mk(tmp_path / "racy")))
