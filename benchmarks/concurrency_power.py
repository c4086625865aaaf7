"""How often the concurrency history check catches each store broken on purpose.

Runs the check ``concurrency.history_is_linearizable`` N times (default 20) per store at a
profile (default ``ci``, 4 sessions x 25 operations), each run with fresh directories and the
profile's fixed programs, and prints per store how many runs failed, with which checker and
clause first, and the wall time. The reference store must fail 0 times (no false alarm); a
store broken on purpose should fail in at least 19 of 20 runs. Run from the project root::

    python -m benchmarks.concurrency_power                 # every store, 20 runs each
    python -m benchmarks.concurrency_power --runs 5 open_no_lock open_in_place
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from memspec.conformance.checks.concurrency import history_is_linearizable
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.verdict.findings import NotApplicable

STORES = {
    "reference": "memspec.reference_impl:open_store",
    "open_no_lock": "tests.backends.procs:open_no_lock",
    "open_data_file_lock": "tests.backends.procs:open_data_file_lock",
    "open_read_before_lock": "tests.backends.procs:open_read_before_lock",
    "open_loaded_list": "tests.backends.procs:open_loaded_list",
    "open_in_place": "tests.backends.procs:open_in_place",
}


def run_once(backend: str, profile: str, seed: int | None) -> str:
    """Runs the check once; returns ``pass``, ``undecided`` or ``checker CLAUSE``."""
    with tempfile.TemporaryDirectory(prefix="memspec-power-") as scratch:
        root, own = Path(scratch, "root"), Path(scratch, "scratch")
        root.mkdir()
        own.mkdir()
        ctx = CheckContext(InProcessBackend(backend), root, own, PROFILES[profile], seed)
        try:
            history_is_linearizable(ctx)
        except NotApplicable:
            return "undecided"
        except AssertionError as error:
            found = re.match(r"([A-Z]+-\d+): the (\w+) checker", str(error))
            return f"{found.group(2)} {found.group(1)}" if found else "failed"
    return "pass"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stores", nargs="*", metavar="STORE", help=", ".join(STORES))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", default="ci", choices=list(PROFILES))
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    unknown = [name for name in args.stores if name not in STORES]
    if unknown:
        parser.error(f"unknown store {unknown[0]!r}; choose from {', '.join(STORES)}")
    print(f"profile {args.profile}, {args.runs} runs per store")
    for name in args.stores or list(STORES):
        started = time.monotonic()
        backend = STORES[name]
        outcomes = Counter(run_once(backend, args.profile, args.seed) for _ in range(args.runs))
        failed = args.runs - outcomes["pass"] - outcomes["undecided"]
        seconds = time.monotonic() - started
        kinds = ", ".join(f"{kind}: {count}" for kind, count in outcomes.most_common())
        print(f"{name:<22} failed {failed:>2}/{args.runs}  ({kinds})  {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
