"""The ``doctor`` subcommand: one screen a person reads at a glance, or ``--json`` for tools.

Exit status: 0 healthy, 1 something needs attention, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memspec.doctor.diagnose import SEVERITIES, Diagnosis, count, diagnose
from memspec.doctor.limits import DoctorError, Limit, default_directory, read_limits
from memspec.doctor.repair import Action, repair

HEALTHY, ATTENTION, BAD_INPUT = 0, 1, 2


HtmlPage = Callable[[Diagnosis, dict[str, Limit], str], str]
"""What renders a diagnosis as a page: the diagnosis, its limits and the repair command."""


def add_parser(commands: Any, html_page: HtmlPage | None = None) -> None:
    """Adds ``doctor`` to the ``memspec`` subcommands; with ``html_page``, its ``--html FILE``,
    which writes the page that renders."""
    doctor = commands.add_parser(
        "doctor",
        help="check a real memory directory; --fix repairs what loses nothing",
        description="Check a memory directory (MEMORY.md, USER.md and the files beside them) "
        "against the spec, and say what needs attention, how bad it is and what repairs it. "
        "Reads only, unless --fix (docs/doctor.md).",
    )
    doctor.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="the memory directory (default: $HERMES_HOME/memories, else ~/.hermes/memories)",
    )
    for target in ("memory", "user"):
        doctor.add_argument(
            f"--{target}-char-limit",
            metavar="N",
            help=f"the {target} limit (default: memory.{target}_char_limit of the profile's "
            "config.yaml, else the spec's default)",
        )
    doctor.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    if html_page is not None:
        doctor.add_argument(
            "--html",
            metavar="FILE",
            help="also write the diagnosis as one self-contained page to FILE",
        )
    doctor.add_argument(
        "--fix",
        action="store_true",
        help="repair what loses nothing, holding the store's locks: rewrite cosmetic files in "
        "the canonical form and remove temp files, each rewrite after a byte-exact backup",
    )
    doctor.add_argument(
        "--dry-run", action="store_true", help="say what --fix would do, and change nothing"
    )
    doctor.add_argument(
        "--move-oversized",
        action="store_true",
        help="with --fix: also move entries over the limit out of the file (its backup keeps them)",
    )
    doctor.set_defaults(run=run, command_parser=doctor, html=None, html_page=html_page)


def run(args: argparse.Namespace) -> int:
    """Runs ``memspec doctor`` and returns its exit status."""
    directory = default_directory() if args.directory is None else Path(args.directory)
    repairing = args.fix or args.dry_run
    actions: list[Action] = []
    _forgiving(sys.stdout)
    try:
        if args.directory == "":
            raise DoctorError("the directory is an empty name")
        if args.move_oversized and not repairing:
            raise DoctorError("--move-oversized needs --fix (or --dry-run)")
        if not directory.exists():
            raise DoctorError(f"no such directory: {directory}")
        if not directory.is_dir():
            raise DoctorError(f"not a directory: {directory}")
        if args.html is not None and not Path(args.html).absolute().parent.is_dir():
            raise DoctorError(f"--html {args.html}: no such directory")
        limits, _ = read_limits(
            directory, {"memory": args.memory_char_limit, "user": args.user_char_limit}
        )
        values = {t: limit.value for t, limit in limits.items()}
        if repairing:
            actions = repair(
                directory, values, move_oversized=args.move_oversized, dry_run=args.dry_run
            )
        found = diagnose(directory, values)
        if args.html is not None:
            page = args.html_page(found, limits, this_command(args))
            Path(args.html).write_text(page, encoding="utf-8", errors="backslashreplace")
    except DoctorError as error:
        print(f"memspec doctor: error: {error}", file=sys.stderr)
        return BAD_INPUT
    except OSError as error:
        where = error.filename if error.filename is not None else directory
        print(f"memspec doctor: error: {where}: {error.strerror or error}", file=sys.stderr)
        return BAD_INPUT
    if args.json:
        done = [asdict(action) for action in actions] if repairing else None
        print(
            json.dumps(
                {**found.as_json(), "limits": _limits_json(limits), "repairs": done}, indent=1
            )
        )
    else:
        lines = render_actions(actions, args.dry_run) if repairing else []
        lines += render(found, limits, this_command(args))
        print("\n".join(_printable(line) for line in lines))
    return HEALTHY if found.healthy else ATTENTION


def _forgiving(stream: Any) -> None:
    """Makes ``stream`` write what its encoding cannot (a file name that is not UTF-8, text
    on an ASCII terminal) as escapes instead of failing."""
    with contextlib.suppress(AttributeError, ValueError):
        stream.reconfigure(errors="backslashreplace")


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _printable(line: str) -> str:
    """Returns ``line`` with control characters (a file name's escape sequences or newlines)
    shown as escapes, so nothing a file is named can change the screen."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], line.replace("\n", "\\n"))


def render_actions(actions: list[Action], dry_run: bool) -> list[str]:
    """Returns what --fix did (or, with --dry-run, would do), one line per action."""
    if not actions:
        return ["nothing to repair", ""]
    lines = [f"{a.subject}: {a.what}" + (f"; the old bytes are in {a.backup}" if a.backup else "")
             for a in actions]  # fmt: skip
    heading = "what --fix would do (nothing was changed):" if dry_run else "repaired:"
    return [heading, *(f"  {line}" for line in lines), ""]


def _limits_json(limits: dict[str, Limit]) -> dict[str, object]:
    return {t: {"value": limit.value, "source": limit.source} for t, limit in limits.items()}


def this_command(args: argparse.Namespace) -> str:
    """Returns the ``memspec doctor`` command line of ``args``' directory and limits, the one a
    repair is run with."""
    words = ["memspec", "doctor"]
    if args.directory:
        named = args.directory
        words.append(shlex.quote(f"./{named}" if named.startswith("-") else named))
    for target in ("memory", "user"):
        given = getattr(args, f"{target}_char_limit")
        if given is not None:
            words += [f"--{target}-char-limit", shlex.quote(given)]
    return " ".join(words)


def render(found: Diagnosis, limits: dict[str, Limit], command: str) -> list[str]:
    """Returns the screen: the directory and limits, per file its state and its problems worst
    first, the other files, one line saying whether anything needs attention, and the command
    lines (``command`` and its repair options) that repair what they can."""
    lines = [f"memspec doctor: {found.directory}"]
    lines.append(
        "limits: "
        + ", ".join(f"{t} {limit.value:,} ({limit.source})" for t, limit in limits.items())
    )
    by_subject: dict[str, list] = {}
    for problem in sorted(found.problems, key=lambda p: SEVERITIES.index(p.severity)):
        by_subject.setdefault(problem.subject, []).append(problem)
    for state in found.targets:
        lines.append("")
        if state.kind in ("absent", "unopenable", "not a file", "unreadable"):
            lines.append(f"{state.file}: {state.kind}")
        else:
            share = state.usage * 100 // state.limit if state.limit else 0
            lines.append(
                f"{state.file}: {count(state.entries, 'entry')}, {state.usage:,}/{state.limit:,} "
                f"characters ({share}%), {state.kind}"
            )
        lines += _problem_lines(by_subject.pop(state.file, []))
    rest = [p for problems in by_subject.values() for p in problems]
    if rest or found.files:
        lines += ["", "other files:"]
        lines += [f"  {line}" for line in found.files]
        lines += _problem_lines(rest, named=True)
    attention = [p for p in found.problems if p.severity != "note"]
    lines.append("")
    if not attention:
        lines.append("healthy: nothing needs attention")
        return lines
    lines.append(f"{len(attention)} thing(s) need attention")
    fixes = Counter(p.fix for p in attention if p.fix)
    for options, times in sorted(fixes.items()):
        lines.append(f"  {times} repaired by: {command} {options}")
    return lines


def _problem_lines(problems: list, named: bool = False) -> list[str]:
    lines = []
    for p in problems:
        subject = f"{p.subject}: " if named else ""
        lines.append(f"  {p.severity:<8}{p.clause:<9}{subject}{p.what}")
        lines.append(f"  {'':<17}repair: {p.repair}")
    return lines
