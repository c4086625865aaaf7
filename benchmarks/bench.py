"""memspec's figures: store speed against Hermes, the fsync floor, certification and checker times.

Run from the project root (figures, not tests; each section prints a Markdown table)::

    python -m benchmarks.bench                          # every section but thorough certify
    python -m benchmarks.bench --only ops,fsync         # some sections
    python -m benchmarks.bench --thorough --zoo zoo.json --json figures.json
    python -m benchmarks.bench --only ops,fsync,certify,lin,scale --page docs/results/benchmarks.md

Sections:

- ``ops``: mutations per second at the default limits (2,200 / 1,375) of the reference store
  and of hermes-agent (0.19.0 unless ``--hermes``), in the same run and through the same
  transport: each is one JSON Lines session process (``memspec serve`` for the reference, the
  Hermes adapter in the release's own environment, built by ``memspec hermes``'s code), driven
  by the same requests — rounds of add, replace, remove of one entry beside five others — and
  in-process for both: the reference store's methods called directly, and Hermes' adapter
  session (``HermesSession.handle``) called directly by a small script in its environment. The
  reference also fsyncs the directory after every rename; Hermes does not.
- ``fsync``: the machine's floor — a small file written and fsynced; the same plus an fsync of
  its directory; a whole durable atomic write (temp, fsync, rename, directory fsync) — and the
  reference's in-process mutation time as a multiple of it.
- ``certify``: wall time of ``memspec certify`` of the reference per profile (smoke, ci; and
  thorough with ``--thorough``), each in its own process.
- ``lin``: the linearizability checker's time by history size (``benchmarks.linearizability``).
- ``scale``: time and memory of the reference store and of the spec's parse by the size of
  MEMORY.md, up to 1 MiB, with the growth exponent, and a foreign file of 1 MiB
  (``benchmarks.scaling``; ``--repeat`` rounds per figure).
- ``zoo``: time to detection per zoo member, from the JSON that ``python -m tests.zoo --json``
  wrote (``--zoo FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.core.results_page import PageRun, writable_page
from memspec.conformance.hermes.releases import ADAPTER, Release, adapter_command, ensure_venv
from memspec.conformance.transport.backend import Session
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.reference_impl import open_store
from memspec.spec.errors import UsageError

REFERENCE = "memspec.reference_impl:open_store"
SECTIONS = ("ops", "fsync", "certify", "lin", "scale", "zoo")
LIN_SIZES = ("2x10", "4x25", "8x50", "8x100")
OTHERS = 5
"""Entries already in MEMORY.md while the rounds run."""


# --- store speed ------------------------------------------------------------------------------


def _ok(session: Session, op: str, **fields: Any) -> None:
    answer = session.request(op, **fields)
    if answer.get("code") != "OK":
        raise SystemExit(f"benchmark: {op} {fields} answered {answer}; expected OK")


def time_rounds(session: Session, rounds: int) -> dict[str, float]:
    """Runs ``rounds`` of add, replace, remove on MEMORY.md; returns seconds per op kind."""
    _ok(session, "load")
    for index in range(OTHERS):
        _ok(session, "add", target="memory", content=f"Standing note {index}: keep this one")
    spent = {"add": 0.0, "replace": 0.0, "remove": 0.0, "cpu": 0.0}
    for index in range(rounds):
        tag = f"Bench entry {index}:"
        steps = (
            ("add", {"content": f"{tag} user prefers tabs over spaces"}),
            ("replace", {"old_text": tag, "new_content": f"{tag} user prefers spaces"}),
            ("remove", {"old_text": tag}),
        )
        for op, fields in steps:
            started, cpu = time.perf_counter(), time.process_time()
            _ok(session, op, target="memory", **fields)
            spent[op] += time.perf_counter() - started
            spent["cpu"] += time.process_time() - cpu
    return spent


def store_speed(backend: Any, rounds: int) -> dict[str, float]:
    """Mutations per second of ``backend`` on a fresh root (and per op kind)."""
    with tempfile.TemporaryDirectory(prefix="memspec-bench-") as scratch:
        session = backend.open(Path(scratch))
        try:
            spent = time_rounds(session, rounds)
        finally:
            session.close()
    return _figures(spent, rounds)


def hermes_python(version: str) -> Path:
    """The interpreter of hermes-agent ``version``'s own cached environment (built if needed)."""
    return ensure_venv(Release("hermes-agent", version), cache_dir())


HERMES_IN_PROCESS = """
import atexit, importlib.util, json, shutil, sys, tempfile, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("hermes_adapter", sys.argv[1])
adapter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(adapter)
rounds, others = int(sys.argv[2]), int(sys.argv[3])
home = adapter.private_home()  # Hermes' imports make its home: never the user's
atexit.register(shutil.rmtree, home, True)  # removed however the rounds end
with tempfile.TemporaryDirectory(prefix="memspec-bench-") as scratch:
    session = adapter.HermesSession(Path(scratch), 2200, 1375)
    session.handle("load", {})
    for index in range(others):
        note = f"Standing note {index}: keep this one"
        session.handle("add", {"target": "memory", "content": note})
    spent = {"add": 0.0, "replace": 0.0, "remove": 0.0, "cpu": 0.0}
    for index in range(rounds):
        tag = f"Bench entry {index}:"
        for op, fields in (
            ("add", {"content": f"{tag} user prefers tabs over spaces"}),
            ("replace", {"old_text": tag, "new_content": f"{tag} user prefers spaces"}),
            ("remove", {"old_text": tag}),
        ):
            started, cpu = time.perf_counter(), time.process_time()
            answer = session.handle(op, {"target": "memory", **fields})
            spent[op] += time.perf_counter() - started
            spent["cpu"] += time.process_time() - cpu
            if answer.get("code") != "OK":
                raise SystemExit(f"{op} {fields} answered {answer}")
print(json.dumps(spent))
"""
"""The rounds of :func:`time_rounds`, run inside Hermes' environment on the adapter's session
(``HermesSession.handle``, what the adapter calls for each request), standard library only,
with every home Hermes reads in a scratch directory, as the adapter's own sessions have it."""


def _figures(spent: dict[str, float], rounds: int) -> dict[str, float]:
    """Per-second and per-mutation figures; ``cpu_ms_per_op`` is the timing process's CPU time
    (the store's own work when it runs in-process, the client's through JSON Lines)."""
    wall = {op: seconds for op, seconds in spent.items() if op != "cpu"}
    figures = {f"{op}_per_s": rounds / seconds for op, seconds in wall.items()}
    figures["ops_per_s"] = 3 * rounds / sum(wall.values())
    figures["ms_per_op"] = 1000 * sum(wall.values()) / (3 * rounds)
    figures["cpu_ms_per_op"] = 1000 * spent["cpu"] / (3 * rounds)
    return figures


def hermes_in_process(python: Path, rounds: int) -> dict[str, float]:
    """Mutations per second of Hermes' memory tool called in its own process, no transport."""
    command = [str(python), "-I", "-c", HERMES_IN_PROCESS, str(ADAPTER), str(rounds), str(OTHERS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise UsageError(f"the Hermes timing script failed: {done.stderr.strip()[-300:]}")
    return _figures(json.loads(done.stdout), rounds)


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    by_speed = sorted(runs, key=lambda figures: figures["ops_per_s"])
    return by_speed[len(by_speed) // 2]


class DirectBackend:
    """The reference store called directly, as the Hermes script calls its session: no harness
    layer (answer validation, the session's thread) in between."""

    def open(self, root: Path) -> DirectBackend:
        self.store = open_store(root)
        return self

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if op == "load":
            self.store.load()
            return {"ok": True, "code": "OK"}
        return dict(getattr(self.store, op)(**fields))

    def close(self) -> None:
        self.store.close()


def section_ops(rounds: int, hermes: str, repeat: int) -> dict[str, Any]:
    """Each store ``repeat`` times, alternating, through each path; the median run of each."""
    serve = f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"
    measured: dict[str, Callable[[], dict[str, float]]] = {
        "reference, JSON Lines": lambda: store_speed(CommandBackend(serve, 30.0), rounds),
        "reference, in-process": lambda: store_speed(DirectBackend(), rounds),
    }
    results: dict[str, Any] = {}
    try:
        python = hermes_python(hermes)
    except UsageError as error:
        results[f"hermes-agent {hermes}"] = {"error": str(error)}
    else:
        command = adapter_command(python)
        measured[f"hermes-agent {hermes}, JSON Lines"] = lambda: store_speed(
            CommandBackend(command, 30.0), rounds
        )
        measured[f"hermes-agent {hermes}, in-process"] = lambda: hermes_in_process(python, rounds)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in measured}
    for _ in range(repeat):
        for name, measure in measured.items():
            runs[name].append(measure())
    results.update({name: _median(found) for name, found in sorted(runs.items())})
    return results


def render_ops(results: dict[str, Any], rounds: int, repeat: int) -> str:
    lines = [
        f"{rounds} rounds of add, replace, remove on MEMORY.md beside {OTHERS} other entries; "
        f"the median of {repeat} alternating runs",
        "",
        "| store, path | mutations/s | ms/mutation | CPU ms/mutation | add/s | replace/s "
        "| remove/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in list(results.items()):
        if "error" in f:
            lines.append(f"| {name} | not measured: {f['error']} | | | | | |")
            continue
        cpu = f"{f['cpu_ms_per_op']:.2f}" if name.endswith("in-process") else "—"
        lines.append(
            f"| {name} | {f['ops_per_s']:.0f} | {f['ms_per_op']:.2f} | {cpu} "
            f"| {f['add_per_s']:.0f} | {f['replace_per_s']:.0f} | {f['remove_per_s']:.0f} |"
        )
    for path in ("JSON Lines", "in-process"):
        ours = results.get(f"reference, {path}", {}).get("ops_per_s")
        theirs = [f["ops_per_s"] for name, f in results.items()
                  if name.startswith("hermes-agent") and name.endswith(path)]  # fmt: skip
        if ours and theirs:
            lines.append(f"\nreference / hermes-agent, {path} for both: {ours / theirs[0]:.2f}x")
    return "\n".join(lines)


# --- the fsync floor --------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _per_call(action: Callable[[int], None], count: int) -> float:
    for index in range(-10, 0):  # warm up: the first calls allocate blocks and journal space
        action(index)
    started = time.perf_counter()
    for index in range(count):
        action(index)
    return (time.perf_counter() - started) / count


def section_fsync(count: int, reference_ms: float | None) -> dict[str, float]:
    """Milliseconds per small synced write, with and without the directory, and per durable
    atomic write, in a temporary directory like the stores' roots."""
    data = b"User prefers tabs\n\xc2\xa7\nEditor: helix" * 4
    with tempfile.TemporaryDirectory(prefix="memspec-fsync-") as scratch:
        root = Path(scratch)
        target = root / "MEMORY.md"

        def file_only(_: int) -> None:
            _write_synced(target, data)

        def file_and_dir(_: int) -> None:
            _write_synced(target, data)
            _fsync_dir(root)

        def atomic(index: int) -> None:
            temp = root / f".MEMORY.md.tmp.{index}"
            _write_synced(temp, data)
            os.replace(temp, target)
            _fsync_dir(root)

        figures = {
            "file_ms": 1000 * _per_call(file_only, count),
            "file_dir_ms": 1000 * _per_call(file_and_dir, count),
            "atomic_ms": 1000 * _per_call(atomic, count),
        }
    if reference_ms is None:
        reference_ms = store_speed(DirectBackend(), max(count // 3, 10))["ms_per_op"]
    figures["reference_ms"] = reference_ms
    return figures


def render_fsync(f: dict[str, float], count: int) -> str:
    rows = (
        ("write + fsync of a small file", f["file_ms"]),
        ("write + fsync of the file + fsync of its directory", f["file_dir_ms"]),
        ("durable atomic write: temp, fsync, rename, directory fsync", f["atomic_ms"]),
        ("reference store, one mutation in-process", f["reference_ms"]),
    )
    lines = [f"{count} calls each", "", "| what | ms | per second |", "|---|---|---|"]
    lines += [f"| {name} | {ms:.2f} | {1000 / ms:.0f} |" for name, ms in rows]
    lines += [
        "",
        f"reference mutation = {f['reference_ms'] / f['file_dir_ms']:.2f}x the file+dir floor, "
        f"{f['reference_ms'] / f['atomic_ms']:.2f}x a bare durable atomic write",
    ]
    return "\n".join(lines)


# --- certification, checkers, zoo -------------------------------------------------------------


def section_certify(profiles: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Wall seconds and the summary line of certifying the reference per profile."""
    results: dict[str, dict[str, Any]] = {}
    for profile in profiles:
        command = [sys.executable, "-m", "memspec.conformance", "certify", "--backend"]
        command += [REFERENCE, "--profile", profile, "-q"]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=7200)
        lines = done.stdout.strip().splitlines()
        results[profile] = {
            "seconds": time.monotonic() - started,
            "summary": lines[-1] if lines else "",
            "status": done.returncode,
        }
    return results


def render_certify(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| profile | wall time | result |", "|---|---|---|"]
    for profile, r in results.items():
        lines.append(f"| `{profile}` | {r['seconds']:.0f} s | {r['summary']} |")
    return "\n".join(lines)


def section_lin(sizes: Sequence[str]) -> dict[str, dict[str, float]]:
    from benchmarks.linearizability import measure
    from memspec.conformance.checks.concurrency import SEED

    results = {}
    for size in sizes:
        processes, operations = (int(part) for part in size.split("x"))
        results[size] = measure(processes, operations, SEED)
    return results


def render_lin(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "| history | mutations | reader samples | cheap checkers | linearizability search "
        "| total check |",
        "|---|---|---|---|---|---|",
    ]
    for size, r in results.items():
        lines.append(
            f"| {size} | {r['mutations']:.0f} | {r['samples']:.0f} | {r['cheap']:.2f} s "
            f"| {r['linearizability']:.2f} s | {r['total']:.2f} s |"
        )
    return "\n".join(lines)


def section_zoo(path: Path) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read the zoo detections {path}: {error}") from None
    number = (int, float)
    if not isinstance(records, list) or not all(
        isinstance(r, dict)
        and isinstance(r.get("area"), str)
        and isinstance(r.get("wall"), number)
        and isinstance(r.get("to_first_failure"), (*number, type(None)))
        for r in records
    ):
        raise UsageError(
            f"{path} is not the JSON that python -m tests.zoo --json writes (a list of "
            "records with area, wall and to_first_failure)"
        )
    return records


def render_zoo(records: list[dict[str, Any]]) -> str:
    """Returns the time to detection per zoo area (the zoo's own results page has it too)."""
    from tests.zoo import render_areas

    return render_areas(records)


# --- the results page -------------------------------------------------------------------------

PAGE_INTRO = """Figures, not timed tests. Absolute times move with whatever else the machine is
doing: the load average is {load:.2f} at the start of the run (in the stamp) and
{load_end:.2f} at its end, on {cpus} CPUs."""

OPS_NOTE = """Rounds of add, replace and remove of one entry beside {others} others, at the default
limits, both stores through the same path: the same JSON Lines transport (`memspec serve` for
the reference, the Hermes adapter in the release's own environment, one session process each,
driven by the same harness client), or in-process for both (the reference's methods called
directly; Hermes' adapter session called directly by a small script inside its environment).
The reference fsyncs the temp file and then the directory after every rename; Hermes fsyncs
only the temp file."""

FSYNC_NOTE = """The same disk's floor, and the reference against it (each figure after ten warm-up
calls). A durable atomic write (new temp, fsync, rename, directory fsync) is the least any
store keeping ATOMIC-1 and ATOMIC-3 can do; the rest of a reference mutation is the lock, the
re-read under it, the stale-temp sweep and the digest record."""


def render_page(figures: dict[str, Any], args: argparse.Namespace) -> str:
    """Returns the body of the benchmarks results page: every section the run measured."""
    parts = [
        PAGE_INTRO.format(
            load=figures["load"], load_end=figures.get("load_end", figures["load"]),
            cpus=figures["cpus"],
        ),
    ]  # fmt: skip
    if "ops" in figures:
        parts += [
            f"## Store speed against hermes-agent {args.hermes}",
            OPS_NOTE.format(others=OTHERS),
            render_ops(figures["ops"], args.rounds, args.repeat),
        ]
    if "fsync" in figures:
        parts += ["## The fsync floor", FSYNC_NOTE, render_fsync(figures["fsync"], args.fsyncs)]
    if "certify" in figures:
        parts += [
            "## Certification of the reference",
            "Wall time of `memspec certify --backend memspec.reference_impl:open_store` per "
            "profile, each in its own process.",
            render_certify(figures["certify"]),
        ]
    if "lin" in figures:
        parts += [
            "## The linearizability checker",
            "By history size (sessions x operations), one real history of the reference each; "
            "`python -m benchmarks.linearizability` has more sizes.",
            render_lin(figures["lin"]),
        ]
    if "scale" in figures:
        from benchmarks.scaling import render_scale

        parts += [
            "## By the size of the memory file",
            "The reference store in-process on a MEMORY.md of entries of about 100 code points "
            "filling its limit, the median of the rounds; the spec's parse is what every judge "
            "does to the file's bytes (`python -m benchmarks.scaling`).",
            render_scale(figures["scale"]),
        ]
    if "zoo" in figures:
        parts += [
            "## Time to detection per zoo area",
            "From the JSON of `python -m tests.zoo --json` (`--zoo`); the zoo's own page, "
            "[zoo.md](zoo.md), has the same table from its run.",
            render_zoo(figures["zoo"]),
        ]
    return "\n\n".join(parts)


# --- the command ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--only", metavar="LIST", help=f"comma-separated sections of {','.join(SECTIONS)}"
    )
    parser.add_argument("--rounds", type=int, default=100, help="add/replace/remove rounds")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per store")
    parser.add_argument("--fsyncs", type=int, default=200, help="calls per fsync-floor figure")
    parser.add_argument("--hermes", default="0.19.0", metavar="VERSION", help="hermes-agent")
    parser.add_argument("--thorough", action="store_true", help="also certify with thorough")
    parser.add_argument("--lin", default=",".join(LIN_SIZES), help="history sizes, NxM,...")
    parser.add_argument("--zoo", metavar="FILE", help="JSON from python -m tests.zoo --json")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    parser.add_argument(
        "--page", metavar="FILE", help="also write the results page (docs/results/benchmarks.md)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = PageRun.start("python -m benchmarks.bench", argv)
    sections = args.only.split(",") if args.only else [s for s in SECTIONS if s != "zoo"]
    if args.zoo and not args.only:
        sections.append("zoo")
    unknown = sorted(set(sections) - set(SECTIONS))
    sizes = args.lin.split(",")
    if unknown or min(args.rounds, args.fsyncs, args.repeat) < 1:
        parser.error(f"unknown sections {unknown}" if unknown else "counts must be positive")
    if args.json and not Path(args.json).absolute().parent.is_dir():
        parser.error(f"--json {args.json}: no such directory")
    if args.page and writable_page(args.page):
        parser.error(str(writable_page(args.page)))
    if "zoo" in sections and not args.zoo:
        parser.error("the zoo section reads --zoo FILE (from python -m tests.zoo --json)")
    if not all(re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", size) for size in sizes):
        parser.error(f"--lin sizes are positive NxM, like 4x25; got {args.lin!r}")
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}
    print(f"{os.cpu_count()} CPUs, load average {figures['load']:.1f}", flush=True)
    try:
        if "ops" in sections:
            figures["ops"] = section_ops(args.rounds, args.hermes, args.repeat)
            rendered = render_ops(figures["ops"], args.rounds, args.repeat)
            print("\n## Store speed\n\n" + rendered, flush=True)
        if "fsync" in sections:
            in_process = figures.get("ops", {}).get("reference, in-process", {})
            figures["fsync"] = section_fsync(args.fsyncs, in_process.get("ms_per_op"))
            print("\n## fsync floor\n\n" + render_fsync(figures["fsync"], args.fsyncs), flush=True)
        if "certify" in sections:
            profiles = ["smoke", "ci", *(["thorough"] if args.thorough else [])]
            figures["certify"] = section_certify(profiles)
            print("\n## Certify wall time\n\n" + render_certify(figures["certify"]), flush=True)
        if "lin" in sections:
            figures["lin"] = section_lin(sizes)
            print("\n## Linearizability checker\n\n" + render_lin(figures["lin"]), flush=True)
        if "scale" in sections:
            from benchmarks.scaling import render_scale, section_scale

            figures["scale"] = section_scale(args.repeat)
            print("\n## By file size\n\n" + render_scale(figures["scale"]), flush=True)
        if "zoo" in sections:
            figures["zoo"] = section_zoo(Path(args.zoo))
            print("\n## Time to detection\n\n" + render_zoo(figures["zoo"]), flush=True)
    except UsageError as error:
        print(f"python -m benchmarks.bench: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        except OSError as error:
            print(f"python -m benchmarks.bench: error: cannot write {args.json}: {error}",
                  file=sys.stderr)  # fmt: skip
            return 2
    if args.page:
        figures["load_end"] = os.getloadavg()[0]
        body = render_page(figures, args)
        print(f"page: {run.write(args.page, 'Benchmarks', body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
