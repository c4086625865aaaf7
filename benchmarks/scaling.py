"""How time and memory grow with the size of a memory file, for the reference store and for the
spec's own reading of the file, and how the linearizability checker grows with its history.

Run from the project root (figures, not tests)::

    python -m benchmarks.scaling                 # every size, a Markdown table
    python -m benchmarks.bench --only scale      # the same, as a section of the benchmarks page

Each size is a MEMORY.md of canonical entries of about 100 code points filling its limit (the
default 2,200, then ten, a hundred and about five hundred times that: 1 MiB of text), opened by
the reference store with that limit. For each: the median time of a load, of an ``add`` of one
entry, of a ``replace`` of the middle entry by text of its length and of the ``remove`` of the
added entry; the peak memory allocated during one ``add`` (``tracemalloc``); and the time the
spec takes to classify and parse the same bytes (what every judge does to a file). The growth
between the smallest and the largest size is given as an exponent: time ∝ size^k, so k near 1
is linear and k near 2 quadratic. A foreign file of 1 MiB (one paragraph, no delimiter, far
over its limit) is timed too: the ``add`` the drift guard refuses and the ``remove`` it lets
through after a backup (DRIFT-7).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memspec.reference_impl import open_store
from memspec.spec.codec import classify_bytes, encode_entries

SIZES = (2_200, 22_000, 220_000, 1_048_576)
"""The limits, in code points, of the files measured: each file fills its limit."""
ENTRY = 100
"""Code points per entry."""
FOREIGN = 1_048_576
"""Code points of the foreign file."""


def _entries(limit: int) -> list[str]:
    """Returns entries of :data:`ENTRY` code points that, joined, leave room for two more."""
    count = max(1, (limit - 2 * (ENTRY + 3)) // (ENTRY + 3))
    return [f"Entry {index:07d}: " + "ü" * (ENTRY - 16) for index in range(count)]


def _median_of(action: Callable[[], object], rounds: int) -> float:
    """Returns the median seconds of ``rounds`` calls of ``action``."""
    spent = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def _ok(answer: dict[str, Any], what: str) -> None:
    if answer.get("code") != "OK":
        raise SystemExit(f"benchmark: {what} answered {answer}; expected OK")


def measure_size(limit: int, rounds: int) -> dict[str, float]:
    """Returns the figures of one file size: ``load_ms``, ``add_ms``, ``replace_ms``,
    ``remove_ms``, ``add_peak_kib`` and ``parse_ms``, with the file's ``bytes`` and
    ``entries``."""
    entries = _entries(limit)
    data = encode_entries(entries)
    middle = entries[len(entries) // 2]
    other = middle.replace("ü", "ö")
    with tempfile.TemporaryDirectory(prefix="memspec-scale-") as scratch:
        root = Path(scratch)
        (root / "MEMORY.md").write_bytes(data)
        store = open_store(root, memory_char_limit=limit, user_char_limit=1375)
        store.load()
        figures = {"bytes": float(len(data)), "entries": float(len(entries))}
        figures["load_ms"] = 1000 * _median_of(store.load, rounds)
        add, replace, remove = [], [], []
        for index in range(rounds):
            text = f"Added {index:05d}: " + "é" * (ENTRY - 13)
            for spent, op, arguments in (
                (add, "add", (text,)),
                (replace, "replace", (middle, other)),
                (replace, "replace", (other, middle)),
                (remove, "remove", (text,)),
            ):
                started = time.perf_counter()
                answer = getattr(store, op)("memory", *arguments)
                spent.append(time.perf_counter() - started)
                _ok(answer, f"a mutation at {limit:,} code points")
        figures.update(
            add_ms=1000 * statistics.median(add),
            replace_ms=1000 * statistics.median(replace),
            remove_ms=1000 * statistics.median(remove),
        )
        tracemalloc.start()
        try:
            _ok(store.add("memory", "Peak " + "a" * (ENTRY - 5)), "the traced add")
            figures["add_peak_kib"] = tracemalloc.get_traced_memory()[1] / 1024
        finally:
            tracemalloc.stop()
        figures["parse_ms"] = 1000 * _median_of(lambda: classify_bytes(data, limit), rounds)
    return figures


def measure_foreign(rounds: int) -> dict[str, float]:
    """Returns the figures of a foreign MEMORY.md of :data:`FOREIGN` code points at the default
    limit: ``add_ms`` (refused by the drift guard), ``remove_ms`` (a repair it lets through
    after a backup, DRIFT-7; the file is written again before each round) and ``bytes``."""
    paragraph = ("Notes pasted from a meeting, kept as they were typed. " * 20_000)[:FOREIGN]
    data = paragraph.encode("utf-8")
    add, remove = [], []
    with tempfile.TemporaryDirectory(prefix="memspec-scale-") as scratch:
        root = Path(scratch)
        store = open_store(root)
        for _ in range(rounds):
            (root / "MEMORY.md").write_bytes(data)
            store.load()
            started = time.perf_counter()
            store.add("memory", "User prefers tabs")
            add.append(time.perf_counter() - started)
            started = time.perf_counter()
            _ok(store.remove("memory", "Notes pasted"), "the remove of the foreign entry")
            remove.append(time.perf_counter() - started)
            for backup in root.glob("MEMORY.md.bak.*"):
                backup.unlink()
    return {
        "bytes": float(len(data)),
        "add_ms": 1000 * statistics.median(add),
        "remove_ms": 1000 * statistics.median(remove),
    }


def growth(sizes: Sequence[float], times: Sequence[float]) -> float:
    """Returns k in time ∝ size^k between the first and the last size (``nan`` when a time is
    not positive)."""
    if times[0] <= 0 or times[-1] <= 0 or sizes[-1] == sizes[0]:
        return math.nan
    return math.log(times[-1] / times[0]) / math.log(sizes[-1] / sizes[0])


MEASURED = ("load_ms", "add_ms", "replace_ms", "remove_ms", "add_peak_kib", "parse_ms")


def section_scale(rounds: int, sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Returns every figure of the scaling section: ``sizes`` (one entry per limit),
    ``growth`` (the exponent of each figure) and ``foreign``."""
    measured = {str(limit): measure_size(limit, rounds) for limit in sizes}
    volumes = [measured[str(limit)]["bytes"] for limit in sizes]
    exponents = {
        name: growth(volumes, [measured[str(limit)][name] for limit in sizes]) for name in MEASURED
    }
    return {"sizes": measured, "growth": exponents, "foreign": measure_foreign(rounds)}


def render_scale(results: dict[str, Any]) -> str:
    """Returns the scaling section as Markdown tables."""
    lines = [
        "| limit (code points) | file | entries | load | add | replace | remove "
        "| peak memory of an add | spec's parse |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for limit, f in results["sizes"].items():
        lines.append(
            f"| {int(limit):,} | {f['bytes'] / 1024:,.0f} KiB | {f['entries']:,.0f} "
            f"| {f['load_ms']:.2f} ms | {f['add_ms']:.2f} ms | {f['replace_ms']:.2f} ms "
            f"| {f['remove_ms']:.2f} ms | {f['add_peak_kib']:,.0f} KiB | {f['parse_ms']:.2f} ms |"
        )
    exponents = results["growth"]
    lines += [
        "",
        "Growth from the smallest file to the largest, as k in time ∝ size^k (1 is linear, 2 "
        "quadratic): "
        + ", ".join(
            f"{name.removesuffix('_ms').replace('_', ' ')} {k:.2f}" for name, k in exponents.items()
        )
        + ".",
        "",
        f"A foreign MEMORY.md of {results['foreign']['bytes'] / 1024:,.0f} KiB at the default "
        f"limit: the add the drift guard refuses takes {results['foreign']['add_ms']:.1f} ms, "
        f"the remove it lets through after a backup {results['foreign']['remove_ms']:.1f} ms.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure (median)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    print(render_scale(section_scale(args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
