"""The two interleaving checks drive a ``--backend-cmd`` backend through strace, and can fail.

``interleavings.preemption_bounded_schedules`` and ``interleavings.random_schedules`` stop each
backend process after every call on the root and resume the one whose turn it is
(``conformance/tamper/stops.py``); a backend whose lock is off the root (an abstract socket)
is stopped at every call. The racy stores of ``tests/backends/procs.py`` (no lock; a lock on
the data file the rename replaces; a socket lock taken after the read), served by
``memspec serve``, fail with LOCK-3,
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
from memspec.conformance.commands.cli import main
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.schedule.exploration import Program, execute
from memspec.conformance.schedule.schedule import Decision
from memspec.conformance.tamper import strace as tamper
from memspec.conformance.tamper.calls import CallRecord
from memspec.conformance.tamper.capability import tampering
from memspec.conformance.tamper.stops import (
    off_root_locks,
    returned,
    unrecorded_call,
    unschedulable_locks,
)
from memspec.conformance.tamper.strace import strace_problem
from memspec.conformance.transport.jsonlines import CommandBackend
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

pytestmark = [
    pytest.mark.skipif(strace_problem() is not None, reason=str(strace_problem())),
    pytest.mark.usefixtures("unmeasured_backends"),
]


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
    from memspec.conformance.tamper import strace as tamper

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
def test_node_backend_passes(name: str, tmp_path: Path) -> None:
    """The Node.js backend locks an abstract socket, off the root: its processes are stopped at
    every call, the lock's bind among them, and both checks pass."""
    assert off_root_locks(CommandBackend(NODE))[0].startswith("@memspec-node-lock/")
    run_in_budget(CHECKS[name], _context(tmp_path, NODE))


def test_a_store_locking_off_the_root_is_scheduled(tmp_path: Path) -> None:
    """A store whose lock is an abstract socket is scheduled at every call and its lock's
    bind: done right it passes; reading before it locks, it loses an update (LOCK-3)."""
    sound = CommandBackend(f"{SERVE} {PROCS}:open_socket_lock")
    assert off_root_locks(sound)[0].startswith("@memspec-test-lock/")
    assert off_root_locks(CommandBackend(REFERENCE)) == ()
    run_in_budget(CHECKS[TWO[0]], _context(tmp_path / "sound", sound.command))
    with pytest.raises(AssertionError) as failure:
        racy = f"{SERVE} {PROCS}:open_socket_lock_after_read"
        run_in_budget(CHECKS[TWO[0]], _context(tmp_path / "racy", racy))
    assert str(failure.value).startswith("LOCK-3"), str(failure.value)


def test_a_session_waiting_for_a_socket_lock_is_scheduled(tmp_path: Path) -> None:
    """Session p0 takes its socket lock, then p1 is preferred: p1's bind finds the lock taken,
    a step that waited, so p0 goes on, and p1 binds once p0 has released it. No step waits for
    a timeout, and both adds are kept."""

    def p1_once_p0_locked(decision: Decision) -> str:
        parked = decision.calls.get("p0")
        after = parked.after if parked is not None else None
        if after is not None and after.name == "bind" and not after.error:
            locked.append(True)
        wanted = "p1" if locked else "p0"
        return wanted if wanted in decision.enabled else decision.enabled[0]

    locked: list[bool] = []
    root = tmp_path / "root"
    root.mkdir()
    program = Program(
        tuple(
            (f"p{n}", ({"op": "load"}, {"op": "add", "target": "memory", "content": f"Entry {n}"}))
            for n in range(2)
        )
    )
    backend = CommandBackend(f"{SERVE} {PROCS}:open_socket_lock")
    execution = execute(backend, root, program, p1_once_p0_locked, tampering(backend))
    binds = [
        (step.process, step.call.error) for step in execution.run.steps if step.call.name == "bind"
    ]
    assert ("p1", "EADDRINUSE") in binds and binds[-1] == ("p1", None), binds
    assert execution.run.notes == [] and execution.finding is None


def test_a_call_without_a_record_is_read_from_its_own_line() -> None:
    lines = [
        "7 lseek(5</r/MEMORY.md>, 0, SEEK_CUR) = 0",
        '8 write(1<pipe:[9]>, "{}\\n", 3) = 3',
        "7 --- SIGSTOP {si_signo=SIGSTOP, si_code=SI_KERNEL} ---",
        "7 --- stopped by SIGSTOP ---",
    ]
    own = [line for line in reversed(lines) if line.startswith("7 ")]
    call = unrecorded_call(own)
    assert (call.name, call.path) == ("lseek", "/r/MEMORY.md")
    assert unrecorded_call(reversed(lines)).name == "write"
    assert unrecorded_call([]).name == "call"


def test_a_lock_found_taken_waited() -> None:
    assert returned(CallRecord("bind", "@lock", error="EADDRINUSE")).waited
    assert returned(CallRecord("flock", "/r/MEMORY.md.lock", error="EAGAIN")).waited
    assert returned(CallRecord("flock", "/r/MEMORY.md.lock", error="ERESTARTSYS")).waited
    failed = returned(CallRecord("open", "/r/MEMORY.md", error="EACCES"))
    assert failed.failed and not failed.waited


def test_only_locks_off_the_root_are_unschedulable() -> None:
    records = [
        CallRecord("flock", "/r/MEMORY.md.lock"),
        CallRecord("lockf", "/r/MEMORY.md"),
        CallRecord("bind", "@memspec-node-lock/1:2/MEMORY.md"),
        CallRecord("flock", "/r/other.lock", error="EWOULDBLOCK"),
        CallRecord("write", "/r/elsewhere"),
    ]
    assert unschedulable_locks(records) == ["@memspec-node-lock/1:2/MEMORY.md"]
