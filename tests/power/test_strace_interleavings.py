"""The two interleaving checks drive a ``--backend-cmd`` backend through strace, and can fail.

``interleavings.preemption_bounded_schedules`` and ``interleavings.random_schedules`` stop each
backend process after every call on the root and resume the one whose turn it is
(``conformance/schedule/stops.py``). The racy stores of ``tests/backends/procs.py`` (no lock; a
lock on the data file the rename replaces), served by ``memspec serve``, fail with LOCK-3,
and ``memspec repro`` replays the saved schedule of the command; the reference through
``memspec serve`` and the Node.js backend pass. Skipped, with the reason, where strace cannot run
(or node is missing).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import memspec.conformance.checks  # registers the checks
import memspec.fuzz.interleavings  # noqa: F401  (registers the random-schedule check)
from memspec.conformance.cli import main
from memspec.conformance.crash import tamper
from memspec.conformance.crash.tamper import strace_problem
from memspec.conformance.jsonlines import CommandBackend
from memspec.conformance.profiles import PROFILES
from memspec.conformance.registry import CHECKS, CheckContext, NotApplicable
from memspec.conformance.schedule.stops import unschedulable_locks
from tests.budgeted import run_in_budget

SERVE = "memspec serve --backend"
PROCS = "tests.backends.procs"
REFERENCE = f"{SERVE} memspec.reference_impl:open_store"
NODE = "node backends/node/memspec_backend.js"
TWO = ("interleavings.preemption_bounded_schedules", "interleavings.random_schedules")
CAUGHT = [
    # (racy store of tests/backends/procs.py, check). As by interposition, a lock on the data
    # file needs two adds by one session to be caught systematically (thorough), so at ci it
    # is the random schedules that find it.
    ("open_no_lock", TWO[0]),
    ("open_no_lock", TWO[1]),
    ("open_data_file_lock", TWO[1]),
]

pytestmark = pytest.mark.skipif(strace_problem() is not None, reason=str(strace_problem()))


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memspec serve`` imports the racy stores from the directory it runs in: this checkout."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def _context(tmp_path: Path, command: str, profile: str = "ci") -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(parents=True)
    scratch.mkdir()
    return CheckContext(CommandBackend(command), root, scratch, PROFILES[profile])


@pytest.mark.parametrize(("factory", "name"), CAUGHT, ids=[f"{f}-{n}" for f, n in CAUGHT])
def test_racy_store_served_as_a_command_fails(factory: str, name: str, tmp_path: Path) -> None:
    """A store with a lost update, served as a command, fails the check with LOCK-3."""
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS[name], _context(tmp_path, f"{SERVE} tests.backends.procs:{factory}"))
    assert str(failure.value).startswith("LOCK-3"), str(failure.value)
    assert "memspec repro" in str(failure.value)


def test_where_strace_cannot_attach_the_race_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ptrace forbids attaching, each session starts under strace, and the lost update
    of a store without a lock is found as it is when strace attaches."""
    monkeypatch.setattr(tamper, "attach_problem", lambda: "ptrace: Operation not permitted")
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS[TWO[0]], _context(tmp_path, f"{SERVE} {PROCS}:open_no_lock"))
    assert str(failure.value).startswith("LOCK-3"), str(failure.value)


def test_repro_of_a_command_replays_the_lost_update(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repro file names the command and the schedule; ``memspec repro`` replays it."""
    name = "interleavings.preemption_bounded_schedules"
    command = f"{SERVE} tests.backends.procs:open_no_lock"
    with pytest.raises(AssertionError) as failure:
        run_in_budget(CHECKS[name], _context(tmp_path, command))
    saved = re.search(r"memspec repro (\S+)", str(failure.value))
    assert saved is not None
    record = json.loads(Path(saved.group(1)).read_text(encoding="utf-8"))
    assert record["backend"] is None and record["backend_cmd"] == command, record
    assert record["schedule"] and record["check"] == name
    assert main(["repro", saved.group(1), "--times", "2"]) == 1
    out = capsys.readouterr().out
    assert f"replaying {saved.group(1)}: {command}" in out, out
    assert out.rstrip().endswith("reproduced 2/2"), out


def test_repro_of_a_command_without_strace_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where strace cannot run, replaying a command's repro is an error naming the reason."""
    from memspec.conformance.crash import tamper

    repro = tmp_path / "repro.json"
    sessions = [{"name": "p0", "operations": [{"op": "load"}]}]
    repro.write_text(
        json.dumps(
            {"memspec": "repro", "version": 1, "backend": None, "backend_cmd": REFERENCE,
             "limits": {"memory": 2200, "user": 1375}, "files": {}, "sessions": sessions,
             "schedule": ["p0"]}
        )
    )  # fmt: skip
    monkeypatch.setattr(tamper, "strace_problem", lambda: "strace is not installed, say")
    assert main(["repro", str(repro)]) == 2
    assert "strace is not installed, say" in capsys.readouterr().err


@pytest.mark.parametrize("name", TWO)
def test_reference_passes_through_serve(name: str, tmp_path: Path) -> None:
    """The reference, served over JSON Lines and scheduled through strace, passes."""
    run_in_budget(CHECKS[name], _context(tmp_path, REFERENCE))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("name", TWO)
def test_a_lock_strace_cannot_stop_at_is_not_scheduled(name: str, tmp_path: Path) -> None:
    """The Node.js backend locks an abstract socket, not a file of the root: a session waiting
    for it makes no call strace stops at, so no schedule would replay; both checks say so
    instead of judging by a timeout."""
    with pytest.raises(NotApplicable, match="@memspec-node-lock"):
        run_in_budget(CHECKS[name], _context(tmp_path, NODE))


def test_only_locks_off_the_root_are_unschedulable() -> None:
    records = [
        {"name": "flock", "path": "/r/MEMORY.md.lock"},
        {"name": "lockf", "path": "/r/MEMORY.md"},
        {"name": "bind", "path": "@memspec-node-lock/1:2/MEMORY.md"},
        {"name": "flock", "path": "/r/other.lock", "error": "EWOULDBLOCK"},
        {"name": "write", "path": "/r/elsewhere"},
    ]
    assert unschedulable_locks(records) == ["@memspec-node-lock/1:2/MEMORY.md"]
