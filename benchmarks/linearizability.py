"""How long the checkers of a concurrent history take, by history size.

For each size (sessions x operations per session) it records one real history of the reference
store — the sessions and the reader process of ``concurrency.history_is_linearizable`` — and
times :func:`memspec.conformance.history.checkers.judge_history` on it: taking the history apart,
the three cheap checkers, and the linearizability search. The issue's bar: a 4 x 25 history checks
in under a second. Run from the project root::

    python -m benchmarks.linearizability                  # 2x10 4x25 8x50 8x100 8x200
    python -m benchmarks.linearizability 4x25 8x200 --repeat 3
    python -m benchmarks.linearizability 8x200 --backend tests.backends.procs:open_no_lock

A backend other than the reference (``--backend``) is expected to fail: its histories time the
checkers on the evidence of a broken store (lost and torn entries), the costliest case.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from memspec.conformance.checks.concurrency import SEED, run_history
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext
from memspec.conformance.history.checkers import judge_history
from memspec.conformance.transport.backend import InProcessBackend, load_factory
from memspec.spec.errors import UsageError

SIZES = ("2x10", "4x25", "8x50", "8x100", "8x200")
REFERENCE = "memspec.reference_impl:open_store"
BAR = 1.0
"""Seconds a 4 x 25 history may take to check."""


def measure(
    processes: int, operations: int, seed: int, backend: str = REFERENCE
) -> dict[str, float]:
    """Records one history of ``backend`` at this size; returns its size, the number of
    findings and the timings."""
    profile = replace(PROFILES["ci"], processes=processes, operations=operations)
    with tempfile.TemporaryDirectory(prefix="memspec-bench-") as scratch:
        root, own = Path(scratch, "root"), Path(scratch, "scratch")
        root.mkdir()
        own.mkdir()
        ctx = CheckContext(InProcessBackend(backend), root, own, profile, seed)
        events, limits, extra = run_history(ctx, seed)
    seconds: dict[str, float] = {}
    findings = judge_history(events, limits, start={}, timeout=600, seconds=seconds)
    if findings and backend == REFERENCE:
        raise SystemExit(f"the reference failed at {processes}x{operations}:\n{findings[0]}")
    mutations = sum(1 for e in events if e.type == "invoke" and e.op["op"] != "read")
    cheap = seconds["analysis"] + seconds["acknowledged"] + seconds["samples"] + seconds["limits"]
    return {
        "mutations": mutations,
        "samples": extra["samples"],
        "findings": len(findings),
        "run": extra["run"],
        "cheap": cheap,
        "linearizability": seconds.get("linearizability", 0.0),
        "total": cheap + seconds.get("linearizability", 0.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", metavar="NxM", help=f"default: {' '.join(SIZES)}")
    parser.add_argument("--repeat", type=int, default=1, help="histories per size (median)")
    parser.add_argument(
        "--backend", default=REFERENCE, metavar="MODULE:FACTORY", help="default: the reference"
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or list(SIZES)
    bad = [size for size in sizes if not re.fullmatch(r"\d+x\d+", size)]
    if bad or args.repeat < 1:
        parser.error(f"sizes look like 4x25 and --repeat is at least 1, got {bad or args.repeat}")
    try:
        load_factory(args.backend)
    except UsageError as error:
        parser.error(f"--backend: {error}")
    print(
        f"{'size':>6} {'mutations':>9} {'samples':>8} {'run s':>6} "
        f"{'cheap s':>8} {'lin s':>7} {'check s':>8} {'findings':>8}"
    )
    slow = False
    for size in sizes:
        processes, operations = (int(part) for part in size.split("x"))
        runs = [measure(processes, operations, SEED + i, args.backend) for i in range(args.repeat)]
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(
            f"{size:>6} {median['mutations']:>9.0f} {median['samples']:>8.0f} "
            f"{median['run']:>6.1f} {median['cheap']:>8.2f} {median['linearizability']:>7.2f} "
            f"{median['total']:>8.2f} {median['findings']:>8.0f}",
            flush=True,
        )
        if size == "4x25" and median["total"] >= BAR:
            slow = True
    if slow:
        print(f"4x25 took {BAR:g} s or more to check: too slow")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
