"""The concurrency history check: generated programs, a reader process, every checker.

One run of the ``ci`` profile (4 sessions x 25 operations) per store: the reference passes,
and each store broken on purpose fails with the checker and the clause at fault named and the
history saved. How often the racy ones are caught over 20 runs is measured by
``benchmarks/concurrency_power.py`` (too slow for every CI run).
"""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pytest

from memspec.conformance.checks.concurrency import HISTORY_FILE, history_is_linearizable
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.history.history import Event, read_history
from memspec.conformance.history.programs import generate_program, limits_for, peak_usage, tag
from memspec.conformance.processes.reader import Reader
from memspec.conformance.transport.backend import InProcessBackend
from memspec.spec.codec import encode_entries
from memspec.spec.requests import MUTATIONS

ATTEMPTS = 3


def _context(backend: str, tmp_path: Path, seed: int | None = None) -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(parents=True)
    scratch.mkdir()
    return CheckContext(InProcessBackend(backend), root, scratch, PROFILES["ci"], seed)


def test_reference_passes_every_checker(tmp_path: Path) -> None:
    ctx = _context("memspec.reference_impl:open_store", tmp_path)
    history_is_linearizable(ctx)
    assert not (ctx.scratch / HISTORY_FILE).exists()


def test_check_binds_every_backend() -> None:
    # LOCK-2, LOCK-3 are data-protecting: no backend skips them for what it claims.
    assert CHECKS["concurrency.history_is_linearizable"].features == ("core",)


@pytest.mark.parametrize(
    ("broken", "clause"),
    [
        ("open_no_lock", "LOCK-3"),
        ("open_data_file_lock", "LOCK-3"),
        ("open_read_before_lock", "LOCK-3"),
        ("open_loaded_list", "LOCK-3"),
        ("open_in_place", "ATOMIC-2"),
    ],
)
def test_broken_stores_are_caught(tmp_path: Path, broken: str, clause: str) -> None:
    # A race is caught in at least 19 of 20 runs (benchmarks/concurrency_power.py); up to
    # ATTEMPTS runs here keep a loaded CI machine from turning a rare miss into a failure.
    for attempt in range(ATTEMPTS):
        ctx = _context(f"tests.backends.procs:{broken}", tmp_path / str(attempt))
        try:
            history_is_linearizable(ctx)
        except AssertionError as error:
            message = str(error)
            break
    else:
        pytest.fail(f"{broken} passed {ATTEMPTS} runs of the concurrency history check")
    # The failure names the checker and the clause, and where the history is.
    assert re.match(r"[A-Z]+-\d+: the \w+ checker rejects the history of 4 sessions", message)
    assert clause in message.split("\n", 1)[0] or f"also: {clause}" in message
    saved = ctx.scratch / HISTORY_FILE
    assert str(saved) in message
    assert {event.op["op"] for event in read_history(saved)} >= {"add", "read"}


def test_programs_are_deterministic_and_entries_unique() -> None:
    def programs(seed: int) -> list[tuple[dict, ...]]:
        rng = random.Random(seed)
        return [generate_program(p, rng, 60, ("memory", "user")) for p in range(4)]

    assert programs(7) == programs(7) != programs(8)
    steps = [step for program in programs(7) for step in program]
    assert all(program[0] == {"op": "load"} for program in programs(7))
    kinds = {step["op"] for step in steps}
    # No patch: the history checkers tell what a mutation wrote from its request alone, and a
    # patch's resulting entry depends on the entry it edits.
    assert kinds == {"load", *MUTATIONS} - {"patch"}
    written = [
        text
        for step in steps
        for text in [step.get("content"), step.get("new_content")]
        + [item.get("content") for item in step.get("operations", [])]
        if text
    ]
    assert len(written) == len(set(written))
    # MATCH-1: every old_text names exactly one entry ever written.
    olds = [step["old_text"] for step in steps if "old_text" in step]
    olds += [
        item["old_text"]
        for step in steps
        for item in step.get("operations", [])
        if "old_text" in item
    ]
    assert olds and all(sum(old in text for text in written) == 1 for old in olds)
    assert tag(3, 1) not in tag(3, 17)


def test_programs_without_batch_and_bad_arguments() -> None:
    program = generate_program(0, random.Random(1), 100, batch=False)
    assert all(step["op"] != "batch" for step in program)
    assert {step.get("target") for step in program} == {None, "memory"}
    with pytest.raises(ValueError, match="targets"):
        generate_program(0, random.Random(1), 5, ("notes",))
    with pytest.raises(ValueError, match="count"):
        generate_program(0, random.Random(1), -1)


def test_limits_leave_memory_ample_and_fill_user() -> None:
    rng = random.Random(3)
    programs = [generate_program(p, rng, 25, ("memory", "user")) for p in range(4)]
    peak, limits = peak_usage(programs), limits_for(programs)
    assert limits["memory"] >= 2 * peak["memory"]
    assert limits["user"] < peak["user"]


def test_reader_samples_both_files_until_stopped(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_bytes(b"\xff\xfe")
    with Reader(tmp_path, ("memory", "user"), process=5) as reader:
        (tmp_path / "MEMORY.md").write_bytes(encode_entries(["a", "b"]))
        events = [Event.from_record(record) for record in reader.stop(timeout=10)]
    assert reader.stop() is reader.stop()
    reads = [event for event in events if event.type == "ok"]
    assert {event.process for event in events} == {5}
    last = {event.op["target"]: event.value for event in reads}
    assert last == {"memory": {"entries": ["a", "b"]}, "user": {"unreadable": True}}
    assert all(a.time <= b.time for a, b in itertools.pairwise(events))


def test_reader_left_without_stop_is_reaped(tmp_path: Path) -> None:
    with Reader(tmp_path, ("memory",), process=0) as reader:
        process = reader._process
    assert not process.is_alive()
