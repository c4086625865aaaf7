"""The ``hermes``, ``matrix`` and ``sweep`` subcommands of ``memspec`` (they print; see cli.py),
and what ``memspec provider`` shares with them: ``--cache``, ``--python`` and a release's
environment prepared.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.core.options import (
    EXPECTED_FAILURES,
    PROFILE,
    QUIET,
    REPORT,
    SELECT,
    TIMEOUT,
    WORKERS,
    Option,
    add_options,
)
from memspec.conformance.core.results_page import PageRun, scrub_paths, writable_page
from memspec.conformance.core.subcommands import add_command
from memspec.conformance.core.waits import RELEASE_CALL_TIMEOUT
from memspec.conformance.hermes.failure_notes import NO_EXPLANATION, explain
from memspec.conformance.hermes.lineage import Base, Sources, memory_sources, nearest_release
from memspec.conformance.hermes.matrix import (
    Change,
    Column,
    Matrix,
    matrix_json,
    render_html,
    render_markdown,
    render_timeline_html,
    render_timeline_markdown,
    timeline,
)
from memspec.conformance.hermes.releases import (
    Build,
    LocalBuild,
    Release,
    adapter_command,
    describe_venv,
    ensure_venv,
    index_versions,
    read_ready,
    versions_between,
)
from memspec.conformance.verdict.findings import shorten
from memspec.spec.errors import UsageError

if TYPE_CHECKING:
    from memspec.conformance.core.settings import Settings

CERTIFY_TIMEOUT = 7200.0
CACHE = Option(
    "cache",
    "DIR",
    "where Hermes environments are kept (default $MEMSPEC_CACHE_DIR, "
    "$XDG_CACHE_HOME/memspec or ~/.cache/memspec)",
)
PYTHON = Option(
    "python", "PATH", "the interpreter Hermes environments are created with (default: this one)"
)
RUN_OPTIONS = (REPORT, EXPECTED_FAILURES, SELECT, QUIET)
"""The options of certify that ``hermes`` and ``provider`` take as they are, beside
``--profile``, ``--workers`` and ``--timeout`` (:func:`release_settings` reads them all)."""


def _release(text: str) -> Release:
    """Returns the release named ``PKG==VER`` or ``PKG`` (its latest version on the index)."""
    package, _, version = text.partition("==")
    if not version:
        Release(package, "0")
        version = index_versions(package)[-1]
    return Release(package, version)


def prepare(
    release: Build, cache: str | None, python: str | None, beside: Release | None = None
) -> Path:
    """Returns the interpreter of ``release``'s environment (with ``beside`` installed in it
    too) in the cache ``--cache`` names, built with ``--python`` first if needed; prints what it
    prepares and what it found."""
    extra = f" with {beside.label}" if beside is not None else ""
    print(f"memspec: preparing {release.label}{extra} (cache {cache_dir(cache)})", flush=True)
    interpreter = ensure_venv(release, cache_dir(cache), python, beside=beside)
    print(f"memspec: {describe_venv(interpreter)}", flush=True)
    return interpreter


def hermes_command(release: Build, cache: str | None, python: str | None) -> str:
    """Returns the ``--backend-cmd`` of ``release``, building its environment if needed."""
    return adapter_command(prepare(release, cache, python))


def release_settings(args: argparse.Namespace, **backend: Any) -> Settings:
    """Returns the settings of certifying, in a Hermes environment, the backend ``backend``
    names (``backend_cmd=`` or ``provider_cmd=``, with any other keyword of certify) with the
    options of ``args``; ``--timeout`` is :data:`RELEASE_CALL_TIMEOUT` unless given."""
    from memspec.conformance.commands.certify import settings_for

    return settings_for(
        base=Path.cwd(),
        profile=args.profile,
        workers=args.workers,
        timeout=args.timeout or RELEASE_CALL_TIMEOUT,
        report=args.report,
        expected_failures=args.expected_failures,
        select=args.select,
        quiet=args.quiet,
        **backend,
    )


def _build(args: argparse.Namespace) -> Build:
    """Returns the build ``memspec hermes`` certifies: ``--wheel``, ``--source`` or a release."""
    if args.wheel or args.source:
        if args.version:
            raise UsageError("--version names a release on the index; not with --wheel/--source")
        return LocalBuild(Path(args.wheel or args.source).absolute())
    return _release(f"{args.package}=={args.version}" if args.version else args.package)


def _certify_options(args: argparse.Namespace, release: bool = False) -> list[str]:
    """Returns certify's options for one backend: a Hermes ``release`` waits longer for an
    answer unless ``--timeout`` says otherwise (its agent starts at the first agent op)."""
    options = ["--profile", args.profile]
    if args.workers:
        options += ["-n", args.workers]
    timeout = args.timeout or (RELEASE_CALL_TIMEOUT if release else None)
    if timeout:
        options += ["--timeout", str(timeout)]
    return options


def certify_into(backend: Sequence[str], report: Path, options: Sequence[str]) -> int:
    """Runs ``memspec certify`` on one backend in a process of its own, writing ``report``;
    returns its exit status (its progress goes to this process's output)."""
    argv = [sys.executable, "-m", "memspec.conformance", "certify", *backend]
    argv += ["--report", str(report), "-q", *options]
    try:
        return subprocess.run(argv, timeout=CERTIFY_TIMEOUT, check=False).returncode
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"certifying {' '.join(backend)} took over {CERTIFY_TIMEOUT:g} s; try --profile smoke"
        ) from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=_-]+", "_", text).strip("_")[:80] or "backend"


def _certified_column(backend: Sequence[str], report: Path, options: Sequence[str]) -> Column:
    print(f"memspec: certifying {' '.join(backend)}", flush=True)
    status = certify_into(backend, report, options)
    if status not in (0, 1) or not (report / "report.json").exists():
        raise UsageError(f"certifying {' '.join(backend)} ended with status {status}; see above")
    return Column.load(report)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


def _page_run(args: argparse.Namespace) -> PageRun | None:
    """Returns the stamp's run of this ``matrix`` or ``sweep`` when ``--page`` is given: the
    command line as typed (rebuilt from the parsed options when memspec was called in-process).
    Checks first that ``--json`` can be written, before any backend is certified."""
    if args.json and not Path(args.json).absolute().parent.is_dir():
        raise UsageError(f"--json {args.json}: no such directory")
    if not args.page:
        return None
    if writable_page(args.page):
        raise UsageError(str(writable_page(args.page)))
    if sys.argv[1:2] == [args.command]:
        return PageRun.start("memspec", sys.argv[1:])
    argv = [args.command]
    for flag, name in _REBUILT:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list) else [value]:
            if item is True:
                argv.append(flag)
            elif item not in (None, False):
                argv += [flag, str(item)]
    return PageRun.start("memspec", argv)


_REBUILT = (
    ("--package", "package"),
    ("--from", "first"),
    ("--to", "last"),
    ("--out", "out"),
    ("--backend", "backend"),
    ("--backend-cmd", "backend_cmd"),
    ("--hermes", "hermes"),
    ("--from-report", "from_report"),
    ("--reuse", "reuse"),
    ("--profile", "profile"),
    ("-n", "workers"),
    ("--timeout", "timeout"),
    ("--page", "page"),
    ("--json", "json"),
)

MATRIX_INTRO = """Each backend certified with `memspec certify` (each in its own process). A clause
*fails* when a check citing it fails and its message does not blame another clause; it is
*skipped* when nothing verified it or when a check needed a feature the backend does not claim
(so a missing mechanism never reads as a pass), and *n/a* for rules of the agent that the
contract cannot observe."""


def render_explanations(matrix: Matrix) -> str:
    """Returns, for every clause that fails for some backend, the backends it fails for and
    the line of reasoning that explains it (clauses sharing both are listed together). The
    lines explain Hermes' memory tool: a clause failing for no Hermes column gets
    :data:`~memspec.conformance.hermes.failure_notes.NO_EXPLANATION`."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        failed = [
            column
            for column, verdict in zip(matrix.columns, row, strict=True)
            if verdict.status == "fail"
        ]
        failing = tuple(column.label for column in failed)
        if failing:
            hermes = any(
                "hermes" in f"{column.label} {column.run.get('name', '')}".lower()
                for column in failed
            )
            line = explain(clause.id) if hermes else NO_EXPLANATION
            groups.setdefault((line, failing), []).append(clause.id)
    if not groups:
        return "No clause fails for any backend."
    lines = []
    for (line, failing), clauses in groups.items():
        names = ", ".join(f"**{c}**" for c in clauses)
        lines.append(f"- {names} (fails for {', '.join(failing)}) — {line}")
    return "\n".join(lines)


def matrix_page(matrix: Matrix) -> str:
    """Returns the body of the matrix's results page: the table, every fail and skip with its
    reason, and why each failing clause fails."""
    return "\n\n".join(
        [
            MATRIX_INTRO,
            render_markdown(matrix, "The matrix").strip(),
            "## Why the real backends fail",
            "Reasoning, not measurement: one line per clause on why Hermes' memory tool fails it "
            "(kept in `conformance/hermes/failure_notes.py`; `#N` is the NousResearch/hermes-agent "
            "issue of the same bug), rendered for each clause this run saw fail, beside the "
            "backends it failed for.",
            render_explanations(matrix),
        ]
    )


def sweep_page(
    matrix: Matrix,
    changes: Sequence[Change],
    package: str,
    profile: str,
    later: Sequence[Release] = (),
    bases: Mapping[str, Base] | None = None,
    agents: Mapping[str, str] | None = None,
) -> str:
    """Returns the body of the sweep's results page: clause counts per release, each verdict
    change with why, the clause table of every release (columns in release order), then why
    each failing clause fails. ``later`` are the releases of later lines (``--then``) after the
    package's own, each compared with its base in ``bases`` (by label), listed first with what
    became of its agent (``agents``, :func:`agent_state`)."""
    own = matrix.columns[: len(matrix.columns) - len(later)]
    first, last = own[0].label, own[-1].label
    then = (
        ", then the later lines " + ", ".join(f"{r.package} {r.version}" for r in later)
        if later
        else ""
    )
    return "\n\n".join(
        [
            f"Every release of {package} on the package index from {first} to {last}{then}, "
            f"each certified in its own environment (profile `{profile}`), and for each clause "
            "the release where its verdict changed.",
            *_render_bases(bases or {}, agents or {}),
            "## Timeline",
            render_timeline_markdown(matrix, changes).strip(),
            render_markdown(matrix, "Every clause, every release").split("\n### ")[0].strip(),
            "## Why the releases fail",
            "Reasoning, not measurement: the line of `conformance/hermes/failure_notes.py` for "
            "each clause some release failed, beside the releases it failed in.",
            render_explanations(matrix),
        ]
    )


def _bases(
    sources: Mapping[str, Sources], own: Sequence[str], later: Sequence[str]
) -> dict[str, Base]:
    """Returns the base of each later line: the package's release whose memory modules share the
    most lines with its own (:func:`~memspec.conformance.hermes.lineage.nearest_release`)."""
    releases = [(label, sources[label]) for label in own]
    found = {label: nearest_release(sources[label], releases) for label in later}
    return {label: base for label, base in found.items() if base is not None}


def agent_state(ready: Mapping[str, Any] | None) -> str:
    """Returns, from an environment's ready file, whether an agent was built there, or why not
    (its first line, its paths written as ``~`` and ``$TMPDIR``); "" when the file says
    neither."""
    if ready is None or "agent_built" not in ready:
        return ""
    if ready["agent_built"]:
        return "built"
    why = scrub_paths(str(ready.get("agent_declined") or "no reason recorded")).splitlines()
    return "not built: " + shorten(why[0] if why else "").replace("|", "/")


def _render_bases(bases: Mapping[str, Base], agents: Mapping[str, str]) -> list[str]:
    """Returns the section of the sweep page that names each later line's base release and what
    became of its agent (the clauses of ``agent`` read skip where none was built)."""
    if not bases:
        return []
    rows = [
        f"| {label} | {base.label} | {base.shared:.1%} | {agents.get(label, '')} |"
        for label, base in bases.items()
    ]
    return [
        "## Later lines and their bases",
        "Each later line is compared with the release whose memory modules "
        "(`tools/memory_tool.py`, `tools/memory_tool_store.py`, `agent/memory_manager.py`) "
        "share the most lines with its own, the later of two that share as many: the release it "
        "was copied from, or the nearest one when it was rewritten.",
        "\n".join(["| later line | base | lines shared | agent |", "|---|---|---|---|", *rows]),
    ]


def _cmd_hermes(args: argparse.Namespace) -> int:
    from memspec.conformance.commands.certify import run_certification
    from memspec.conformance.commands.terminal import print_result

    command = hermes_command(_build(args), args.cache, args.python)
    return print_result(run_certification(release_settings(args, backend_cmd=command)))


def _out(args: argparse.Namespace) -> Path:
    """Returns ``--out``, or with only ``--page`` a new directory under the temporary one."""
    if args.out:
        return Path(args.out)
    if not args.page:
        raise UsageError(f"{args.command} needs --out DIR (or --page FILE)")
    out = Path(tempfile.mkdtemp(prefix=f"memspec-{args.command}-"))
    print(f"memspec: reports under {out}", flush=True)
    return out


def _cmd_matrix(args: argparse.Namespace) -> int:
    run = _page_run(args)
    out = _out(args)
    options = _certify_options(args)
    columns = [Column.load(Path(directory)) for directory in args.from_report]
    backends = [(s, ["--backend", s], options) for s in args.backend]
    backends += [(c, ["--backend-cmd", c], options) for c in args.backend_cmd]
    for text in args.hermes:
        release = _release(text)
        command = hermes_command(release, args.cache, args.python)
        backends.append((release.label, ["--backend-cmd", command], _certify_options(args, True)))
    if not columns and not backends:
        raise UsageError("name at least one backend or --from-report DIR")
    for name, backend, chosen in backends:
        columns.append(_certified_column(backend, out / "reports" / _slug(name), chosen))
    matrix = Matrix.build(columns)
    _write(out / "matrix.md", render_markdown(matrix))
    _write(out / "matrix.html", render_html(matrix))
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        level = matrix.level(index).name
        print(f"{column.label}: level {level}; " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    print(f"matrix: {out / 'matrix.md'}, {out / 'matrix.html'}")
    if args.json:
        _write(
            Path(args.json),
            scrub_paths(json.dumps(matrix_json(matrix, "The clause matrix"), indent=1)),
        )
        print(f"saved matrix: {args.json}")
    if run:
        print(f"page: {run.write(args.page, 'The clause matrix', matrix_page(matrix))}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    run = _page_run(args)
    out = _out(args)
    later = [_release(text) for text in args.then]
    versions = versions_between(index_versions(args.package), args.first, args.last)
    if not versions:
        raise UsageError(
            f"no release of {args.package} on the index between {args.first} and {args.last}"
        )
    releases = [(Release(args.package, v), v) for v in versions] + [(r, r.label) for r in later]
    print(f"memspec: sweeping {', '.join(label for _, label in releases)}", flush=True)
    columns: list[Column] = []
    sources: dict[str, Sources] = {}
    agents: dict[str, str] = {}
    for release, label in releases:
        report = out / _slug(release.label)
        python = prepare(release, args.cache, args.python)
        sources[label] = memory_sources(python)
        agents[label] = agent_state(read_ready(python.parent.parent))
        if args.reuse and (report / "report.json").exists():
            column = Column.load(report, label)
            if column.run.get("profile") == args.profile:
                columns.append(column)
                continue
        options = _certify_options(args, True)
        _certified_column(["--backend-cmd", adapter_command(python)], report, options)
        columns.append(Column.load(report, label))
    matrix = Matrix.build(columns)
    base = versions[-1] if later else None
    bases = _bases(sources, versions, [release.label for release in later])
    against = {label: of.label for label, of in bases.items()}
    changes = timeline(matrix, base, against)
    last = releases[-1][1]
    title = f"{args.package} {versions[0]} to {last}: memspec release sweep"
    _write(out / "timeline.md", f"## {title}\n\n" + render_timeline_markdown(matrix, changes))
    _write(out / "timeline.html", render_timeline_html(matrix, changes, title))
    _write(out / "matrix.md", render_markdown(matrix, title))
    print(f"{len(changes)} clause verdicts changed across {len(releases)} releases")
    print(f"timeline: {out / 'timeline.md'}, {out / 'timeline.html'}; matrix: {out / 'matrix.md'}")
    if args.json:
        saved = matrix_json(matrix, title, base, against)
        _write(Path(args.json), scrub_paths(json.dumps(saved, indent=1)))
        print(f"saved matrix: {args.json}")
    if run:
        body = sweep_page(matrix, changes, args.package, args.profile, later, bases, agents)
        page_title = f"Release sweep: {args.package} {versions[0]} to {last}"
        print(f"page: {run.write(args.page, page_title, body)}")
    return 0


RELEASE_TIMEOUT = dataclasses.replace(
    TIMEOUT,
    help=f"longest wait for one call of a Hermes release; default {RELEASE_CALL_TIMEOUT:g} "
    "(its first agent op imports the agent)",
)
"""``--timeout`` as ``hermes`` and ``sweep`` take it: every backend they certify is a release."""
MATRIX_TIMEOUT = dataclasses.replace(
    TIMEOUT, help=f"{TIMEOUT.help}, {RELEASE_CALL_TIMEOUT:g} for a Hermes release (--hermes)"
)


def _common(
    parser: argparse.ArgumentParser, profile: str, timeout: Option = RELEASE_TIMEOUT
) -> None:
    add_options(parser.add_argument, (PROFILE, WORKERS, timeout), defaults={"profile": profile})
    add_options(parser.add_argument, (CACHE, PYTHON))


def _page_option(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--page", metavar="FILE", help=f"also write the results page (docs/results/{name}.md)"
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help=f"also save the matrix as JSON (docs/results/{name}.json), which memspec site renders",
    )
    parser.set_defaults(command=name)


def add_parsers(commands: Any) -> None:
    """Adds the ``hermes``, ``matrix`` and ``sweep`` subcommands to memspec's parser."""
    hermes = add_command(
        commands, "hermes", "certify the memory tool of a Hermes release, fork or local build"
    )
    build = hermes.add_mutually_exclusive_group()
    build.add_argument(
        "--package",
        default="hermes-agent",
        help="a distribution on the index that ships Hermes' memory tool (default hermes-agent)",
    )
    build.add_argument("--wheel", metavar="PATH", help="a local wheel of a Hermes build")
    build.add_argument("--source", metavar="DIR", help="a source directory of a Hermes build")
    hermes.add_argument("--version", help="a release on the index (default: the latest)")
    add_options(hermes.add_argument, RUN_OPTIONS)
    _common(hermes, "ci")
    hermes.set_defaults(run=_cmd_hermes)

    matrix = add_command(commands, "matrix", "one clause table for several backends")
    matrix.add_argument(
        "--out",
        metavar="DIR",
        help="where the pages are written (with --page: a new temporary one)",
    )
    matrix.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="a Python backend (repeatable)",
    )
    matrix.add_argument(
        "--backend-cmd",
        action="append",
        default=[],
        metavar="CMD",
        help="a backend served over JSON Lines (repeatable)",
    )
    matrix.add_argument(
        "--hermes", action="append", default=[], metavar="PKG[==VER]", help="a Hermes release"
    )
    matrix.add_argument(
        "--from-report", action="append", default=[], metavar="DIR", help="a saved certification"
    )
    _page_option(matrix, "matrix")
    _common(matrix, "ci", MATRIX_TIMEOUT)
    matrix.set_defaults(run=_cmd_matrix)

    sweep = add_command(commands, "sweep", "certify every release in a range; a timeline")
    sweep.add_argument(
        "--package", default="hermes-agent", help="a distribution that ships Hermes' memory tool"
    )
    sweep.add_argument(
        "--from",
        dest="first",
        default="0.13.0",
        metavar="VERSION",
        help="the first release (default 0.13.0)",
    )
    sweep.add_argument(
        "--to", dest="last", default=None, metavar="VERSION", help="the last (default: latest)"
    )
    sweep.add_argument(
        "--out",
        metavar="DIR",
        help="where the pages are written (with --page: a new temporary one)",
    )
    sweep.add_argument(
        "--then",
        action="append",
        default=[],
        metavar="PKG==VER",
        help="a release of a later line (a fork) to append to the timeline, in the order given; "
        "compared with the release whose memory modules are nearest its own",
    )
    sweep.add_argument(
        "--reuse", action="store_true", help="keep a release's saved report of the same profile"
    )
    _page_option(sweep, "sweep")
    _common(sweep, "smoke")
    sweep.set_defaults(run=_cmd_sweep)
