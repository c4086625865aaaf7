"""The persistence models and file-system traces of the crash-state checks, on traces written
by hand (``conformance/crash/persistence.py``, ``conformance/tamper/fstrace.py``): which crash
states each model allows, how a state is replayed and explained, and how recorded calls (by
interposition, or in strace's text) become operations."""

from __future__ import annotations

import os

import pytest

from memspec.conformance.crash.persistence import crash_states, explain, replay
from memspec.conformance.tamper.calls import CallRecord, Details, Invocation
from memspec.conformance.tamper.fstrace import calls_from_strace, ops_from_calls, read_strace
from memspec.conformance.tamper.ops import Op
from memspec.conformance.verdict.findings import HarnessError

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
        return CallRecord(name, f"/r/{path}", "temp", Details(**details), op, seq, error=error)

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
    with pytest.raises(HarnessError, match="Plan\\(data=True\\)"):
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
    assert [(r.op, r.name) for r in records] == [
        (-1, "open"),
        (0, "open"),
        (0, "write"),
        (0, "fsync"),
        (0, "replace"),
        (0, "open"),
        (0, "fsync"),
        (0, "unlink"),
    ]
    assert records[2].details.hex == "61c2a7" and records[6].kind == "dir"
    ops = ops_from_calls(records, "/r", {"MEMORY.md": (1, b"")}, [0], {0})
    assert [op.kind for op in ops] == ["create", "write", "fsync", "rename", "dirsync", "ack"]


TAMPERED = r"""
10  openat(AT_FDCWD</w>, "/r/MEMORY.md", O_RDONLY|O_CLOEXEC) = 3</r/MEMORY.md>
10  read(3</r/MEMORY.md>, "abc", 4096) = -1 EIO (Input/output error) (INJECTED)
10  write(1<pipe:[5]>, "{\"id\":0,\"ok\":true}\n", 19) = 19
10  openat(AT_FDCWD</w>, "/r/MEMORY.md.lock", O_RDWR|O_CREAT, 0600) = 4</r/MEMORY.md.lock>
10  flock(4</r/MEMORY.md.lock>, LOCK_EX) = 0
10  rename("/r/.t1", "/r/MEMORY.md") = ?
10  +++ killed by SIGKILL +++
"""


def test_strace_records_say_which_invocation_and_what_strace_did() -> None:
    """Each record names its thread, system call, ordinal and the next call; an injected
    error and the call a kill stopped carry their effect."""
    trace = read_strace(TAMPERED, "/r", {"MEMORY.md": 1})
    names = [(r.name, r.kind, r.effect) for r in trace.records]
    assert names == [
        ("open", "data", None),
        ("read", "data", "EIO"),
        ("open", "lock", None),
        ("flock", "lock", None),
        ("replace", "data", "kill"),
    ]
    assert trace.records[1].details.strace == Invocation(10, "read", 1, ("write", 1))
    strace = trace.records[2].details.strace
    assert strace is not None and strace.nth == 2
    assert trace.records[3].details.operation == "LOCK_EX"
    assert trace.injected == [(10, "read", 1)] and trace.killed == [(10, "rename", 1)]


KILLED_WITH_A_BYSTANDER = r"""
10  openat(AT_FDCWD</w>, "/r/MEMORY.md", O_RDONLY|O_CLOEXEC) = 3</r/MEMORY.md>
11  close(7</r/other>) <unfinished ...>
10  rename("/r/.t1", "/r/MEMORY.md") = ?
11  +++ killed by SIGKILL +++
10  +++ killed by SIGKILL +++
"""


def test_a_kill_is_placed_by_the_injected_invocation_not_a_bystander_thread() -> None:
    # A process kill ends every thread: one inside a traced call shows as killed there too,
    # but strace acted only at the injection's own invocation.
    from memspec.conformance.tamper.strace import Injection, acted_on

    trace = read_strace(KILLED_WITH_A_BYSTANDER, "/r", {"MEMORY.md": 1})
    assert sorted(trace.killed) == [(10, "rename", 1), (11, "close", 1)]
    target = trace.records[-1]
    injection = Injection("rename", 1, "kill-before", 0, target, 10)
    record, words = acted_on(trace, trace.records, injection)
    assert record is target and words == "rename #1"


RAN_TO_ITS_END = r"""
10  openat(AT_FDCWD</w>, "/r/MEMORY.md", O_RDONLY|O_CLOEXEC) = 3</r/MEMORY.md>
10  rename("/r/.t1", "/r/MEMORY.md") = 0
"""


@pytest.mark.parametrize(
    ("text", "op", "missed", "outside"),
    [
        (KILLED_WITH_A_BYSTANDER, 3, None, None),
        (KILLED_WITH_A_BYSTANDER, 2, None, "rename #1"),
        (
            RAN_TO_ITS_END,
            3,
            "strace did not kill it at replace .t1 -> MEMORY.md, the session ran to its end",
            None,
        ),
    ],
)
def test_a_run_strace_did_not_kill_missed_its_step_and_is_judged(
    text: str, op: int, missed: str | None, outside: str | None
) -> None:
    # A run the injection never reached (its calls differed from the recording's) is not a
    # kill outside the operation, which is never judged: it ran as it is, and is tried again.
    from dataclasses import replace

    from memspec.conformance.processes.workers import WorkerResult, WorkerStatus
    from memspec.conformance.tamper.interpose import Fault, Match
    from memspec.conformance.tamper.strace import Injection, killed_where

    trace = read_strace(text, "/r", {"MEMORY.md": 1})
    calls = [replace(record, op=op) for record in trace.records]
    status = WorkerStatus.KILLED if trace.killed else WorkerStatus.DONE
    result = WorkerResult("round", status, [], calls)
    injection = Injection("rename", 1, "kill-before", 0, calls[-1], 10)
    killed = killed_where(result, trace, injection, Fault(Match(op=3), action="kill-before"))
    assert (killed.missed, killed.outside) == (missed, outside)
