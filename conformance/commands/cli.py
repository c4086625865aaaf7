"""The ``memspec`` command: the only part of memspec that prints.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from memspec.conformance.core.locations import import_from, keep_bytecode

if TYPE_CHECKING:
    from memspec.conformance.commands.trail import ClauseTrail

# Every other import of memspec is made by the command that needs it: ``memspec serve`` starts
# once per session of a command backend, and must not pay for the harness it does not run.


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"memspec: error: {message}\n")


def spec_check() -> tuple[list[str], dict[str, int]]:
    """Returns the problems of SPEC.md (empty when it is sound) and its counts."""
    from memspec.conformance.commands.trail import (
        SOURCE_PACKAGES,
        citations_of,
        model_citation_problems,
        package_sources,
        unknown_citations,
    )
    from memspec.conformance.core.registry import all_checks, clauses_with_checks
    from memspec.conformance.examples.probes import run_on_model
    from memspec.spec.clauses import (
        gated_core,
        gated_protections,
        missing_tests,
        parse_clauses,
        uncovered_must_clauses,
        unknown_ids,
    )
    from memspec.spec.document import installed_path, installed_text
    from memspec.spec.examples import parse_examples
    from memspec.spec.versions import version_problems

    text = installed_text()
    clauses = parse_clauses(text)
    examples = parse_examples(text)
    problems: list[str] = version_problems(text)
    cited = [cid for example in examples for cid in example.clauses]
    checks = clauses_with_checks()
    for cid in unknown_ids(clauses, cited):
        problems.append(f"an example cites {cid}, which SPEC.md does not state")
    for cid in unknown_ids(clauses, checks):
        problems.append(f"check {', '.join(checks[cid])} cites {cid}, which SPEC.md does not state")
    for example in examples:
        failure = run_on_model(example)
        if failure is not None:
            problems.append("BUG IN SPEC: the model disagrees with an example\n" + failure.render())
    project = installed_path().resolve().parent.parent
    if (project / "tests").is_dir():
        problems.extend(missing_tests(clauses, project))
    citers = [(f"example {e.id}", e.clauses, e.features) for e in examples]
    citers += [(f"check {c.id}", c.clauses, c.features) for c in all_checks().values()]
    problems.extend(gated_protections(clauses, citers))
    problems.extend(gated_core(clauses, citers))
    for clause in uncovered_must_clauses(clauses, [*cited, *checks]):
        problems.append(
            f"{clause.id} (MUST, SPEC.md line {clause.line}) has no example and no named check"
        )
    model = citations_of(package_sources(SOURCE_PACKAGES["model"]))
    reference = citations_of(package_sources(SOURCE_PACKAGES["reference"]))
    problems.extend(unknown_citations(clauses, [*model, *reference]))
    problems.extend(model_citation_problems(clauses, model))
    counts = {
        "clauses": len(clauses),
        "must": sum(c.level == "MUST" for c in clauses),
        "examples": len(examples),
        "checks": len({name for names in checks.values() for name in names}),
    }
    return problems, counts


def render_trail(trail: ClauseTrail) -> str:
    """Returns a clause's trail as text for a terminal."""
    clause = trail.clause
    lines = [f"{clause.id} ({clause.level}), SPEC.md line {clause.line}"]
    lines += textwrap.wrap(clause.text, 96, initial_indent="  ", subsequent_indent="  ")
    lines.append(f"  Prevents: {trail.prevents or '(SPEC.md names no bug)'}")

    def section(title: str, rows: list[tuple[str, str]]) -> None:
        lines.extend(["", f"{title} ({len(rows)}):"])
        width = max((len(left) for left, _ in rows), default=0)
        lines.extend(f"  {left.ljust(width)}  {right}".rstrip() for left, right in rows)
        if not rows:
            lines.append("  none")

    lines.extend(["", f"examples ({len(trail.examples)}):"])
    for (slug, line), text in zip(trail.examples, trail.texts(), strict=True):
        lines.append(f"  {slug}  (SPEC.md line {line})")
        lines.extend(f"    {step}" for step in text.splitlines())
    if not trail.examples:
        lines.append("  none")
    section("model, spec/", [(c.where, f"line {c.line}") for c in trail.model])
    section("reference, reference_impl/", [(c.where, f"line {c.line}") for c in trail.reference])
    section("checks", [(site.id, site.where) for site in trail.checks])
    return "\n".join(lines)


def _cmd_clause(args: argparse.Namespace) -> int:
    from memspec.conformance.commands.trail import (
        SOURCE_PACKAGES,
        UnknownClause,
        check_sites,
        citations_of,
        clause_trail,
        package_sources,
    )
    from memspec.conformance.core.registry import all_checks
    from memspec.spec.document import installed_text

    try:
        trail = clause_trail(
            args.clause,
            installed_text(),
            citations_of(package_sources(SOURCE_PACKAGES["model"])),
            citations_of(package_sources(SOURCE_PACKAGES["reference"])),
            check_sites(all_checks()),
        )
    except UnknownClause as error:
        print(f"memspec: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(trail.to_json(), sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(render_trail(trail))
    return 0


def _cmd_spec(args: argparse.Namespace) -> int:
    from memspec.spec.document import installed_text
    from memspec.spec.errors import SpecError
    from memspec.spec.examples import examples_json

    if args.json and not args.clause:
        print("memspec: error: --json goes with --clause ID", file=sys.stderr)
        return 2
    try:
        if args.clause:
            return _cmd_clause(args)
        if args.dump_json:
            json.dump(examples_json(installed_text()), sys.stdout, indent=1)
            sys.stdout.write("\n")
            return 0
        problems, counts = spec_check()
    except SpecError as error:
        print(f"BUG IN SPEC: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem)
    print(
        f"SPEC.md: {counts['clauses']} clauses ({counts['must']} MUST), "
        f"{counts['examples']} examples, {counts['checks']} named checks"
    )
    print(f"spec check failed: {len(problems)} problem(s)" if problems else "spec check passed")
    return 1 if problems else 0


def _cmd_examples(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memspec.conformance.commands.certify import probe_backend
    from memspec.conformance.commands.terminal import counts_line
    from memspec.conformance.core.settings import make_settings
    from memspec.conformance.examples.probes import run_on_backend
    from memspec.conformance.transport.backend import BackendDefect
    from memspec.conformance.verdict.findings import Unverified
    from memspec.spec.errors import UsageError

    settings = make_settings(
        base=Path.cwd(),
        backend=args.backend,
        backend_cmd=args.backend_cmd,
        timeout=args.timeout,
        spec=args.spec,
    )
    try:
        settings = probe_backend(settings)
    except BackendDefect as defect:
        raise UsageError(f"the backend could not be started: {defect}") from None
    backend, claimed = settings.backend, settings.features or frozenset()
    assert backend is not None  # probe_backend refuses settings without one
    examples = list(settings.spec.examples)
    failed = skipped = 0
    for example in examples:
        missing = [feature for feature in example.features if feature not in claimed]
        if missing:
            skipped += 1
            if args.verbose:
                print(f"skip {example.id}: needs feature {', '.join(missing)}", flush=True)
            continue
        try:
            failure = run_on_backend(example, backend)
        except Unverified as unjudged:
            skipped += 1
            print(f"SKIP {example.id}: not verified: {unjudged}", flush=True)
            continue
        except (BackendDefect, UsageError) as defect:
            failed += 1
            print(f"FAIL {example.id}: {defect}", flush=True)
            continue
        if failure is not None:
            failed += 1
            print("FAIL " + failure.render(), flush=True)
        elif args.verbose:
            print(f"ok   {example.id}", flush=True)
    print(counts_line(len(examples) - failed - skipped, failed, skipped))
    return 1 if failed else 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from memspec.conformance.transport.backend import InProcessBackend
    from memspec.conformance.transport.served import serve

    return serve(InProcessBackend(args.backend), sys.stdin, sys.stdout)


def _cmd_certify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memspec.conformance.commands.certify import run_certification, settings_for
    from memspec.conformance.commands.terminal import print_result, print_start
    from memspec.spec.errors import UsageError

    hermes = (args.hermes_rules, args.hermes_between, args.hermes_snapshot)
    if not args.hermes_class and any(value is not None for value in hermes):
        raise UsageError(
            "--hermes-rules, --hermes-between and --hermes-snapshot need --hermes-class"
        )
    settings = settings_for(
        base=Path.cwd(),
        backend=args.backend,
        backend_cmd=args.backend_cmd,
        hermes_class=args.hermes_class,
        hermes_rules=args.hermes_rules,
        hermes_between=args.hermes_between,
        hermes_snapshot=args.hermes_snapshot,
        profile=args.profile,
        timeout=args.timeout,
        seed=args.seed,
        report=args.report,
        expected_failures=args.expected_failures,
        hypothesis_db=args.hypothesis_db,
        spec=args.spec,
        workers=args.workers,
        select=args.select,
        coverage=args.coverage,
        verbose=args.verbose,
        quiet=args.quiet,
        keep_temp=args.keep_temp,
    )
    print_start(settings)
    return print_result(run_certification(settings))


def _cmd_repro(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memspec.conformance.core.settings import backend_at
    from memspec.conformance.schedule.exploration import render_interleaving
    from memspec.conformance.schedule.repro import load_repro, replay
    from memspec.conformance.tamper.capability import tampering
    from memspec.conformance.transport.backend import Address, BackendDefect
    from memspec.conformance.verdict.findings import NotApplicable, Refusal, Unverified

    repro = load_repro(Path(args.file))
    if args.backend:
        backend = backend_at(Address(factory=args.backend), args.timeout)
    else:
        backend = repro.open_backend(args.timeout)
    try:
        tampering(backend).require()
    except (NotApplicable, Unverified) as reason:
        print(f"memspec: error: {args.file} cannot be replayed here: {reason}", file=sys.stderr)
        return 2
    expected = (repro.failure or {}).get("clause", "")
    label = args.backend or repro.label
    print(
        f"replaying {args.file}: {label}, {len(repro.program.sessions)} sessions, "
        f"{len(repro.schedule)} scheduled calls" + (f"; it failed {expected}" if expected else "")
    )
    reproduced = 0
    for attempt in range(1, args.times + 1):
        try:
            outcome = replay(repro, backend)
        except BackendDefect as defect:
            print(f"run {attempt}: the backend broke: {defect}")
            continue
        except Refusal as refusal:
            print(f"run {attempt}: the backend refused a core action: {refusal}")
            continue
        if outcome.execution is None:
            print(f"run {attempt}: the replay diverged: {outcome.diverged}")
            continue
        finding = outcome.execution.finding
        if attempt == 1:
            print(render_interleaving(outcome.execution))
        if finding is None:
            print(f"run {attempt}: passed: the failure did not reproduce")
            continue
        reproduced += 1
        print(f"run {attempt}: " + (finding.render() if attempt == 1 else finding.clause))
    print(f"reproduced {reproduced}/{args.times}")
    return 1 if reproduced else 0


def _add_factory(parser: argparse.ArgumentParser) -> None:
    """Adds the required ``--backend MODULE:FACTORY`` of the commands that take only a Python
    backend (``serve``, ``examples``)."""
    parser.add_argument(
        "--backend",
        required=True,
        metavar="MODULE:FACTORY",
        help="a Python backend factory, e.g. memspec.reference_impl:open_store",
    )


def add_serve_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds the ``serve`` subcommand to ``commands``."""
    from memspec.conformance.core.subcommands import add_command

    serve_cmd = add_command(commands, "serve", "serve a Python backend over JSON Lines")
    _add_factory(serve_cmd)
    serve_cmd.set_defaults(run=_cmd_serve)


DESCRIPTION = (
    "The conformance and fuzz harness for bounded, file-backed agent memory (MEMORY.md and "
    "USER.md). Start with: memspec certify --backend MODULE:FACTORY (a Python store) or "
    "--backend-cmd CMD (any language); memspec spec --clause ID explains a clause."
)


class _Version(argparse.Action):
    """``--version``: the package's version and the SPEC.md version it certifies against, read
    only when asked (``memspec serve`` starts once per session and must not pay for it)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from memspec.spec.document import installed_version

        try:
            package = version("memspec")
        except PackageNotFoundError:
            package = "(not installed)"
        print(f"memspec {package} (SPEC.md version {installed_version().number})")
        parser.exit(0)


def _top_parser() -> tuple[_Parser, argparse._SubParsersAction[_Parser]]:
    parser = _Parser(prog="memspec", description=DESCRIPTION)
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print memspec's version and the spec's"
    )
    return parser, parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )


def serve_parser() -> argparse.ArgumentParser:
    """Returns the parser of ``memspec serve`` alone: each session of a command backend starts
    that command, so it builds no option of the other commands (whose modules it would import)."""
    parser, commands = _top_parser()
    add_serve_command(commands)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Returns the argument parser of the ``memspec`` command."""
    from memspec.conformance.core.options import (
        QUIET,
        SELECT,
        SETTINGS,
        SPEC,
        TIMEOUT,
        WHICH_BACKEND,
        WORKERS,
        add_options,
        positive_int,
    )
    from memspec.conformance.core.subcommands import add_command
    from memspec.conformance.core.waits import CALL_TIMEOUT

    parser, commands = _top_parser()
    certify_cmd = add_command(commands, "certify", "certify a backend against the whole harness")
    which = certify_cmd.add_mutually_exclusive_group(required=True)
    add_options(which.add_argument, WHICH_BACKEND)
    which.add_argument(
        "--hermes-class",
        metavar="TARGET",
        help="certify a class with Hermes' MemoryStore shape, MODULE:CLASS or PATH.py:CLASS, "
        "in this environment (docs/hermes-class.md)",
    )
    hermes = certify_cmd.add_argument_group("with --hermes-class")
    hermes.add_argument(
        "--hermes-rules",
        metavar="FILE",
        help="refusal texts Hermes' table does not know: one 'PATTERN -> CODE' per line",
    )
    hermes.add_argument(
        "--hermes-between",
        metavar="METHOD",
        help="the class's method to call before each mutation (default: "
        "reset_consolidation_failures when it has one)",
    )
    hermes.add_argument(
        "--hermes-snapshot",
        metavar="METHOD",
        help="the class's method that returns a target's system-prompt block (default: "
        "format_for_system_prompt, snapshot_block or snapshot)",
    )
    add_options(certify_cmd.add_argument, SETTINGS)
    add_options(certify_cmd.add_argument, (WORKERS, SELECT))
    certify_cmd.add_argument(
        "--coverage",
        action="store_true",
        help="for a Python backend, report which of its lines and branches "
        "the certification exercised",
    )
    certify_cmd.add_argument(
        "--keep-temp",
        action="store_true",
        help="keep the run's temporary files (roots, histories) and print where they are",
    )
    certify_cmd.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print a line per check and every failure's whole message, not only the progress",
    )
    add_options(certify_cmd.add_argument, (QUIET,))
    certify_cmd.set_defaults(run=_cmd_certify)
    add_serve_command(commands)
    spec = add_command(
        commands, "spec", "check SPEC.md, dump its examples as JSON or follow a clause id"
    )
    mode = spec.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dump-json", action="store_true", help="print every example as JSON")
    mode.add_argument(
        "--check",
        action="store_true",
        help="fail on any MUST clause without an example or a named check, or that no "
        "function of spec/ cites, or an example the model disagrees with",
    )
    mode.add_argument(
        "--clause",
        metavar="ID",
        help="print the trail of one clause: its text, examples, and the model functions, "
        "reference functions and checks that cite it",
    )
    spec.add_argument("--json", action="store_true", help="with --clause: print the trail as JSON")
    spec.set_defaults(run=_cmd_spec)
    examples = add_command(commands, "examples", "run every SPEC.md example against a backend")
    which_examples = examples.add_mutually_exclusive_group(required=True)
    add_options(which_examples.add_argument, WHICH_BACKEND)
    add_options(examples.add_argument, (TIMEOUT,), defaults={"timeout": CALL_TIMEOUT})
    add_options(examples.add_argument, (SPEC,))
    examples.add_argument(
        "-v", "--verbose", action="store_true", help="list passing and skipped examples too"
    )
    examples.set_defaults(run=_cmd_examples)
    repro = add_command(commands, "repro", "replay a saved failing interleaving")
    repro.add_argument("file", metavar="FILE", help="a repro file a failing check saved")
    repro.add_argument(
        "--times", type=positive_int, default=1, help="replay it N times (default 1)"
    )
    repro.add_argument(
        "--backend", metavar="MODULE:FACTORY", help="replay against this backend instead"
    )
    add_options(repro.add_argument, (TIMEOUT,), defaults={"timeout": CALL_TIMEOUT})
    repro.set_defaults(run=_cmd_repro)
    from memspec.conformance.hermes.cli import add_parsers
    from memspec.conformance.hermes.providers import add_parser as add_provider

    add_parsers(commands)
    add_provider(commands)
    from memspec.conformance.commands.doctor_page import render_html
    from memspec.doctor.cli import add_parser as add_doctor

    add_doctor(commands, html_page=render_html)
    from memspec.conformance.commands.site import add_site_command

    add_site_command(commands)
    return parser


def _end_served_session(status: int) -> None:
    """Ends ``memspec serve`` once its session is over without tearing the interpreter down
    (about 15 ms of each session); a coverage tracer, which saves its data at exit, gets the
    usual exit."""
    if "coverage" in sys.modules:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``memspec`` command and returns its exit status."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    serving = argv[:1] == ["serve"]
    if serving:
        keep_bytecode()  # before memspec's own modules load: each session is a new process
    from memspec.spec.errors import UsageError

    args, unknown = (serve_parser() if serving else build_parser()).parse_known_args(argv)
    if unknown:  # named by the subcommand's own usage, not the top-level one
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with import_from(os.getcwd(), last=serving):
            status = int(args.run(args))
        if program and serving:
            _end_served_session(status)
        return status
    except UsageError as error:
        print(f"memspec: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memspec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``memspec spec --dump-json | head``): say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
