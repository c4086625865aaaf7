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
the step at fault. The strace path is exercised with the Node.js backend (which passes) and with
``memspec serve`` over the no-temp-fsync store (which fails the same way as in-process).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from memspec.conformance.backend import InProcessBackend
from memspec.conformance.checks import crashstates
from memspec.conformance.crash.fstrace import calls_from_strace, ops_from_calls
from memspec.conformance.crash.persistence import MODELS, Op, crash_states, explain, replay
from memspec.conformance.jsonlines import CommandBackend
from memspec.conformance.profiles import PROFILES
from memspec.conformance.registry import CHECKS, CheckContext, NotApplicable

REFERENCE = "memspec.reference_impl:open_store"
PROCS = "tests.backends.procs"
NODE = "node backends/node/memspec_backend.js"
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
    "open_in_place": "the truncate at step 6 may persist without the data written at step",
    "open_no_temp_fsync": "the rename at step 9 may persist before the data written at step 7: "
    "fsync the temp file",
    "open_no_dir_fsync": "onto MEMORY.md may be lost: the acknowledged add <a1> is lost on "
    "power loss; fsync the directory",
    "open_fixed_temp": "the rename at step 10 may persist halfway, MEMORY.md.tmp and MEMORY.md",
}


def _context(tmp_path: Path, backend: object, profile: str = "ci") -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(parents=True)
    scratch.mkdir()
    return CheckContext(backend, root, scratch, PROFILES[profile])


# -- the models, on traces written by hand -----------------------------------------------------

OLD = {"MEMORY.md": (1, b"old")}
TEMP_THEN_RENAME = [
    Op("create", step=1, ino=2, name=".tmp"),
    Op("write", step=2, ino=2, data=b"new"),
    Op("rename", step=3, ino=2, name="MEMORY.md", source=".tmp", replaced=1),
    Op("ack"),
]


def _contents(states: list) -> set[bytes | None]:
    return {dict((n, d) for n, _, d in s.files).get("MEMORY.md") for s in states}


def test_process_crash_states_are_the_prefixes() -> None:
    """Under process-crash every issued operation persists: the states are the prefixes."""
    states = crash_states(OLD, TEMP_THEN_RENAME, "process-crash").states
    assert _contents(states) == {b"old", b"new"}
    assert [s.acknowledged for s in states][-1] == 1 and not states[-1].in_flight


def test_posix_weak_lets_a_rename_persist_before_its_data() -> None:
    """Without an fsync of the temp, posix-weak allows an empty MEMORY.md after the rename,
    and says which step is at fault."""
    states = crash_states(OLD, TEMP_THEN_RENAME, "posix-weak").states
    assert {b"old", b"new", b"", b"n"} <= _contents(states)
    empty = next(s for s in states if dict((n, d) for n, _, d in s.files)["MEMORY.md"] == b"")
    assert explain(empty, TEMP_THEN_RENAME, OLD) == [
        "the rename at step 3 may persist before the data written at step 2: fsync the temp "
        "file .tmp before renaming it (ATOMIC-1)"
    ]
    synced = [*TEMP_THEN_RENAME[:2], Op("fsync", step=3, ino=2), *TEMP_THEN_RENAME[2:]]
    assert b"" not in _contents(crash_states(OLD, synced, "posix-weak").states)


def test_posix_weak_may_persist_a_rename_halfway() -> None:
    """posix-weak keeps a state where both names link the renamed file; ext4 never does."""

    def linked(model: str) -> bool:
        states = crash_states(OLD, TEMP_THEN_RENAME, model).states
        return any(len({ino for _, ino, _ in s.files}) < len(s.files) for s in states)

    assert linked("posix-weak") and not linked("ext4-ordered")


def test_ext4_auto_da_alloc_covers_only_a_rename_over_a_file() -> None:
    """ext4-ordered: a rename over an existing file carries its data; onto a new name it does
    not, and a truncate in place can leave an empty file."""
    assert b"" not in _contents(crash_states(OLD, TEMP_THEN_RENAME, "ext4-ordered").states)
    fresh = [
        op if op.kind != "rename" else Op(**{**op.__dict__, "replaced": None})
        for op in TEMP_THEN_RENAME
    ]
    assert b"" in _contents(crash_states({}, fresh, "ext4-ordered").states)
    in_place = [Op("truncate", step=1, ino=1, length=0), Op("write", step=2, ino=1, data=b"new")]
    assert b"" in _contents(crash_states(OLD, in_place, "ext4-ordered").states)


def test_a_directory_fsync_makes_the_rename_durable() -> None:
    """An acknowledged rename may be lost under posix-weak unless the directory was fsynced."""
    synced = [*TEMP_THEN_RENAME[:2], Op("fsync", step=3, ino=2), TEMP_THEN_RENAME[2]]
    for tail, lost in (([Op("ack")], True), ([Op("dirsync", step=5), Op("ack")], False)):
        states = crash_states(OLD, [*synced, *tail], "posix-weak").states
        after_ack = [s for s in states if s.acknowledged == 1]
        assert (b"old" in _contents(after_ack)) is lost


def test_bounds_are_reported() -> None:
    """A limit cuts the enumeration and says so; identical states are kept once."""
    capped = crash_states(OLD, TEMP_THEN_RENAME, "posix-weak", limit=2)
    assert len(capped.states) == 2 and capped.capped
    assert not crash_states(OLD, TEMP_THEN_RENAME, "process-crash").capped
    with pytest.raises(ValueError, match="unknown persistence model"):
        crash_states(OLD, TEMP_THEN_RENAME, "zfs")
    with pytest.raises(ValueError, match="kind"):
        Op("mkdir")


def test_replay_follows_links_and_zeros() -> None:
    """Replay writes at offsets, pads with zeros and keeps a half-done rename's two names."""
    ops = [*TEMP_THEN_RENAME[:2], Op("write", ino=2, offset=5, data=b"!")]
    files = replay(OLD, ops, {0: "all", 1: "zeros", 2: "all"})
    assert dict((n, d) for n, _, d in files)[".tmp"] == b"\0\0\0\0\0!"
    files = replay(OLD, TEMP_THEN_RENAME, {0: "all", 1: "all", 2: "link"})
    assert [(n, i) for n, i, _ in files] == [(".tmp", 2), ("MEMORY.md", 2)]


def test_calls_become_operations_with_fresh_identities() -> None:
    """A reused inode number gets a new identity; buffered writes issue at flush; failed calls
    change nothing; an O_TRUNC open of a new file is no truncate."""

    def call(seq: int, name: str, path: str, op: int = 0, error: str | None = None, **details):
        return {
            "seq": seq,
            "op": op,
            "name": name,
            "path": f"/r/{path}",
            "kind": "temp",
            "details": details,
            "error": error,
        }

    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    records = [
        call(0, "open", "t", flags=flags, ino=7, via="os"),
        call(1, "write", "t", ino=7, offset=0, hex="6869", via="file", buffered=True),
        call(2, "close", "t", ino=7, via="file"),
        call(3, "replace", "MEMORY.md", source="/r/t", ino=7, replaced_ino=1, via="os"),
        call(4, "unlink", "gone", error="ENOENT", via="os"),
        call(5, "open", "u", op=1, flags=flags, ino=1, via="os"),
    ]
    ops = ops_from_calls(records, "/r", {"MEMORY.md": (1, b"x")}, [0, 1], {0, 1})
    assert [op.kind for op in ops] == ["create", "write", "rename", "ack", "create", "ack"]
    assert ops[1].step == 2 and ops[1].data == b"hi" and ops[0].ino == ops[2].ino != 7
    assert ops[4].ino not in (1, ops[0].ino)
    with pytest.raises(ValueError, match="Plan\\(data=True\\)"):
        ops_from_calls([call(0, "write", "t", ino=7, via="os")], "/r", {}, [0], {0})


STRACE = r"""
10  openat(AT_FDCWD</w>, "/r/MEMORY.md.lock", O_RDWR|O_CREAT|O_CLOEXEC, 0600) = 3</r/MEMORY.md.lock>
10  write(1<pipe:[5]>, "{\"id\":0,\"ok\":true}\n", 19) = 19
10  openat(AT_FDCWD</w>, "/r/.t1", O_WRONLY|O_CREAT|O_EXCL, 0600) = 4</r/.t1>
10  write(4</r/.t1>, "\x61\xc2\xa7", 3 <unfinished ...>
11  close(9<pipe:[6]>) = 0
10  <... write resumed>) = 3
10  fsync(4</r/.t1>) = 0
10  rename("/r/.t1", "/r/MEMORY.md") = 0
10  openat(AT_FDCWD</w>, "/r", O_RDONLY|O_DIRECTORY) = 5</r>
10  fsync(5</r>) = 0
10  unlink("/r/missing") = -1 ENOENT (No such file or directory)
10  write(1<pipe:[5]>, "{\"id\":1,\"ok\":true}\n", 19) = 19
"""


def test_strace_output_becomes_call_records() -> None:
    """strace lines (resumed calls, hex bytes, answers on stdout) read as the same records."""
    records = calls_from_strace(STRACE, "/r", {"MEMORY.md": 1})
    assert [(r["op"], r["name"]) for r in records] == [
        (-1, "open"),
        (0, "open"),
        (0, "write"),
        (0, "fsync"),
        (0, "replace"),
        (0, "open"),
        (0, "fsync"),
        (0, "unlink"),
    ]
    assert records[2]["details"]["hex"] == "61c2a7" and records[6]["kind"] == "dir"
    ops = ops_from_calls(records, "/r", {"MEMORY.md": (1, b"")}, [0], {0})
    assert [op.kind for op in ops] == ["create", "write", "fsync", "rename", "dirsync", "ack"]


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
            verdicts.append(failure.split(":", 1)[0] if failure else None)
            if failure:
                assert f"under {model}" in failure and "recorded by interposition" in failure
                assert AT_FAULT[store.split(":")[1]] in failure, failure
    assert tuple(verdicts) == CAUGHT[store]


def test_reference_passes_the_checks_quickly(tmp_path: Path) -> None:
    """The reference passes the three registered checks at ci, with the figures reported."""
    for number, name in enumerate(CHECK_NAMES):
        ctx = _context(tmp_path / str(number), InProcessBackend(REFERENCE))
        started = time.monotonic()
        CHECKS[f"crashstates.{name}"].run(ctx)
        assert time.monotonic() - started < 20
        assert any(key.endswith("posix-weak states") for key in ctx.figures)
        assert ctx.figures[next(k for k in ctx.figures if k.endswith("recorder"))] == (
            "interposition"
        )


def test_the_check_fails_with_its_clause(tmp_path: Path) -> None:
    """Through the registry, the no-temp-fsync store fails with CRASH-4 first."""
    ctx = _context(tmp_path, InProcessBackend(f"{PROCS}:open_no_temp_fsync"))
    with pytest.raises(AssertionError, match=r"^CRASH-4: under posix-weak"):
        CHECKS["crashstates.crash_states_are_old_or_new"].run(ctx)


def test_without_strace_a_command_backend_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No strace: the check does not apply to a command backend, and says why."""
    crashstates.strace_problem.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    try:
        ctx = _context(tmp_path, CommandBackend(f"memspec serve --backend {REFERENCE}"))
        with pytest.raises(NotApplicable, match="strace is not installed"):
            crashstates.record(ctx, False)
    finally:
        crashstates.strace_problem.cache_clear()


needs_strace = pytest.mark.skipif(
    crashstates.strace_problem() is not None, reason=str(crashstates.strace_problem())
)


@needs_strace
def test_strace_catches_a_command_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through memspec serve, strace records the no-temp-fsync store and posix-weak fails it
    at the same step as by interposition."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    ctx = _context(tmp_path, CommandBackend(f"memspec serve --backend {PROCS}:open_no_temp_fsync"))
    recording = crashstates.record(ctx, "batch" in crashstates._setup(ctx))
    assert recording.recorder == "strace"
    failure, _ = crashstates.judge_model(ctx, recording, "posix-weak", crashstates.OLD_OR_NEW)
    assert failure is not None and failure.startswith("CRASH-4: under posix-weak")
    assert "recorded by strace" in failure
    assert re.search(
        r"the rename at step \d+ may persist before the data written at step \d+: "
        "fsync the temp file",
        failure,
    ), failure


@needs_strace
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_backend_passes_under_strace(tmp_path: Path) -> None:
    """The Node.js backend, recorded by strace, recovers from every crash state."""
    ctx = _context(tmp_path, CommandBackend(NODE))
    CHECKS["crashstates.crash_states_are_old_or_new"].run(ctx)
    assert ctx.figures["old-or-new recorder"] == "strace"
    assert ctx.figures["old-or-new posix-weak judged"] >= 5
