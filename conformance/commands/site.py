"""``memspec site``: the results pages of ``docs/results/`` as a small static site, rendered from
the JSON each results command saves beside its Markdown page (``--json``), never from the
Markdown itself; the Markdown pages stay the source of truth.

- ``matrix.json`` (``memspec matrix --json``) and ``sweep.json`` (``memspec sweep --json``):
  the grid of backends × clauses coloured by verdict, each cell a symbol too, judged again from
  the saved records by the rules of a report (:class:`~memspec.conformance.hermes.matrix.Matrix`),
  the level of each backend and a summary per area; the sweep adds the verdicts that changed;
- ``zoo.json`` (``python -m tests.zoo --json``): what caught each member, and the time to
  detection per area;
- ``providers.json`` (``python -m tests.providers_sweep --json``): the grid of real Hermes memory
  providers × PLUGIN clauses coloured by verdict, the level, counts and time of each, each
  failing clause with the note that argues it from the provider's code, and the providers not
  certified, each with why;
- ``benchmarks.json`` (``python -m benchmarks.bench --json``): each section as a chart (drawn by
  matplotlib as inline SVG, extra ``site``) and as the table of its figures.

A page whose JSON is missing is listed on the index with the command that saves it. Every page
is self-contained (:mod:`~memspec.conformance.verdict.webpage`).
"""

from __future__ import annotations

import io
import json
import os
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.core.results_page import read_stamp
from memspec.conformance.core.subcommands import add_command
from memspec.conformance.hermes.matrix import (
    GENERATED_NOTE,
    Matrix,
    change_place,
    columns_from_json,
    spec_version_of,
    timeline,
)
from memspec.conformance.verdict.webpage import MARKS, esc, mark, page
from memspec.spec.errors import UsageError

SYMBOLS = {"pass": "✓", "fail": "✗", "skip": "–", "n/a": "○"}
CHART_EXTRA = "pip install 'memspec[site]'"


@dataclass(frozen=True)
class Source:
    """A Source is one results page: its name (``NAME.md``, ``NAME.json``, ``NAME.html``), its
    title, and the option that saves its JSON."""

    name: str
    title: str
    saves: str


SOURCES = (
    Source("matrix", "The clause matrix", "memspec matrix … --json docs/results/matrix.json"),
    Source("sweep", "Release sweep", "memspec sweep … --json docs/results/sweep.json"),
    Source("zoo", "The zoo", "python -m tests.zoo … --json docs/results/zoo.json"),
    Source(
        "providers",
        "Real Hermes memory providers",
        "python -m tests.providers_sweep … --json docs/results/providers.json",
    ),
    Source(
        "benchmarks",
        "Benchmarks",
        "python -m benchmarks.bench … --json docs/results/benchmarks.json",
    ),
)


def _stamp_line(markdown: Path) -> str:
    """Returns the stamp of a Markdown results page as a sentence ("" when it has none)."""
    try:
        found = read_stamp(markdown.read_text(encoding="utf-8"))
    except OSError:
        return ""
    if found is None:
        return ""
    return (
        f"<p>Measured by <code>{esc(found['command'])}</code> on {esc(found['date'])} on "
        f"{esc(found['machine'])}.</p>"
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UsageError(f"{path} is not JSON: {error}") from None


# --- charts -------------------------------------------------------------------------------------


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], unit: str) -> str:
    """Returns a horizontal bar chart as inline SVG (its text kept as text), drawn by matplotlib;
    without matplotlib, a line saying how to get it (the table beside it holds the figures).
    matplotlib keeps its font cache in memspec's cache directory (``MPLCONFIGDIR``, unless the
    user set it), not in a folder of its own in the home."""
    os.environ.setdefault("MPLCONFIGDIR", str(cache_dir() / "matplotlib"))
    try:
        import matplotlib

        matplotlib.use("svg")
        from matplotlib import pyplot
    except ImportError:
        return f"<p>(a chart needs matplotlib: {esc(CHART_EXTRA)})</p>"
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memspec", "font.size": 9}):
        figure, axes = pyplot.subplots(figsize=(6.4, 0.45 * len(labels) + 0.9))
        try:
            positions = range(len(labels))
            axes.barh(positions, values, color="#0072b2")
            axes.set_yticks(list(positions), labels=list(labels))
            axes.invert_yaxis()
            axes.set_xlabel(unit)
            for position, value in zip(positions, values, strict=True):
                shown = f" {value:,.0f}" if value >= 100 else f" {value:.3g}"
                axes.text(value, position, shown, va="center")
            axes.spines[["top", "right"]].set_visible(False)
            figure.tight_layout()
            buffer = io.StringIO()
            figure.savefig(buffer, format="svg", metadata={"Date": None})
        finally:
            pyplot.close(figure)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{esc(title)}" ', 1)
    return f"<figure>{svg}<figcaption>{esc(title)}</figcaption></figure>"


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    heads = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    table = f"<table><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


# --- the matrix and the sweep ------------------------------------------------------------------


def _cell(status: str, reason: str) -> str:
    """Returns a grid cell: a clause verdict's symbol, coloured as its mark is, its reason in
    the title."""
    css = status.replace("/", "").replace(" ", "-")
    tip = f"{status}: {reason}" if reason else status
    return f'<td class="v-{css}" title="{esc(tip)}">{MARKS.get(status, "?")}</td>'


def render_grid(matrix: Matrix) -> str:
    """Returns the grid of a matrix: the level and counts of each backend, a summary per area,
    every clause × backend cell by its symbol and colour, and the reason of each fail and skip
    per backend."""
    labels = [column.label for column in matrix.columns]
    legend = " ".join(mark(status) for status in SYMBOLS)
    levels = _table(
        ["backend", "level", "pass", "fail", "skip", "n/a", "spec version", "profile"],
        [
            [
                column.label, matrix.level(index).name, *matrix.counts(index).values(),
                spec_version_of(column.run), column.run.get("profile", "?"),
            ]
            for index, column in enumerate(matrix.columns)
        ],
    )  # fmt: skip
    areas: dict[str, list[int]] = {}
    for index, clause in enumerate(matrix.clauses):
        areas.setdefault(clause.area, []).append(index)
    area_rows = []
    for area, members in areas.items():
        cells = []
        for at in range(len(labels)):
            statuses = [matrix.cells[row][at].status for row in members]
            worst = next((s for s in ("fail", "skip", "pass") if s in statuses), "n/a")
            text = " ".join(
                f"{SYMBOLS[s]}{statuses.count(s)}" for s in SYMBOLS if statuses.count(s)
            )
            cells.append(f'<td class="v-{"na" if worst == "n/a" else worst}">{esc(text)}</td>')
        area_rows.append(f'<tr><th scope="row">{esc(area)}</th>{"".join(cells)}</tr>')
    head = "".join(f'<th scope="col">{esc(label)}</th>' for label in labels)
    grid_rows = "".join(
        f'<tr><th scope="row" id="c-{clause.id}">{clause.id} <small>{clause.level}</small></th>'
        + "".join(_cell(v.status, v.reason) for v in row)
        + "</tr>"
        for clause, row in zip(matrix.clauses, matrix.cells, strict=True)
    )
    notes = []
    for index, column in enumerate(matrix.columns):
        items = [
            f"<li>{mark(verdict.status)} <b>{clause.id}</b> {esc(verdict.reason)}</li>"
            for clause, verdict in matrix.fails_and_skips(index)
        ]
        if items:
            notes.append(
                f"<details><summary>{esc(column.label)}: {len(items)} fails and skips"
                f"</summary><ul>{''.join(items)}</ul></details>"
            )
    return "\n".join(
        [
            "<h2>Level of each backend</h2>",
            levels,
            "<h2>By area</h2>",
            f"<p>Each cell counts the area's clauses by verdict: {legend}; its colour is the "
            "worst of them.</p>",
            f'<div class="scroll"><table class="grid"><thead><tr><th>area</th>{head}</tr></thead>'
            f"<tbody>{''.join(area_rows)}</tbody></table></div>",
            "<h2>Every clause</h2>",
            f"<p>{legend} (a cell's title holds the reason; the lists below hold every fail "
            "and skip)</p>",
            f'<div class="scroll"><table class="grid" id="grid"><thead><tr><th>clause</th>{head}'
            f"</tr></thead><tbody>{grid_rows}</tbody></table></div>",
            "<h2>Fails and skips, by backend</h2>",
            *notes,
        ]
    )


def render_changes(matrix: Matrix, base: str | None, bases: Mapping[str, str] | None = None) -> str:
    """Returns the verdicts that changed from one column (release) to the next, each later
    line's against its base release (``bases``, else ``base``)."""
    changes = timeline(matrix, base, bases)
    items = "".join(
        f"<li><b>{c.clause}</b> {mark(c.before.status)} → {mark(c.after.status)} in "
        f"{esc(change_place(c))}{' †' if c.generated else ''}: {esc(c.why)}</li>"
        for c in changes
    )
    note = f"<p>† {esc(GENERATED_NOTE)}</p>" if any(c.generated for c in changes) else ""
    return f"<h2>Verdicts that changed</h2><ul>{items or '<li>none</li>'}</ul>{note}"


# --- the zoo and the benchmarks --------------------------------------------------------------


def render_zoo(records: Any) -> str:
    """Returns the zoo page's body from the detections ``python -m tests.zoo --json`` saved."""
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and {"backend", "area", "verdict", "clauses"} <= set(r) for r in records
    ):
        raise UsageError("zoo.json is not the JSON python -m tests.zoo --json writes")
    caught = sum(1 for r in records if r["verdict"] == "caught")
    shown = {"caught": "pass", "elsewhere": "skip", "missed": "fail"}
    rows = "".join(
        f"<tr><td><code>{esc(r['backend'])}</code></td><td>{esc(r['area'])}</td>"
        f"<td>{esc(', '.join(r['clauses']))}</td>"
        f'<td class="v-{shown.get(r["verdict"], "na")}">'
        f"{SYMBOLS[shown.get(r['verdict'], 'n/a')]} {esc(r['verdict'])}</td>"
        f"<td>{esc(_seconds(r.get('to_first_failure')))}</td></tr>"
        for r in records
    )
    by_area: dict[str, list[float]] = {}
    for r in records:
        if isinstance(r.get("to_first_failure"), int | float):
            by_area.setdefault(r["area"], []).append(float(r["to_first_failure"]))
    areas = sorted(by_area)
    medians = [statistics.median(by_area[a]) for a in areas]
    return "\n".join(
        [
            f"<p><b>{caught} of {len(records)}</b> members caught on their own clauses.</p>",
            "<h2>Time to detection per area</h2>",
            bar_chart("median seconds to the first failure, by area", areas, medians, "seconds")
            if areas
            else "<p>no member was detected</p>",
            _table(
                ["area", "members detected", "median", "slowest"],
                [
                    [a, len(by_area[a]), f"{m:.1f} s", f"{max(by_area[a]):.1f} s"]
                    for a, m in zip(areas, medians, strict=True)
                ],
            ),
            "<h2>Every member</h2>",
            '<div class="scroll"><table><thead><tr><th>member</th><th>area</th><th>its clauses'
            "</th><th>verdict</th><th>first failure after</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div>",
        ]
    )


def _seconds(value: object, digits: int = 1) -> str:
    return f"{value:.{digits}f} s" if isinstance(value, int | float) else "—"


def _section(figures: dict[str, Any], name: str, draw: Callable[[Any], list[str]]) -> list[str]:
    if name not in figures:
        return []
    try:
        return draw(figures[name])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise UsageError(
            f"benchmarks.json: its {name} section is not what python -m benchmarks.bench writes"
        ) from None


def _ops(ops: dict[str, Any]) -> list[str]:
    measured = {name: f for name, f in ops.items() if "error" not in f}
    names = list(measured)
    rates = [float(measured[n]["ops_per_s"]) for n in names]
    rows = [
        [n, f"{f['ops_per_s']:.0f}", f"{f['ms_per_op']:.2f}", f"{f['add_per_s']:.0f}",
         f"{f['replace_per_s']:.0f}", f"{f['remove_per_s']:.0f}"]
        for n, f in measured.items()
    ]  # fmt: skip
    rows += [[n, f"not measured: {f['error']}", "", "", "", ""] for n, f in ops.items()
             if "error" in f]  # fmt: skip
    return [
        "<h2>Store speed</h2>",
        bar_chart("mutations per second (higher is faster)", names, rates, "mutations/s"),
        _table(
            ["store, path", "mutations/s", "ms/mutation", "add/s", "replace/s", "remove/s"], rows
        ),
    ]


def _fsync(f: dict[str, float]) -> list[str]:
    names = {
        "file_ms": "write + fsync of a small file",
        "file_dir_ms": "the same + fsync of its directory",
        "atomic_ms": "durable atomic write",
        "reference_ms": "reference store, one mutation",
    }
    shown = [(label, float(f[key])) for key, label in names.items() if key in f]
    return [
        "<h2>The fsync floor</h2>",
        bar_chart(
            "milliseconds per call (lower is faster)",
            [label for label, _ in shown],
            [ms for _, ms in shown],
            "ms",
        ),
        _table(["what", "ms"], [[label, f"{ms:.2f}"] for label, ms in shown]),
    ]


def _certify(runs: dict[str, dict[str, Any]]) -> list[str]:
    profiles = list(runs)
    seconds = [float(runs[p]["seconds"]) for p in profiles]
    return [
        "<h2>Certification of the reference</h2>",
        bar_chart("wall seconds per profile", profiles, seconds, "seconds"),
        _table(
            ["profile", "wall time", "result"],
            [[p, f"{runs[p]['seconds']:.0f} s", runs[p].get("summary", "")] for p in profiles],
        ),
    ]


def _lin(sizes: dict[str, dict[str, float]]) -> list[str]:
    names = list(sizes)
    return [
        "<h2>The linearizability checker</h2>",
        bar_chart(
            "seconds to check one history, by sessions x operations",
            names,
            [float(sizes[n]["total"]) for n in names],
            "seconds",
        ),
        _table(
            ["history", "mutations", "reader samples", "cheap checkers", "search", "total"],
            [
                [
                    n,
                    f"{r['mutations']:.0f}",
                    f"{r['samples']:.0f}",
                    f"{r['cheap']:.2f} s",
                    f"{r['linearizability']:.2f} s",
                    f"{r['total']:.2f} s",
                ]
                for n, r in sizes.items()
            ],
        ),
    ]


def _scale(scale: dict[str, Any]) -> list[str]:
    sizes = scale["sizes"]
    names = [f"{int(limit):,}" for limit in sizes]
    rows = [
        [f"{int(limit):,}", f"{f['bytes'] / 1024:,.0f} KiB", f"{f['entries']:,.0f}",
         f"{f['load_ms']:.2f} ms", f"{f['add_ms']:.2f} ms", f"{f['replace_ms']:.2f} ms",
         f"{f['remove_ms']:.2f} ms", f"{f['add_peak_kib']:,.0f} KiB", f"{f['parse_ms']:.2f} ms"]
        for limit, f in sizes.items()
    ]  # fmt: skip
    exponents = ", ".join(f"{name} {k:.2f}" for name, k in scale["growth"].items())
    return [
        "<h2>By the size of the memory file</h2>",
        bar_chart(
            "milliseconds per add, by the limit the file fills (code points)",
            names,
            [float(f["add_ms"]) for f in sizes.values()],
            "ms",
        ),
        _table(
            [
                "limit",
                "file",
                "entries",
                "load",
                "add",
                "replace",
                "remove",
                "peak of an add",
                "spec's parse",
            ],
            rows,
        ),
        f"<p>Growth exponents (time ∝ size^k): {esc(exponents)}.</p>",
    ]


def render_benchmarks(figures: Any) -> str:
    """Returns the benchmarks page's body from the figures ``python -m benchmarks.bench --json``
    saved: a chart and a table per section it measured."""
    if not isinstance(figures, dict):
        raise UsageError("benchmarks.json is not the JSON python -m benchmarks.bench writes")
    parts = [
        f"<p>Figures, not timed tests, on {esc(figures.get('cpus', '?'))} CPUs; load average "
        f"{esc(figures.get('load', '?'))} at the start of the run.</p>"
    ]
    parts += _section(figures, "ops", _ops)
    parts += _section(figures, "fsync", _fsync)
    parts += _section(figures, "certify", _certify)
    parts += _section(figures, "lin", _lin)
    parts += _section(figures, "scale", _scale)
    if "zoo" in figures:
        parts += ["<h2>Time to detection per zoo area</h2>", render_zoo(figures["zoo"])]
    return "\n".join(parts)


# --- the providers ---------------------------------------------------------------------------

PROVIDERS_KEYS = {"clauses", "subjects", "elsewhere", "not_yet"}
SUBJECT_KEYS = {"key", "title", "status", "wall", "level", "counts", "verdicts", "failing"}
CODE_SPAN = re.compile(r"`([^`]+)`")


def _inline(text: object) -> str:
    """Returns Markdown text of a note as HTML: escaped, each `code span` as ``<code>``."""
    return CODE_SPAN.sub(r"<code>\1</code>", esc(text))


def render_providers(saved: Any) -> str:
    """Returns the providers page's body from the run ``python -m tests.providers_sweep --json``
    saved: the level, counts and time of each provider, the grid of providers × PLUGIN clauses,
    each failing clause with its note, and the providers not certified with why."""
    try:
        shaped = set(saved) >= PROVIDERS_KEYS and all(
            set(subject) >= SUBJECT_KEYS for subject in saved["subjects"]
        )
        body = _providers(saved) if shaped else None
    except (KeyError, TypeError, ValueError, AttributeError):
        body = None
    if body is None:
        raise UsageError("providers.json is not the JSON python -m tests.providers_sweep writes")
    return body


def _providers(saved: dict[str, Any]) -> str:
    subjects: list[dict[str, Any]] = saved["subjects"]
    clauses = [c["clause"] for c in saved["clauses"]]
    levels = {c["clause"]: c["level"] for c in saved["clauses"]}
    legend = " ".join(mark(status) for status in MARKS)
    summary = _table(
        ["provider", "level", "passed", "failed", "skipped", "not judged", "failing clauses",
         "initialize", "slowest prefetch", "slowest sync_turn", "exit status", "certify"],
        [
            [
                s["title"], s["level"] or "no report", *_counts(s),
                ", ".join(f["clause"] for f in s["failing"]) or "none",
                *(_seconds(s.get("figures", {}).get(name), 2) for name in
                  ("initialize_s", "prefetch_max_s", "sync_turn_max_s")),
                "timed out or not prepared" if s["status"] is None else s["status"],
                _seconds(s["wall"], 0),
            ]
            for s in subjects
        ],
    )  # fmt: skip
    head = "".join(
        f'<th scope="col">{esc(c)} <small>{esc(levels[c])}</small></th>' for c in clauses
    )
    rows = []
    for s in subjects:
        verdicts = {v["clause"]: v for v in s["verdicts"]}
        if s["counts"] is None:
            last = s.get("output") or "no output"
            cells = f'<td class="v-na" colspan="{len(clauses)}">no report: {esc(last)}</td>'
        else:
            cells = "".join(
                _cell(verdicts[c]["status"], verdicts[c]["why"])
                if c in verdicts
                else _cell("unchecked", "not in this provider's report")
                for c in clauses
            )
        rows.append(
            f'<tr><th scope="row" id="p-{esc(s["key"])}">{esc(s["title"])}</th>{cells}</tr>'
        )
    argued = [_argued(s) for s in subjects]
    elsewhere = "".join(
        f"<tr><td>{_inline(e['package'])}</td><td>{_inline(e['why'])}</td></tr>"
        for e in saved["elsewhere"]
    )
    unsettled = "".join(f"<li>{esc(u)}</li>" for u in saved.get("unsettled") or [])
    return "\n".join(
        [
            f"<p>{len(subjects)} Hermes memory providers that run on one machine without an "
            f"account, each certified with <code>memspec provider</code> in hermes-agent "
            f"{esc(saved.get('hermes', '?'))} (profile <code>{esc(saved.get('profile', '?'))}"
            "</code>), the network refused, as a user installs it. Each clause a provider "
            "fails is argued below from its own code.</p>",
            "<h2>Level of each provider</h2>",
            summary,
            "<h2>Every clause</h2>",
            f"<p>{legend} (a cell's title holds the reason; the sections below hold every "
            "failure with its note)</p>",
            f'<div class="scroll"><table class="grid" id="grid"><thead><tr><th>provider</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>",
            "<h2>Each failing clause, argued</h2>",
            *argued,
            *(
                ["<h2>To settle</h2>", "<p>What a person must settle by reading the code again "
                 f"(the command exits 1 while any is left):</p><ul>{unsettled}</ul>"]
                if unsettled else []
            ),
            '<h2 id="not-certified">Not certified here</h2>',
            "<p>The other memory providers on the package index need what one machine with the "
            "network refused does not have:</p>",
            '<div class="scroll"><table><thead><tr><th>package</th><th>why</th></tr></thead>'
            f"<tbody>{elsewhere}</tbody></table></div>",
            "<p>Not certified yet, though their descriptions promise local use, each for the "
            "reason beside it:</p>",
            '<div class="scroll"><table><thead><tr><th>package</th><th>why not yet</th></tr>'
            f"</thead><tbody>{_not_yet(saved['not_yet'])}</tbody></table></div>",
        ]
    )  # fmt: skip


def _not_yet(entries: list[Any]) -> str:
    """Returns the rows of the providers not certified yet, each with why: an entry is
    ``{"package", "why"}``, or the bare ``NAME VERSION`` of a sweep that listed those whose
    installation and code were not read yet."""
    rows = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"package": entry, "why": "its installation and its code not read yet"}
        rows.append(
            f"<tr><td>{_inline(entry['package'])}</td><td>{_inline(entry['why'])}</td></tr>"
        )
    return "".join(rows) or '<tr><td colspan="2">none</td></tr>'


def _counts(subject: dict[str, Any]) -> list[object]:
    counts = subject["counts"]
    if counts is None:
        return ["–", "–", "–", "–"]
    return [counts["passed"], counts["failed"], counts["skipped"], subject.get("not_judged", "–")]


def _argued(subject: dict[str, Any]) -> str:
    """Returns a provider's section: how it is installed, each failing clause with what failed
    and the note that argues it (or that none does yet), each clause neither passed nor failed
    with its verdict and why."""
    parts = [f'<h3 id="s-{esc(subject["key"])}">{esc(subject["title"])}</h3>']
    if subject.get("how"):
        parts.append(f"<p>Installed: {_inline(subject['how'])}.</p>")
    if subject["counts"] is None:
        parts.append(f"<p>No report: <code>{esc(subject.get('output') or 'no output')}</code></p>")
        return "".join(parts)
    failing = []
    for failure in subject["failing"]:
        note = failure["note"]
        argued = (
            f"<blockquote>{_inline(note)}</blockquote>"
            if note
            else f"<p>{mark('unchecked')} not argued yet: no note for this clause</p>"
        )
        failing.append(
            f"<li>{mark('fail')} <b>{esc(failure['clause'])}</b> {esc(failure['failure'])}"
            f"{argued}</li>"
        )
    parts.append(f"<ul>{''.join(failing)}</ul>" if failing else "<p>It fails no clause.</p>")
    unjudged = [
        f"<li>{mark(v['status'])} <b>{esc(v['clause'])}</b> {esc(v['why'] or 'not judged')}</li>"
        for v in subject["verdicts"]
        if v["status"] not in ("pass", "fail")
    ]
    if unjudged:
        parts.append(f"<p>Neither passed nor failed:</p><ul>{''.join(unjudged)}</ul>")
    return "".join(parts)


# --- the site ----------------------------------------------------------------------------------


def _body(source: Source, payload: Any, where: Path) -> str:
    if source.name in ("matrix", "sweep"):
        matrix = Matrix.build(columns_from_json(payload, str(where)))
        base = payload.get("base") if isinstance(payload.get("base"), str) else None
        bases = payload.get("bases") if isinstance(payload.get("bases"), dict) else None
        changes = render_changes(matrix, base, bases) if source.name == "sweep" else ""
        return changes + render_grid(matrix)
    if source.name == "zoo":
        return render_zoo(payload)
    if source.name == "providers":
        return render_providers(payload)
    return render_benchmarks(payload)


def _nav(current: str) -> str:
    links = [("index", "index.html", "Results")] + [
        (s.name, f"{s.name}.html", s.title) for s in SOURCES
    ]
    items = "".join(
        f'<li><a href="{href}"'
        + (' aria-current="page"' if name == current else "")
        + f">{esc(title)}</a></li>"
        for name, href, title in links
    )
    return f'<nav aria-label="results pages"><ul class="inline">{items}</ul></nav>'


def build_site(results: Path, out: Path) -> list[Path]:
    """Writes the site of the results directory ``results`` into ``out``: ``index.html`` and a
    page per results page whose JSON is there; returns the pages written. Raises UsageError for
    a missing directory or a JSON file that is not what its command saves."""
    if not results.is_dir():
        raise UsageError(f"--results {results}: no such directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create {out}: {error.strerror or error}") from None
    written, listed = [], []
    for source in SOURCES:
        markdown, saved = results / f"{source.name}.md", results / f"{source.name}.json"
        link = os.path.relpath(markdown, out)
        if not saved.is_file():
            listed.append(
                f"<li><b>{esc(source.title)}</b>: no saved run here; its Markdown page "
                f'<a href="{esc(link)}">{esc(markdown.name)}</a> holds it, and '
                f"<code>{esc(source.saves)}</code> saves the JSON this site renders</li>"
            )
            continue
        body = _body(source, _read_json(saved), saved)
        header = (
            f"<header>{_nav(source.name)}<h1>{esc(source.title)}</h1>{_stamp_line(markdown)}"
            f"<p>Rendered from <code>{esc(saved.name)}</code>; the source of truth is "
            f'<a href="{esc(link)}">{esc(markdown.name)}</a>.</p></header>'
        )
        target = out / f"{source.name}.html"
        _write(target, page(source.title, f"{header}<main>{body}</main>"))
        written.append(target)
        listed.append(f'<li><a href="{target.name}">{esc(source.title)}</a></li>')
    index = (
        f"<header>{_nav('index')}<h1>memspec results</h1></header><main>"
        "<p>The results pages of memspec, rendered from the JSON their commands save beside "
        "them (the Markdown pages are the source of truth).</p>"
        f"<ul>{''.join(listed)}</ul></main>"
    )
    _write(out / "index.html", page("memspec results", index))
    return [out / "index.html", *written]


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


def add_site_command(commands: Any) -> None:
    """Adds ``memspec site`` to memspec's subcommands."""
    site = add_command(
        commands, "site", "render the results pages (docs/results) as HTML from their saved JSON"
    )
    site.add_argument("--results", default="docs/results", metavar="DIR",
                      help="the results directory (default docs/results)")  # fmt: skip
    site.add_argument("--out", required=True, metavar="DIR", help="where the site is written")
    site.set_defaults(run=_cmd_site)


def _cmd_site(args: Any) -> int:
    pages = build_site(Path(args.results), Path(args.out))
    for path in pages:
        print(f"page: {path}")
    return 0
