"""The crash-state suite can fail: each persistence model catches the defects it should.

The stores of ``tests/backends/procs.py`` each break one step of the write protocol. Recorded
by interposition, their add, replace and remove are replayed under each model of
:mod:`memspec.conformance.crash.persistence`, and every crash state is judged as the three checks of
:mod:`memspec.conformance.checks.crashstates` judge it: the files are old or new
(``crash_states_are_old_or_new``, CRASH-1/CRASH-4), the next add recovers
(``every_crash_state_recovers``, CRASH-2/CRASH-3), acknowledged mutations survive
(``acknowledged_mutations_survive_power_loss``, CRASH-5). A dash is a pass:

Columns: O = old or new, R = recovery, D = durable; pc = process-crash, pw = posix-weak,
e4 = ext4-ordered.

======================  =======  =======  =======  ====  =======  ====  =======  =======
store                   O pc     O pw     O e4     R pc  R pw     R e4  D pw     D e4
======================  =======  =======  =======  ====  =======  ====  =======  =======
reference               —        —        —        —     —        —     —        —
``open_in_place``       CRASH-1  CRASH-4  CRASH-4  —     —        —     CRASH-5  CRASH-5
``open_no_temp_fsync``  —        CRASH-4  —        —     —        —     CRASH-5  —
``open_no_dir_fsync``   —        —        —        —     —        —     CRASH-5  CRASH-5
``open_fixed_temp``     —        —        —        —     CRASH-2  —     —        —
======================  =======  =======  =======  ====  =======  ====  =======  =======

So a process crash never shows a missing ``fsync`` (the page cache survives it); ext4's
``auto_da_alloc`` hides a missing fsync of the temp when the rename replaces an existing file,
which is why that defect goes unnoticed on ext4 and loses data on other file systems; and a
fixed temp name is caught only where a rename may persist halfway (posix-weak), leaving the temp
name linked to the live file for the next writer to truncate. (Writing in place is ATOMIC-2's
business; the recovery check reports it only through a name a crash left.) Each failure names
the step at fault. Recorded by strace instead, for a ``--backend-cmd`` backend:
``tests/integration/test_strace.py``; the models themselves on traces written by hand:
``tests/unit/test_persistence.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memspec.conformance.checks import crashstates
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.crash.persistence import MODELS
from memspec.conformance.tamper import strace
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import Kind, Unverified, verdict_of
from tests.budgeted import run_in_budget

REFERENCE = "memspec.reference_impl:open_store"
PROCS = "tests.backends.procs"
POWER_LOSS = ("posix-weak", "ext4-ordered")
JUDGEMENTS = (
    (crashstates.OLD_OR_NEW, MODELS),
    (crashstates.RECOVERY, MODELS),
    (crashstates.DURABLE, POWER_LOSS),
)
_ = None
CAUGHT = {
    # store: old or new (3 models), recovery (3 models), durable (posix-weak, ext4-ordered)
    REFERENCE: (_, _, _, _, _, _, _, _),
    f"{PROCS}:open_in_place": ("CRASH-1", "CRASH-4", "CRASH-4", _, _, _, "CRASH-5", "CRASH-5"),
    f"{PROCS}:open_no_temp_fsync": (_, "CRASH-4", _, _, _, _, "CRASH-5", _),
    f"{PROCS}:open_no_dir_fsync": (_, _, _, _, _, _, "CRASH-5", "CRASH-5"),
    f"{PROCS}:open_fixed_temp": (_, _, _, _, "CRASH-2", _, _, _),
}
CHECK_NAMES = (
    "crash_states_are_old_or_new",
    "every_crash_state_recovers",
    "acknowledged_mutations_survive_power_loss",
)
AT_FAULT = {
    "open_in_place": "the truncate at step 8 may persist without the data written at step",
    "open_no_temp_fsync": "the rename at step 11 may persist before the data written at step 9: "
    "fsync the temp file",
    "open_no_dir_fsync": "onto MEMORY.md may be lost: the acknowledged add <a1> is lost on "
    "power loss; fsync the directory",
    "open_fixed_temp": "the rename at step 12 may persist halfway, MEMORY.md.tmp and MEMORY.md",
}


def _context(tmp_path: Path, backend: object, profile: str = "ci") -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(parents=True)
    scratch.mkdir()
    return CheckContext(backend, root, scratch, PROFILES[profile])


# -- the checks against stores ------------------------------------------------------------------


@pytest.mark.parametrize("store", list(CAUGHT), ids=lambda s: s.split(":")[1])
def test_each_model_catches_its_defects(store: str, tmp_path: Path) -> None:
    """Each store fails exactly the models of the table, naming the step at fault."""
    ctx = _context(tmp_path, InProcessBackend(store))
    recording = crashstates.record(ctx, "batch" in crashstates._setup(ctx))
    verdicts = []
    for judgement, models in JUDGEMENTS:
        for model in models:
            failure, figures = crashstates.judge_model(ctx, recording, model, judgement)
            assert figures["states"] >= figures["judged"] >= 1
            verdicts.append(failure.clause if failure else None)
            if failure:
                text = failure.text
                assert f"under {model}" in text and "recorded by interposition" in text
                assert AT_FAULT[store.split(":")[1]] in text, failure
    assert tuple(verdicts) == CAUGHT[store]


def test_reference_passes_the_checks(tmp_path: Path) -> None:
    """The reference passes the three registered checks at ci, within their budgets, with the
    figures reported."""
    for number, name in enumerate(CHECK_NAMES):
        ctx = _context(tmp_path / str(number), InProcessBackend(REFERENCE))
        run_in_budget(CHECKS[f"crashstates.{name}"], ctx)
        assert any(key.endswith("posix-weak states") for key in ctx.figures)
        assert ctx.figures[next(k for k in ctx.figures if k.endswith("recorder"))] == (
            "interposition"
        )


def test_the_check_fails_with_its_clause(tmp_path: Path) -> None:
    """Through the registry, the no-temp-fsync store fails with CRASH-4 first."""
    ctx = _context(tmp_path, InProcessBackend(f"{PROCS}:open_no_temp_fsync"))
    with pytest.raises(AssertionError, match=r"^CRASH-4: under posix-weak"):
        run_in_budget(CHECKS["crashstates.crash_states_are_old_or_new"], ctx)


def test_a_batch_cut_between_its_items_is_the_batch_clause(tmp_path: Path) -> None:
    """A store that applies a batch item by item, writing after each, leaves a state with some
    of its items when a crash cuts it: a batch seen half done (BATCH-2), not a torn file
    (CRASH-1) nor an unsynced one (CRASH-4)."""
    ctx = _context(tmp_path, InProcessBackend("tests.backends.wrappers:batch_item_by_item"))
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS["crashstates.crash_states_are_old_or_new"], ctx)
    assert {f.clause for f in verdict_of(failure.value).failures} == {"BATCH-2"}, failure.value


@pytest.mark.parametrize(
    "name", ["crashstates.crash_states_are_old_or_new", "crash.kill_at_random_moments"]
)
def test_a_mutation_answered_unlike_the_model_leaves_the_crash_clauses_unverified(
    name: str, tmp_path: Path
) -> None:
    """A store whose replace wrongly finds nothing breaks MATCH's clauses, not the crash
    clauses: the crash checks cannot tell which states a crash may leave, and say so as
    ``unverified`` (a third-party port's CRASH-4 was failed this way)."""
    ctx = _context(tmp_path, InProcessBackend("tests.backends.wrappers:replace_finds_nothing"))
    with pytest.raises(Unverified, match="E_NOMATCH") as stopped:
        run_in_budget(CHECKS[name], ctx)
    assert verdict_of(stopped.value).kind == Kind.UNVERIFIED


def test_without_strace_a_command_backend_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No strace: the check cannot judge a command backend, and says why (its clauses read not
    verified, which holds the level back, never "not verifiable")."""
    strace.strace_problem.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    try:
        ctx = _context(tmp_path, CommandBackend(f"memspec serve --backend {REFERENCE}"))
        with pytest.raises(Unverified, match="strace is not installed"):
            crashstates.record(ctx, False)
    finally:
        strace.strace_problem.cache_clear()
