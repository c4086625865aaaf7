"""The process accounting that splits a certification's processor time by kind
(``benchmarks/accounting.py``): the kernel's records read back, and one tree's time summed by
what each process is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.accounting import (
    RECORD,
    TICKS,
    Ended,
    accounting,
    comp_t,
    read_records,
    tree_usage,
)
from benchmarks.certify_time import starts_by_check


def _record(pid: int, ppid: int, command: bytes, utime: int, stime: int = 0) -> bytes:
    return RECORD.pack(0, 3, 0, 0, 0, 0, pid, ppid, 0, 0.0, utime, stime, 0, 0, 0, 0, 0, 0, command)


def test_comp_t_is_a_mantissa_times_eight_to_the_exponent() -> None:
    assert comp_t(5) == 5.0
    assert comp_t(0x1FFF) == 8191.0
    assert comp_t((1 << 13) | 3) == 24.0  # 3 * 8**1
    assert comp_t((2 << 13) | 3) == 192.0  # 3 * 8**2


def test_records_of_another_version_are_skipped_and_times_gain_half_a_tick() -> None:
    other = RECORD.pack(0, 2, 0, 0, 0, 0, 9, 1, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, b"old")
    data = other + _record(10, 1, b"memspec_backend", utime=20, stime=10)
    assert read_records(data) == [Ended(10, 1, "memspec_backend", 30.5 / TICKS)]


def test_a_tree_is_split_into_backend_strace_and_harness() -> None:
    records = [
        Ended(1, 0, "memspec", 1.0),  # the certification: the root, never the backend
        Ended(2, 1, "python3", 2.0),  # a worker
        Ended(3, 2, "memspec", 0.5),  # a session of `memspec serve`
        Ended(4, 2, "memspec", 0.25),
        Ended(5, 2, "strace", 0.75),
        Ended(6, 5, "memspec", 0.125),  # a traced session: strace's child
        Ended(7, 99, "memspec", 8.0),  # another tree's process
    ]
    usage = tree_usage(records, 1, "memspec")
    assert (usage.backend, usage.backend_processes) == (0.875, 3)
    assert (usage.tracing, usage.harness) == (0.75, 3.0)
    assert usage.total == 4.625
    # a Python backend runs inside the harness: nothing is the backend's
    assert tree_usage(records, 1, None).backend_processes == 0


def test_a_command_name_is_cut_as_the_kernel_cuts_it() -> None:
    records = [Ended(1, 0, "memspec", 1.0), Ended(2, 1, "a_long_backend_", 0.5)]
    assert tree_usage(records, 1, "a_long_backend_name").backend_processes == 1


def test_accounting_records_the_processes_that_ended(tmp_path: Path) -> None:
    with accounting(tmp_path / "pacct") as recorded:
        if recorded is None:
            pytest.skip("process accounting is refused here (it needs CAP_SYS_PACCT)")
        child = subprocess.run([sys.executable, "-c", "sum(range(10**6))"], check=True)
    assert child.returncode == 0
    pids = {record.pid for record in read_records(recorded.read_bytes())}
    assert pids  # the child, at least, ended while accounting was on


def test_a_process_start_belongs_to_the_check_that_ends_next() -> None:
    lock = "test_conformance.py::test_check[LOCK/locking.concurrent_adds_are_all_kept]"
    lines = [
        (10.0, "[gw0] [ 50%] PASSED test_conformance.py::test_example[ENTRY/entry-normalised] "),
        (11.0, f"{lock} "),  # the line that says a check starts counts for nothing
        (20.0, f"[gw0] [100%] FAILED {lock}"),
    ]
    counted = starts_by_check([9.0, 10.5, 19.0, 25.0], lines)
    assert counted == {
        "ENTRY/entry-normalised": 1,
        "LOCK/locking.concurrent_adds_are_all_kept": 2,
        "(after the last check)": 1,
    }


def test_the_bounds_set_each_run_against_the_harness_alone() -> None:
    # serve and a failing store against the in-process reference; a command backend against
    # the harness alone plus its floor (its own processor time over the workers)
    from benchmarks.accounting import Usage
    from benchmarks.certify_time import REFERENCE, SERVE, Run, render_bounds

    def run(seconds: float, failed_at: float | None = None, backend: float = 0.0) -> Run:
        usage = Usage(backend, 100, 0.0, 10.0)
        return Run(seconds, (0.0, 0.0), "", (), first_failure=failed_at, usage=usage)

    results = {
        REFERENCE: [run(15)],
        f"--backend-cmd '{SERVE}'": [run(60, backend=70)],
        "tests.backends.procs:open_no_lock": [run(12, failed_at=3)],
    }
    rows = render_bounds(results, workers=2).splitlines()
    assert f"| `--backend-cmd '{SERVE}'` | 60 s | in-process 15 s | 4.0× |" in rows
    assert f"| `--backend-cmd '{SERVE}'` | 60 s | ideal 50 s | 1.2× |" in rows
    assert "| `tests.backends.procs:open_no_lock` | 12 s | in-process 15 s | 0.8× |" in rows
    assert not any(row.startswith(f"| `{REFERENCE}` |") for row in rows)
    assert not any(row.startswith("| at least") for row in rows)
    assert render_bounds({SERVE: [run(60)]}, workers=2) == ""
    # at least: the harness alone plus 100 processes of 0.3 s each over the 2 workers
    least = render_bounds(results, workers=2, least_start=0.3).splitlines()[-1]
    assert least == "| at least, 100 processes × 300 ms | 30 s | in-process 15 s | 2.0× |"


def test_a_command_built_in_the_temporary_directory_is_named_without_this_machines_path() -> None:
    import tempfile

    from benchmarks.certify_time import command_label

    built = f"{tempfile.gettempdir()}/memspec-native/memspec_backend"
    assert command_label(built) == "--backend-cmd '$TMPDIR/memspec-native/memspec_backend'"
    assert command_label("node x.js") == "--backend-cmd 'node x.js'"
