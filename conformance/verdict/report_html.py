"""``report.html``: the certification report as one self-contained page a person opens from a CI
artifact, rendered from the same records and clause table as ``report.json`` and ``report.md``.

It opens on the conformance level and the clauses that hold the next one back, then what to fix,
then every clause of SPEC.md by area with its verdict (a symbol and a word beside its colour);
each clause expands (``<details>``) to its text and, when it fails, to the evidence of the check
that failed it: for an example the step, the request sent, the answer received, what the spec
expected and their character-level diff, every invisible character shown as the terminal shows
it; for a named check its message. A small inline script filters the clauses by verdict, level
and area; without it the page shows everything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memspec.conformance.verdict.findings import Kind
from memspec.conformance.verdict.records import CheckRecord, RunInfo, Status, summary_counts
from memspec.conformance.verdict.standing import Level, weigh
from memspec.conformance.verdict.summary import (
    SHOULD,
    adapter_gaps,
    blocked_level,
    failing_clauses,
    not_verified,
)
from memspec.conformance.verdict.webpage import diff, esc, mark, page, shown
from memspec.spec.document import Spec

MESSAGE_LIMIT = 6000
"""Characters of a check's message shown (report.json holds it whole)."""
MESSAGES_BUDGET = 500_000
"""Characters of messages one page shows in all: past it, each further message is cut to
:data:`MESSAGE_TAIL_LIMIT`, so that a page stays light (well under 1 MiB) however many checks
fail."""
MESSAGE_TAIL_LIMIT = 600


@dataclass
class Messages:
    """Messages are the checks' messages a page has shown: under which clause each one is, and
    how many characters of the budget are left."""

    under: dict[str, str] = field(default_factory=dict)
    left: int = MESSAGES_BUDGET

    def take(self, text: str) -> str:
        """Returns the part of ``text`` the page shows, saying how much report.json holds
        beyond it, and spends it from the budget."""
        limit = MESSAGE_LIMIT if self.left > 0 else MESSAGE_TAIL_LIMIT
        shown = text[:limit]
        self.left -= len(shown)
        if len(text) > limit:
            shown += f"\n… ({len(text) - limit} more characters in report.json)"
        return shown


NEEDED_FOR = {"safe": "safe", "core": "core", "full": "full", SHOULD: "advice"}
"""The words of the level filter: the level a failure of the clause holds back."""


class Row(Protocol):
    """A row of the clause table (:class:`~memspec.conformance.verdict.report.ClauseRow`)."""

    @property
    def clause(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def checks(self) -> tuple[str, ...]: ...
    @property
    def why(self) -> tuple[str, ...]: ...


SCRIPT = """(()=>{
const f=document.getElementById('filters'),out=document.getElementById('shown');
const all=[...document.querySelectorAll('.clause')];f.hidden=false;
function apply(){
const on=new Set([...f.querySelectorAll('input[name=verdict]:checked')].map(i=>i.value));
const lv=f.elements.level.value,ar=f.elements.area.value;let n=0;
for(const c of all){const s=on.has(c.dataset.verdict)&&(!lv||c.dataset.level===lv)&&
(!ar||c.dataset.area===ar);c.hidden=!s;if(s)n++;}
for(const a of document.querySelectorAll('section.area'))
a.hidden=!a.querySelector('.clause:not([hidden])');
out.textContent=n+' of '+all.length+' clauses shown';}
f.addEventListener('change',apply);
document.getElementById('open-failures').addEventListener('click',()=>{
for(const d of document.querySelectorAll('.clause[data-verdict=fail]>details'))d.open=true;});
apply();})();"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def _level_block(level: Level, info: RunInfo, counts: dict[str, int]) -> list[str]:
    lines = [f'<p id="level" class="level l-{esc(level.name)}">conformance level: {level.name}</p>']
    if level.next is not None and level.blocked_by:
        items = "".join(
            f'<li><a href="#c-{esc(b.clause)}">{esc(b.clause)}</a> {esc(b.standing)}</li>'
            for b in level.blocked_by
        )
        lines.append(
            f'<h2 id="blockers">What holds {level.next} back ({len(level.blocked_by)})</h2>'
            f'<ul class="inline">{items}</ul>'
        )
    if level.not_verifiable:
        lines.append(
            "<p>Not verifiable over this transport (holds no level back): "
            + ", ".join(esc(c) for c in level.not_verifiable)
            + "</p>"
        )
    errors = (
        f"; <strong>{counts['errors']} harness errors</strong> "
        "(bugs in memspec, not in the backend)"
        if counts["errors"]
        else ""
    )
    expected = f" ({counts['xfailed']} expected failures)" if counts["xfailed"] else ""
    lines.append(
        f'<p class="counts" id="counts">{counts["passed"]} passed, {counts["failed"]} failed, '
        f"{counts['skipped']} skipped{expected}{errors}</p>"
    )
    seed = "derandomised" if info.seed is None else str(info.seed)
    facts = [
        ("backend", f"{info.backend} ({info.name} {info.version})".replace(" )", ")")),
        ("features", ", ".join(info.features)),
        ("profile", f"{info.profile}; seed {seed}"),
        ("platform", f"{info.platform}, Python {info.python}, file system {info.filesystem}"),
        ("memspec", f"{info.memspec}, spec version {info.spec_version or 'unknown'}"),
        ("started", info.started),
    ]
    lines.append(
        '<dl class="run">' + "".join(f"<dt>{k}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"
    )
    return lines


def _to_fix(records: Sequence[CheckRecord], level: Level, info: RunInfo, spec: Spec) -> list[str]:
    failing = failing_clauses(records, info.features, spec)
    pending = not_verified(level, records, info.features, spec)
    gaps = adapter_gaps(records)
    if not (failing or pending or gaps):
        return []
    lines = ['<h2 id="to-fix">What to fix, by the level it blocks</h2>']
    if gaps:
        lines.append(
            f"<h3>Adapter gaps ({len(gaps)}): answers memspec's adapter cannot map</h3><ul>"
            + "".join(f"<li><code>{esc(c)}</code> {esc(why)}</li>" for c, why in gaps)
            + "</ul>"
        )
    headings = {
        "safe": "safe: they protect data already stored (fix these first)",
        "core": "core: rules every backend keeps",
        "full": "full: rules of the features it claims",
        SHOULD: "advice: SHOULD clauses (no level depends on them)",
    }
    for group, heading in headings.items():
        members = [item for item in failing if item.blocks == group]
        if not members:
            continue
        lines.append(f"<h3>{heading} ({len(members)})</h3><ul>")
        lines += [
            f'<li><a href="#c-{esc(i.clause)}"><strong>{esc(i.clause)}</strong></a> '
            f"{esc(i.reason)} (<code>{esc(i.check)}</code>)<br>rule: {esc(i.rule)}</li>"
            for i in members
        ]
        lines.append("</ul>")
    if pending:
        lines.append(f"<h3>Not verified, and needed for the next level ({len(pending)})</h3><ul>")
        lines += [
            f'<li><a href="#c-{esc(c)}"><strong>{esc(c)}</strong></a> {esc(why)}</li>'
            for c, why in pending
        ]
        lines.append("</ul>")
    return lines


def _filters(areas: Sequence[str], statuses: Sequence[str]) -> str:
    boxes = "".join(
        f'<label><input type="checkbox" name="verdict" value="{esc(s)}" checked> {mark(s)}</label>'
        for s in statuses
    )
    levels = "".join(f'<option value="{k}">{v}</option>' for k, v in NEEDED_FOR.items())
    area_options = "".join(f'<option value="{esc(a)}">{esc(a)}</option>' for a in areas)
    return (
        '<form id="filters" class="filters" hidden aria-label="filter the clauses">'
        f"<fieldset><legend>verdict</legend>{boxes}</fieldset>"
        '<label>needed for <select name="level"><option value="">any level</option>'
        f"{levels}</select></label>"
        '<label>area <select name="area"><option value="">every area</option>'
        f"{area_options}</select></label>"
        '<button type="button" id="open-failures">open every failure</button>'
        '<output id="shown" aria-live="polite"></output></form>'
    )


def _evidence(record: CheckRecord, messages: Messages, clause: str, said: str) -> list[str]:
    """Returns the evidence of one failed check: its verdict (unless ``said``, the clause's
    line, already holds it), the example's step and values with their diff, and its message
    (once per page; later clauses link to it)."""
    kind = "" if record.kind == Kind.VIOLATION else f" — {record.kind}"
    expected = " (expected failure)" if record.status == Status.XFAILED else ""
    lines = [f"<h4><code>{esc(record.id)}</code>{esc(kind)}{expected}</h4>"]
    reason = next((f.reason for f in record.failures if f.clause == clause), record.reason)
    if reason and reason not in said:
        lines.append(f"<p>{esc(reason)}</p>")
    found = record.evidence
    if found is not None:
        lines.append(
            '<dl class="evidence">'
            f"<dt>step</dt><dd>{esc(found.step)}</dd>"
            f"<dt>sent</dt><dd>{esc(shown(found.sent))}</dd>"
            f"<dt>received</dt><dd>{esc(shown(found.received))}</dd>"
            f"<dt>expected</dt><dd>{esc(shown(found.expected))}</dd></dl>"
        )
        lines.append(diff(found.expected, found.received, said + reason))
    if record.message.strip():
        first = messages.under.get(record.id)
        if first is not None:
            lines.append(
                f'<p>Its whole message is under <a href="#c-{esc(first)}">{esc(first)}</a>.</p>'
            )
        else:
            anchor = f"m-{_slug(record.id)}"
            messages.under[record.id] = clause
            lines.append(
                f'<details id="{anchor}"><summary>the whole message</summary>'
                f"<pre>{esc(messages.take(record.message.strip()))}</pre></details>"
            )
    return lines


def _clause(row: Row, spec: Spec, records: Sequence[CheckRecord], messages: Messages) -> str:
    stated = spec.clause(row.clause)
    needed = blocked_level(stated) if stated is not None else SHOULD
    area = stated.area if stated is not None else row.clause.rsplit("-", 1)[0]
    why = f'<span class="why">{esc("; ".join(row.why))}</span>' if row.why else ""
    checks = f"{len(row.checks)} check{'' if len(row.checks) == 1 else 's'}"
    body = []
    if stated is not None:
        body.append(f"<blockquote>{esc(' '.join(stated.text.split()))}</blockquote>")
    if row.status in ("fail", "expected fail") and stated is not None:
        for record in weigh(stated, records).failing:
            body += _evidence(record, messages, row.clause, "; ".join(row.why))
    elif row.checks:
        body.append(
            "<p>checks: " + ", ".join(f"<code>{esc(c)}</code>" for c in row.checks) + "</p>"
        )
    return (
        f'<div class="clause" id="c-{esc(row.clause)}" data-verdict="{esc(row.status)}" '
        f'data-level="{needed}" data-area="{esc(area)}"><details><summary>{mark(row.status)} '
        f'<span class="cid">{esc(row.clause)}</span> {esc(row.level)}, needed for '
        f"{NEEDED_FOR[needed]}, {checks}{why}</summary>"
        f'<div class="body">{"".join(body)}</div></details></div>'
    )


def _harness_errors(records: Sequence[CheckRecord]) -> list[str]:
    errors = [r for r in records if r.kind == Kind.HARNESS_ERROR and r.status == Status.FAILED]
    if not errors:
        return []
    lines = [
        f'<h2 id="harness-errors">Harness errors ({len(errors)}): bugs in memspec, not in the '
        "backend; please report them</h2>"
    ]
    for record in errors:
        text = record.message.strip()[:MESSAGE_LIMIT]  # harness errors: few, and memspec's own
        lines.append(
            f"<details><summary><code>{esc(record.id)}</code> {esc(record.reason)}</summary>"
            f"<pre>{esc(text)}</pre></details>"
        )
    return lines


def _figures(records: Sequence[CheckRecord]) -> list[str]:
    measured = [r for r in records if r.figures]
    if not measured:
        return []
    cells = "".join(
        f"<tr><td><code>{esc(r.id)}</code></td><td>{esc(name)}</td><td>{esc(value)}</td></tr>"
        for r in measured
        for name, value in r.figures.items()
    )
    return [
        f'<details id="figures"><summary>Figures the checks reported ({len(measured)} checks)'
        '</summary><div class="scroll"><table><thead><tr><th>check</th><th>figure</th>'
        f"<th>value</th></tr></thead><tbody>{cells}</tbody></table></div></details>"
    ]


def render_report(
    info: RunInfo,
    records: Sequence[CheckRecord],
    rows: Sequence[Row],
    level: Level,
    spec: Spec,
) -> str:
    """Returns ``report.html`` of a run: ``rows`` are the clause table of ``report.json``
    (:func:`~memspec.conformance.verdict.report.clause_matrix`), ``level`` the level the records
    reach over ``spec``'s clauses."""
    counts = summary_counts(records)
    title = f"memspec certification: {info.backend}"
    areas: dict[str, list[Row]] = {}
    for row in rows:
        stated = spec.clause(row.clause)
        areas.setdefault(stated.area if stated else row.clause.rsplit("-", 1)[0], []).append(row)
    order = ("fail", "expected fail", "skip", "unchecked", "pass", "n/a")
    present = [s for s in order if any(row.status == s for row in rows)]
    body = [f"<header><h1>{esc(title)}</h1>", *_level_block(level, info, counts), "</header>"]
    body.append("<main>")
    body += _to_fix(records, level, info, spec)
    body += _harness_errors(records)
    body.append(f'<h2 id="clauses">Every clause by area ({len(rows)})</h2>')
    body.append(_filters(list(areas), present))
    messages = Messages()
    for area, members in areas.items():
        tally = ", ".join(
            f"{n} {s}" for s in order if (n := sum(1 for r in members if r.status == s))
        )
        body.append(
            f'<section class="area" id="a-{esc(area)}" data-area="{esc(area)}">'
            f"<h3>{esc(area)} <small>({tally})</small></h3>"
        )
        body += [_clause(row, spec, records, messages) for row in members]
        body.append("</section>")
    body += _figures(records)
    body.append("</main>")
    return page(title, "\n".join(body), SCRIPT)
