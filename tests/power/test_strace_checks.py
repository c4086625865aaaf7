"""The six call-level checks judge a ``--backend-cmd`` backend through strace, and can fail.

Faults, kill at each write step, the durability trace and the lock's span run a command
backend under strace (``conformance/tamper/strace.py``). Each store of
``tests/backends/procs.py`` with one defect, served by ``memspec serve``, fails the check that
guards against it with the clause it breaks — the same stores and clauses as by interposition
(``test_process_checks.py``); the reference through ``memspec serve`` and the Node.js backend
pass all six. Skipped, with the reason, where strace cannot run (or node is missing).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import memspec.conformance.checks  # noqa: F401  (registers the checks)
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.tamper import strace as tamper
from memspec.conformance.tamper.strace import strace_problem
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import NotApplicable
from tests.budgeted import run_in_budget

PROCS = "tests.backends.procs"
SERVE = "memspec serve --backend"
REFERENCE = f"{SERVE} memspec.reference_impl:open_store"
NODE = "node backends/node/memspec_backend.js"
SIX = (
    "faults.read_errors_are_not_empty",
    "faults.failed_write_keeps_old_file",
    "faults.failed_dir_sync_is_acknowledged",
    "crash.kill_at_each_write_step",
    "durability.write_protocol_is_durable",
    "locking.lock_spans_read_to_rename",
)
CAUGHT = [
    # (factory in tests/backends/procs.py, check, clause the message opens with)
    ("open_eio_as_empty", "faults.read_errors_are_not_empty", "READ-7"),
    ("open_ok_on_write_error", "faults.failed_write_keeps_old_file", "ATOMIC-4"),
    ("open_keeps_failed_temp", "faults.failed_write_keeps_old_file", "ATOMIC-4"),
    ("open_in_place", "faults.failed_write_keeps_old_file", "ATOMIC-4"),
    ("open_dir_sync_error_is_io", "faults.failed_dir_sync_is_acknowledged", "ATOMIC-3"),
    ("open_in_place", "crash.kill_at_each_write_step", "CRASH-1"),
    ("open_keeps_temps", "crash.kill_at_each_write_step", "CRASH-2"),
    ("open_marker_lock", "crash.kill_at_each_write_step", "CRASH-3"),
    ("open_no_temp_fsync", "durability.write_protocol_is_durable", "ATOMIC-1"),
    ("open_no_dir_fsync", "durability.write_protocol_is_durable", "ATOMIC-3"),
    ("open_fixed_temp", "durability.write_protocol_is_durable", "ATOMIC-1"),
    ("open_in_place", "durability.write_protocol_is_durable", "ATOMIC-1"),
    ("open_no_lock", "locking.lock_spans_read_to_rename", "LOCK-1"),
    ("open_data_file_lock", "locking.lock_spans_read_to_rename", "LOCK-1"),
    ("open_read_before_lock", "locking.lock_spans_read_to_rename", "LOCK-2"),
    ("open_backup_sync_error_is_io", "faults.failed_dir_sync_is_acknowledged", "ATOMIC-3"),
]

pytestmark = [
    pytest.mark.skipif(strace_problem() is not None, reason=str(strace_problem())),
    pytest.mark.usefixtures("unmeasured_backends"),
]


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memspec serve`` imports the broken stores from the directory it runs in: this
    checkout (its path is not set, as a path set ahead of the standard library's would make
    the backend's calls vary with the directory's changes)."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def _context(tmp_path: Path, command: str) -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(parents=True)
    scratch.mkdir()
    return CheckContext(CommandBackend(command), root, scratch, PROFILES["ci"])


@pytest.mark.parametrize("name", SIX)
def test_reference_passes_through_serve(name: str, tmp_path: Path) -> None:
    """The reference, served over JSON Lines and traced by strace, passes each check."""
    run_in_budget(CHECKS[name], _context(tmp_path, REFERENCE))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("name", SIX)
def test_node_backend_passes(name: str, tmp_path: Path) -> None:
    """The Node.js backend (no flock: an abstract-socket lock) passes each check. A kill that
    strace could not place (not applicable, never a verdict) is retried once: under load, a
    Node process's calls have been seen to differ between its recorded and its killed run."""
    try:
        run_in_budget(CHECKS[name], _context(tmp_path, NODE))
    except NotApplicable:
        run_in_budget(CHECKS[name], _context(tmp_path / "again", NODE))


@pytest.mark.parametrize(
    ("factory", "name", "clause"), CAUGHT, ids=[f"{f}-{n}" for f, n, _ in CAUGHT]
)
def test_broken_store_is_caught_through_strace(
    factory: str, name: str, clause: str, tmp_path: Path
) -> None:
    """The store with one defect, served as a command, fails the check on its clause."""
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS[name], _context(tmp_path, f"{SERVE} {PROCS}:{factory}"))
    assert str(failure.value).startswith(clause), str(failure.value)


STARTED = [CAUGHT[0], CAUGHT[1], CAUGHT[5], CAUGHT[8], CAUGHT[12]]
"""One defect per kind of strace run: an error, a kill, the durability trace, the lock span."""


@pytest.mark.parametrize(
    ("factory", "name", "clause"), STARTED, ids=[f"{f}-{n}" for f, n, _ in STARTED]
)
def test_where_strace_cannot_attach_it_starts_the_backend(
    factory: str, name: str, clause: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ptrace forbids attaching, strace starts each process: the same defects are caught
    on the same clauses."""
    monkeypatch.setattr(tamper, "attach_problem", lambda: "ptrace: Operation not permitted")
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS[name], _context(tmp_path, f"{SERVE} {PROCS}:{factory}"))
    assert str(failure.value).startswith(clause), str(failure.value)
