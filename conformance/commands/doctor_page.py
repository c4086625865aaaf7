"""``memspec doctor --html FILE``: the diagnosis of a memory directory as one self-contained page
(:mod:`~memspec.conformance.verdict.webpage`), from the same :class:`Diagnosis` as the screen
and ``--json``: whether anything needs attention first, then each data file with its state and
its problems worst first (a symbol and a word beside each severity's colour), each opening on
the clause that names it, then the other files and the commands that repair what they can.

``doctor`` imports nothing of ``conformance``: the ``memspec`` command hands this renderer to
its parser (:func:`memspec.doctor.cli.add_parser`), which offers ``--html`` only with one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from memspec.conformance.verdict.webpage import esc, page
from memspec.doctor.diagnose import SEVERITIES, Diagnosis, Problem, count
from memspec.doctor.limits import Limit
from memspec.spec.document import installed_spec

SEVERITY_MARKS = {"error": ("✗", "v-fail"), "warning": ("!", "v-skip"), "note": ("i", "v-na")}


def _mark(severity: str) -> str:
    symbol, css = SEVERITY_MARKS.get(severity, ("?", "v-na"))
    return f'<span class="mark {css}">{symbol} {esc(severity)}</span>'


def _problems(problems: Sequence[Problem], named: bool = False) -> str:
    spec = installed_spec()
    items = []
    for p in sorted(problems, key=lambda p: SEVERITIES.index(p.severity)):
        clause = spec.clause(p.clause)
        text = f"<blockquote>{esc(' '.join(clause.text.split()))}</blockquote>" if clause else ""
        subject = f"{esc(p.subject)}: " if named else ""
        items.append(
            f'<div class="clause" data-severity="{esc(p.severity)}"><details><summary>'
            f'{_mark(p.severity)} <span class="cid">{esc(p.clause)}</span> {subject}'
            f'{esc(p.what)}<span class="why">repair: {esc(p.repair)}</span></summary>'
            f'<div class="body">{text}</div></details></div>'
        )
    return "".join(items)


def render_html(found: Diagnosis, limits: Mapping[str, Limit], command: str) -> str:
    """Returns the page of a diagnosis: ``limits`` as read for it, ``command`` the ``memspec
    doctor`` command line its repairs are run with."""
    attention = [p for p in found.problems if p.severity != "note"]
    status = (
        "healthy: nothing needs attention"
        if not attention
        else f"{len(attention)} thing(s) need attention"
    )
    level = "l-full" if not attention else "l-none"
    body = [
        f"<header><h1>memspec doctor: {esc(found.directory)}</h1>",
        f'<p id="level" class="level {level}">{esc(status)}</p>',
        "<p>limits: "
        + esc(", ".join(f"{t} {limit.value:,} ({limit.source})" for t, limit in limits.items()))
        + "</p></header><main>",
    ]
    fixes = Counter(p.fix for p in attention if p.fix)
    if fixes:
        body.append("<h2>Repairs</h2><ul>")
        body += [
            f"<li>{times} repaired by: <code>{esc(command)} {esc(options)}</code></li>"
            for options, times in sorted(fixes.items())
        ]
        body.append("</ul>")
    by_subject: dict[str, list[Problem]] = {}
    for problem in found.problems:
        by_subject.setdefault(problem.subject, []).append(problem)
    for state in found.targets:
        if state.kind in ("absent", "unopenable", "not a file", "unreadable"):
            line = state.kind
        else:
            share = state.usage * 100 // state.limit if state.limit else 0
            line = (
                f"{count(state.entries, 'entry')}, {state.usage:,}/{state.limit:,} characters "
                f"({share}%), {state.kind}"
            )
        body.append(f"<h2>{esc(state.file)}</h2><p>{esc(line)}</p>")
        body.append(_problems(by_subject.pop(state.file, [])))
    rest = [p for problems in by_subject.values() for p in problems]
    if rest or found.files:
        body.append("<h2>Other files</h2>")
        body.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in found.files) + "</ul>")
        body.append(_problems(rest, named=True))
    body.append("</main>")
    return page(f"memspec doctor: {found.directory}", "\n".join(body))
