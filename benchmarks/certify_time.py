"""Certification time per backend, where it goes, and how fast ``memspec serve`` starts.

Run from the project root (figures, not tests; each section prints a Markdown table)::

    python -m benchmarks.certify_time                       # the default backends, twice
    python -m benchmarks.certify_time --repeat 1 --backend memspec.reference_impl:open_store
    python -m benchmarks.certify_time --page docs/results/certify-time.md

Sections:

- ``certify``: wall time of ``CI=true memspec certify ... -n WORKERS`` (profile ``ci``) of each
  backend, ``--repeat`` times, with the load average before and after each run, the summary line
  and the slowest checks of the first run (from its ``junit.xml``); for a backend that fails,
  the time to its first failure: when the progress line showed the first ``F``, against the
  run's whole wall time. The default backends are the
  reference in-process, the reference through ``memspec serve``, the two racy stores of
  ``tests/backends/procs.py``: ``open_no_lock`` (takes no lock) and ``open_data_file_lock``
  (locks ``MEMORY.md`` itself, whose inode each rename replaces), and where this machine runs
  them, the Node.js backend and the native one (``tests/backends/native``, built with ``cc``).
- ``usage``: where the time of each backend's first run goes, from the kernel's process
  accounting (:mod:`benchmarks.accounting`, which needs root): the processor time of the
  backend's own processes, of their starts, of ``strace`` and of the harness, the time the
  workers left idle, and the floor: the backend's own time spread over the workers.
- ``bounds``: each run against the reference certified in-process, the harness alone: serve and
  each failing store against it, each command backend against it plus its floor, and the least
  serve could take, one process per session, each costing what a Python that only imports the
  reference costs (:data:`IMPORT_REFERENCE`).
- ``sessions``: for each ``--backend-cmd``, one more run, one check at a time (``-n 1 -v``),
  through a wrapper that logs each process start (each session of a command backend is one);
  a start belongs to the check whose line ends next.
- ``serve``: the median wall time of one ``memspec serve`` session of the reference (start,
  open, load, one add, end of input), and the modules its start-up imports.

``--json FILE`` saves the runs, with the command and the commit; ``--before FILE`` reads such a
file, written by an earlier version on the same machine, and the page shows its wall times and
results beside this run's: before and after a change, each from its own command::

    git worktree add /tmp/before REV   # then, in its own venv:
    python -m benchmarks.certify_time --repeat 1 --no-sessions --json /tmp/before.json
    python -m benchmarks.certify_time --repeat 1 --no-sessions --before /tmp/before.json \
        --page docs/results/certify-time.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import selectors
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.accounting import Usage, accounting, read_records, tree_usage
from memspec.conformance.core.results_page import PageRun, writable_page

PROG = "python -m benchmarks.certify_time"
REFERENCE = "memspec.reference_impl:open_store"
SERVE = f"memspec serve --backend {REFERENCE}"
DEFAULT_BACKENDS = (
    ("--backend", REFERENCE),
    ("--backend-cmd", SERVE),
    ("--backend", "tests.backends.procs:open_no_lock"),
    ("--backend", "tests.backends.procs:open_data_file_lock"),
)
NODE = "node backends/node/memspec_backend.js"
NATIVE_SOURCE = Path(__file__).resolve().parent.parent / "tests/backends/native/memspec_backend.c"
SLOWEST = 6
"""Checks listed per backend, slowest first."""
TIMEOUT = 1800.0
"""Seconds one certification may take before it is reported as timed out."""
COUNTER = """#!/bin/sh
date +%%s.%%N >> "$MEMSPEC_SESSION_LOG"
exec %s
"""
"""The wrapper that counts a command backend's process starts: the time of each (a backend's
environment carries none of the test runner's variables, so nothing names the check)."""
CHECK_ENDED = re.compile(r"(?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) \S*::test_\w+\[([^\]]+)\]")
"""A line of ``certify -v`` that says a check or example ended, with its id."""


PROGRESS = re.compile(r"[.FsExX]*")
"""A progress line of pytest's, as far as it has come: one character per check run."""


@dataclass(frozen=True)
class Run:
    """A Run is one certification: wall seconds, load average before and after, summary, the
    slowest checks (id, seconds, status), and the seconds after its start at which its progress
    showed the first failing check (``None``: none failed)."""

    seconds: float
    load: tuple[float, float]
    summary: str
    slowest: tuple[tuple[str, float, str], ...]
    first_failure: float | None = None
    usage: Usage | None = None


@dataclass
class Progress:
    """What :func:`read_progress` read of a certification: its output, exit status and process
    id, the seconds after its start at which a progress line first showed ``F`` (``None``:
    never), and each whole line with the time (``time.time()``) it ended."""

    output: str
    status: int
    pid: int
    first_failure: float | None
    lines: list[tuple[float, str]]


def read_progress(command: list[str], env: dict[str, str], timeout: float) -> Progress:
    """Runs ``command`` (a certification that prints its progress) and returns what it read.
    Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds, the process killed."""
    started = time.monotonic()
    first: float | None = None
    output, line = bytearray(), bytearray()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**env, "PYTHONUNBUFFERED": "1"},
    ) as process, selectors.DefaultSelector() as selector:  # fmt: skip
        assert process.stdout is not None
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                process.kill()
                raise subprocess.TimeoutExpired(command, timeout)
            if not selector.select(left):
                continue
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            for byte in chunk:
                if byte == ord("\n"):
                    lines.append((time.time(), line.decode("utf-8", "replace")))
                    line.clear()
                    continue
                line.append(byte)
                if first is None and byte == ord("F") and PROGRESS.fullmatch(line.decode()):
                    first = time.monotonic() - started
            output += chunk
        status = process.wait()
    return Progress(output.decode("utf-8", "replace"), status, process.pid, first, lines)


def slowest_checks(junit: str, count: int) -> tuple[tuple[str, float, str], ...]:
    """Returns the ``count`` slowest test cases of a junit.xml text: (id, seconds, status)."""
    cases = []
    for case in ElementTree.fromstring(junit).iter("testcase"):
        name = case.get("name", "").removeprefix("test_check[").removeprefix("test_example[")
        status = "failed" if case.find("failure") is not None else "passed"
        status = "skipped" if case.find("skipped") is not None else status
        cases.append((name.rstrip("]"), float(case.get("time", 0)), status))
    return tuple(sorted(cases, key=lambda case: -case[1])[:count])


def certify_once(
    flag: str, backend: str, workers: int, env: dict[str, str], *, verbose: bool = False
) -> tuple[Run, Progress | None]:
    """Certifies ``backend`` once (profile ci) and returns the Run, with the processor time of
    its processes by kind where process accounting can be turned on, and what was read of it
    (``None``: it timed out)."""
    with tempfile.TemporaryDirectory(prefix="memspec-bench-") as report:
        command = ["memspec", "certify", flag, backend, "-n", str(workers), "--report", report]
        before = os.getloadavg()[0]
        started = time.monotonic()
        progress: Progress | None = None
        usage: Usage | None = None
        with accounting(Path(report, "pacct")) as recorded:
            try:
                progress = read_progress(
                    [*command, *(["-v"] if verbose else [])], {**env, "CI": "true"}, TIMEOUT
                )
                lines = progress.output.strip().splitlines()
                summary = lines[-1] if lines else f"no output (status {progress.status})"
            except subprocess.TimeoutExpired:
                summary = f"timed out after {TIMEOUT:g} s"
            seconds = time.monotonic() - started
        if recorded is not None and progress is not None:
            records = read_records(recorded.read_bytes())
            usage = tree_usage(records, progress.pid, backend_name(flag, backend))
        junit = Path(report, "junit.xml")
        slowest = (
            slowest_checks(junit.read_text(encoding="utf-8"), SLOWEST) if junit.is_file() else ()
        )
    first = progress.first_failure if progress else None
    load = (before, os.getloadavg()[0])
    return Run(seconds, load, summary, slowest, first, usage), progress


def other_languages() -> list[tuple[str, str]]:
    """Returns the default command backends in other languages that this machine can run: the
    Node.js backend where ``node`` is on PATH, the native one (``tests/backends/native``) where
    ``cc`` builds it, into ``memspec-native`` under the temporary directory."""
    found = [("--backend-cmd", NODE)] if shutil.which("node") else []
    binary = Path(tempfile.gettempdir(), "memspec-native", "memspec_backend")
    binary.parent.mkdir(exist_ok=True)
    build = ["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-o", str(binary), str(NATIVE_SOURCE)]
    if shutil.which("cc") and subprocess.run(build, capture_output=True).returncode == 0:
        found.append(("--backend-cmd", str(binary)))
    return found


def command_label(command: str) -> str:
    """Returns how the page names a command backend: its ``--backend-cmd`` option, with this
    machine's temporary directory (where the native backend is built) written ``$TMPDIR``."""
    return f"--backend-cmd '{command.replace(tempfile.gettempdir(), '$TMPDIR')}'"


def backend_name(flag: str, backend: str) -> str | None:
    """Returns the command name the kernel gives the processes of a command backend (its
    program's file name), ``None`` for a Python backend, which runs inside the harness."""
    return Path(shlex.split(backend)[0]).name if flag == "--backend-cmd" else None


def count_sessions(command: str) -> tuple[int, Counter[str]]:
    """Certifies the command backend ``command`` once more, one check at a time, through the
    counting wrapper; returns the number of processes started and how many each check started
    (a process belongs to the check whose line ``-v`` prints next after it started)."""
    with tempfile.TemporaryDirectory(prefix="memspec-sessions-") as folder:
        wrapper, log = Path(folder, "counting.sh"), Path(folder, "sessions.log")
        wrapper.write_text(COUNTER % command, encoding="utf-8")
        wrapper.chmod(0o755)
        log.touch()
        env = {**os.environ, "MEMSPEC_SESSION_LOG": str(log)}
        _, progress = certify_once("--backend-cmd", shlex.quote(str(wrapper)), 1, env, verbose=True)
        starts = sorted(float(line) for line in log.read_text(encoding="utf-8").split())
    return len(starts), starts_by_check(starts, progress.lines if progress else [])


def starts_by_check(starts: Sequence[float], lines: Sequence[tuple[float, str]]) -> Counter[str]:
    """Returns how many of the process ``starts`` (times) each check made: a start belongs to
    the first check whose ``-v`` line (with the time it ended) ends after it."""
    ended = [(at, match.group(1)) for at, line in lines if (match := CHECK_ENDED.search(line))]
    per_check: Counter[str] = Counter()
    for start in starts:
        check = next((name for at, name in ended if at >= start), "(after the last check)")
        per_check[check] += 1
    return per_check


def start_cpu(command: str, runs: int) -> float:
    """Returns the median processor seconds (user and system) of ``command`` started with an
    empty standard input, run to its end: what one process start of the backend costs."""
    spent = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(shlex.split(command), stdin=subprocess.DEVNULL, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(spent)


def serve_session_ms(runs: int) -> float:
    """Returns the median milliseconds of one ``memspec serve`` session of the reference."""
    times = []
    with tempfile.TemporaryDirectory(prefix="memspec-serve-") as root:
        requests = (
            f'{{"id": 0, "op": "open", "root": "{root}"}}\n{{"id": 1, "op": "load"}}\n'
            '{"id": 2, "op": "add", "target": "memory", "content": "User prefers tabs"}\n'
        )
        for _ in range(runs + 1):  # the first run may compile what later runs reuse
            started = time.perf_counter()
            subprocess.run(shlex.split(SERVE), input=requests, capture_output=True, text=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:]) * 1000


def serve_imports() -> tuple[int, int, list[str]]:
    """Returns the modules ``memspec serve``'s start-up imports: their count, their summed own
    import time (µs, ``python -X importtime``) and which of pytest/hypothesis they include."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memspec.conformance", *shlex.split(SERVE)[1:]],
        input="", capture_output=True, text=True,
    )  # fmt: skip
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
    rows = [row for row in rows[1:] if len(row) == 3]
    names = {row[2].strip().split(".")[0] for row in rows}
    own = sum(int(row[0].removeprefix("import time:").strip()) for row in rows)
    return len(rows), own, sorted(names & {"pytest", "_pytest", "hypothesis"})


BEFORE_FORMAT = 1
"""The version of the file ``--json`` writes and ``--before`` reads."""


def runs_json(command: str, results: dict[str, list[Run]]) -> dict[str, object]:
    """Returns what ``--json`` saves: the command, the commit of this checkout and each
    backend's runs."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()  # fmt: skip
    return {
        "format": BEFORE_FORMAT,
        "command": command,
        "commit": commit or "unknown",
        "runs": {
            label: [dataclasses.asdict(run) for run in runs] for label, runs in results.items()
        },
    }


def read_before(path: str) -> dict[str, object]:
    """Returns the runs file ``path`` that ``--json`` wrote; raises ValueError saying what is
    wrong with it."""
    try:
        saved = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"--before {path}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"--before {path}: not JSON ({error})") from None
    if not isinstance(saved, dict) or saved.get("format") != BEFORE_FORMAT:
        raise ValueError(f"--before {path}: not a file of --json (format {BEFORE_FORMAT})")
    runs = saved.get("runs")
    if not isinstance(runs, dict) or not all(map(_runs_shape, runs.values())):
        raise ValueError(f"--before {path}: 'runs' must map each backend to its runs")
    return saved


def _runs_shape(rows: object) -> bool:
    """Whether ``rows`` are a backend's runs as ``--json`` saves them (seconds, summary)."""
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(
            isinstance(row, dict)
            and isinstance(row.get("seconds"), int | float)
            and isinstance(row.get("summary"), str)
            for row in rows
        )
    )


def render_before(before: dict[str, object], results: dict[str, list[Run]]) -> str:
    """Returns the section that sets the first run of each backend beside its first run in
    ``before`` (a file of ``--json``), for the backends both have."""
    runs = before["runs"]
    assert isinstance(runs, dict)
    lines = [
        f"Before: `{before.get('command')}` at `{before.get('commit')}`, on this machine; "
        "after: this page's command. The first run of each backend in both.",
        "",
        "| backend | before: wall time, result | after: wall time, result |",
        "|---|---|---|",
    ]
    for backend, after in results.items():
        if backend in runs:
            old = runs[backend][0]
            lines.append(
                f"| `{backend}` | {old['seconds']:.0f} s, {old['summary']} "
                f"| {after[0].seconds:.0f} s, {after[0].summary} |"
            )
    return "\n".join(lines)


def render_certify(results: dict[str, list[Run]]) -> str:
    """Returns the certify section: one row per run, then the slowest checks per backend."""
    lines = [
        "| backend | run | wall time | load before → after | result |",
        "|---|---|---|---|---|",
    ]
    for backend, runs in results.items():
        for number, run in enumerate(runs, 1):
            load = f"{run.load[0]:.1f} → {run.load[1]:.1f}"
            lines.append(
                f"| `{backend}` | {number} | {run.seconds:.0f} s | {load} | {run.summary} |"
            )
    failing = {backend: runs for backend, runs in results.items() if runs[0].first_failure}
    if failing:
        lines += ["", "Time to the first failure (the first `F` of the progress line):", ""]
    for backend, runs in failing.items():
        shown = ", ".join(
            f"{run.first_failure:.0f} s of {run.seconds:.0f} s"
            if run.first_failure is not None
            else f"none shown in {run.seconds:.0f} s"
            for run in runs
        )
        lines.append(f"- `{backend}`: {shown}")
    for backend, runs in results.items():
        lines += ["", f"Slowest checks of `{backend}` (first run):", ""]
        lines += [
            f"- {name}: {seconds:.1f} s ({status})" for name, seconds, status in runs[0].slowest
        ]
    return "\n".join(lines)


USAGE_NOTE = """\
The first run of each backend, its processes' processor time from the kernel's process
accounting (`benchmarks/accounting.py`; it needs root, and is left out without it): the
backend's own processes (each session of a command backend is one; a Python backend runs inside
the harness's), of that the time its process starts take (their number times the processor
time of one start with an empty input, measured apart), `strace` (the sessions the harness
traces), and the harness (certify, its workers and every other process it started). Idle is
the processor time the run's workers left unused (workers × wall time − all processes' time):
waiting for answers, sleeps, timeouts. The floor is the backend's own processor time spread
over the workers: the wall time its processes need alone."""


def render_usage(results: dict[str, list[Run]], starts: dict[str, float], workers: int) -> str:
    """Returns the section on where each backend's time goes (:data:`USAGE_NOTE`)."""
    lines = [
        USAGE_NOTE,
        "",
        "| backend | wall time | all processes | backend | of it starts | strace | harness "
        "| idle | floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, runs in results.items():
        run, usage = runs[0], runs[0].usage
        if usage is None:
            lines.append(f"| `{backend}` | {run.seconds:.0f} s | not recorded |||||||")
            continue
        idle = max(0.0, workers * run.seconds - usage.total)
        if backend in starts:
            own = f"{usage.backend:.0f} s in {usage.backend_processes} processes"
            started = f"{usage.backend_processes * starts[backend]:.0f} s"
            floor = f"{usage.backend / workers:.0f} s"
        else:
            own, started, floor = "in the harness", "—", "—"
        lines.append(
            f"| `{backend}` | {run.seconds:.0f} s | {usage.total:.0f} s | {own} | {started} "
            f"| {usage.tracing:.0f} s | {usage.harness:.0f} s | {idle:.0f} s | {floor} |"
        )
    if starts:
        lines += ["", "The processor time of one process start (median of `--serve-runs`):", ""]
        lines += [f"- {backend}: {seconds * 1000:.0f} ms" for backend, seconds in starts.items()]
    return "\n".join(lines)


BOUNDS_NOTE = """\
Each figure of this run against the reference certified in-process, which is the harness
alone: the reference through `memspec serve` (the same store, one process per session), each
store that fails (its time to its verdict), and each command backend against its ideal, the
harness alone plus its floor (the backend's own processor time over the workers): what the run
would take if the harness added nothing to the backend's own work. The last row is the least
`memspec serve` could take, its sessions kept one process each: the harness alone plus its
processes, each costing only what a Python that imports the reference and does nothing else
costs (`python -c 'import memspec.reference_impl'`, its median processor time), over the
workers."""
IMPORT_REFERENCE = f"{shlex.quote(sys.executable)} -c 'import {REFERENCE.partition(':')[0]}'"
"""A Python that starts, imports the reference and ends: the least one serve session costs."""


def render_bounds(results: dict[str, list[Run]], workers: int, least_start: float = 0.0) -> str:
    """Returns the section that sets this run's times against the in-process reference's
    (:data:`BOUNDS_NOTE`), or an empty string when the reference was not certified in-process;
    ``least_start`` is the processor time of :data:`IMPORT_REFERENCE` (no last row without
    it)."""
    if REFERENCE not in results:
        return ""
    alone = results[REFERENCE][0].seconds
    lines = [BOUNDS_NOTE, "", "| backend | wall time | against | ratio |", "|---|---|---|---|"]
    for backend, runs in results.items():
        run = runs[0]
        if backend == REFERENCE:
            continue
        if backend == command_label(SERVE) or run.first_failure is not None:
            lines.append(f"| `{backend}` | {run.seconds:.0f} s | in-process {alone:.0f} s "
                         f"| {run.seconds / alone:.1f}× |")  # fmt: skip
        if backend.startswith("--backend-cmd") and run.usage is not None:
            ideal = alone + run.usage.backend / workers
            lines.append(f"| `{backend}` | {run.seconds:.0f} s | ideal {ideal:.0f} s "
                         f"| {run.seconds / ideal:.1f}× |")  # fmt: skip
    served = results.get(command_label(SERVE))
    usage = served[0].usage if served else None
    if usage is not None and least_start > 0:
        least = alone + usage.backend_processes * least_start / workers
        lines.append(f"| at least, {usage.backend_processes} processes × {least_start * 1000:.0f} "
                     f"ms | {least:.0f} s | in-process {alone:.0f} s "
                     f"| {least / alone:.1f}× |")  # fmt: skip
    return "\n".join(lines)


def render_sessions(counts: dict[str, tuple[int, Counter[str]]]) -> str:
    """Returns the sessions section: processes started per command backend and per check."""
    lines = []
    for command, (total, per_check) in counts.items():
        lines += [f"`{command}`: {total} processes started; by check:", ""]
        lines += [f"- {name}: {count}" for name, count in per_check.most_common(10)]
        lines.append("")
    return "\n".join(lines).rstrip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", default=[], metavar="MODULE:FACTORY",
                        help="certify this Python backend (repeatable)")  # fmt: skip
    parser.add_argument("--backend-cmd", action="append", default=[], metavar="CMD",
                        help="certify this command backend (repeatable)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=2, help="certifications per backend")
    parser.add_argument("--workers", "-n", type=int, default=2, help="certify -n (default 2)")
    parser.add_argument("--serve-runs", type=int, default=15, help="serve sessions timed")
    parser.add_argument("--no-sessions", action="store_true", help="skip counting processes")
    parser.add_argument("--page", metavar="FILE", help="also write the results page")
    parser.add_argument("--json", metavar="FILE", help="also save the runs, for a later --before")
    parser.add_argument("--before", metavar="FILE",
                        help="an earlier version's --json file, shown beside this run")  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = PageRun.start(PROG, argv)
    if min(args.repeat, args.workers, args.serve_runs) < 1:
        parser.error("--repeat, --workers and --serve-runs must be positive")
    for page in (args.page, args.json):
        if page and writable_page(page):
            parser.error(str(writable_page(page)).replace("--page", "--page/--json"))
    before = None
    if args.before:
        try:
            before = read_before(args.before)
        except ValueError as error:
            parser.error(str(error))
    chosen = [("--backend", b) for b in args.backend] + [
        ("--backend-cmd", c) for c in args.backend_cmd
    ]
    backends = chosen or [*DEFAULT_BACKENDS, *other_languages()]
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    results: dict[str, list[Run]] = {}
    for flag, backend in backends:
        label = backend if flag == "--backend" else command_label(backend)
        results[label] = [certify_once(flag, backend, args.workers, dict(os.environ))[0]
                          for _ in range(args.repeat)]  # fmt: skip
        print(f"{label}: " + ", ".join(f"{r.seconds:.0f} s" for r in results[label]), flush=True)
    parts = ["## Certification wall time", render_certify(results)]
    if before is not None:
        parts += ["## Before and after", render_before(before, results)]
    commands = [backend for flag, backend in backends if flag == "--backend-cmd"]
    starts = {command_label(c): start_cpu(c, args.serve_runs) for c in commands}
    parts += ["## Where the time goes", render_usage(results, starts, args.workers)]
    least_start = start_cpu(IMPORT_REFERENCE, args.serve_runs) if SERVE in commands else 0.0
    bounds = render_bounds(results, args.workers, least_start)
    if bounds:
        parts += ["## Against the harness alone", bounds]
    if commands and not args.no_sessions:
        counts = {command: count_sessions(command) for command in commands}
        parts += ["## Processes a command backend starts", render_sessions(counts)]
    ms = serve_session_ms(args.serve_runs)
    modules, own, harness = serve_imports()
    parts += [
        "## memspec serve start-up",
        f"One session of `{SERVE}` (start, open, load, one add, end of input): median "
        f"{ms:.0f} ms over {args.serve_runs} runs. Its start-up imports {modules} modules "
        f"({own / 1000:.0f} ms of their own import time); of pytest and Hypothesis: "
        f"{', '.join(harness) or 'none'}.",
    ]
    body = "\n\n".join(parts) + "\n"
    print("\n" + body, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs_json(run.command, results), indent=1) + "\n")
        print(f"runs: {args.json}")
    if args.page:
        print(f"page: {run.write(args.page, 'Certification time', body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
