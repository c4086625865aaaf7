"""The reports of a run: ``report.json`` (run info, the level, one record per check, the clause
table), ``report.md`` (what to fix, then the clause table, the figures and every failure) and
``report.html`` (the same, as a page that opens each failure on its evidence:
:mod:`~memspec.conformance.verdict.report_html`).

The library never prints: the CLI renders the terminal summary from the same records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from memspec.conformance.verdict.findings import Kind
from memspec.conformance.verdict.records import CheckRecord, RunInfo, Status, summary_counts
from memspec.conformance.verdict.report_html import render_report
from memspec.conformance.verdict.standing import Level, bears_on, clause_verdict, conformance_level
from memspec.conformance.verdict.summary import (
    adapter_gaps,
    blocked_level,
    failing_clauses,
    not_verified,
    render,
)
from memspec.spec.clauses import Clause
from memspec.spec.document import Spec, installed_spec


@dataclass(frozen=True)
class ClauseRow:
    """A ClauseRow is one clause of the report's clause table: its level, its verdict, the
    checks that cite it and why it reads so."""

    clause: str
    level: str
    status: str
    checks: tuple[str, ...]
    why: tuple[str, ...]


def clause_matrix(
    clauses: Sequence[Clause],
    records: Iterable[CheckRecord],
    claimed: Collection[str] | None = None,
) -> list[ClauseRow]:
    """Returns one row per clause: its verdict as
    :func:`~memspec.conformance.verdict.standing.clause_verdict` decides it, ``expected fail`` when
    every deciding check was listed, and for a clause no check cites ``n/a`` when memspec's own
    tests verify it (``Checked by:``), else ``unchecked``."""
    checks = list(records)
    rows = []
    for clause in clauses:
        verdict = clause_verdict(clause, checks, claimed)
        status, why = verdict.status, (verdict.reason,) if verdict.reason else ()
        if verdict.expected:
            status = "expected fail"
        elif status == "n/a" and not clause.checked_by:
            status = "unchecked"
        elif status == "n/a":
            why = (
                "a rule of the agent or of memspec, not observable through the contract; "
                "verified by memspec's own tests",
            )
        cited = tuple(check.id for check in checks if bears_on(check, clause.id))
        rows.append(ClauseRow(clause.id, clause.level, status, cited, why))
    return rows


def level_of(records: Iterable[CheckRecord], spec: Spec | None = None) -> Level:
    """Returns the conformance level the records reach over the clauses of ``spec`` (the
    installed SPEC.md by default), as
    :func:`~memspec.conformance.verdict.standing.conformance_level` decides it."""
    return conformance_level((spec or installed_spec()).clauses, records)


def _markdown(
    info: RunInfo,
    records: Sequence[CheckRecord],
    rows: Sequence[ClauseRow],
    level: Level,
    spec: Spec,
) -> str:
    counts = summary_counts(records)
    lines = [
        f"# memspec certification: {info.backend}",
        "",
        f"**{level.headline()}**",
        "",
        f"- backend: `{info.backend}` ({info.name} {info.version}".rstrip() + ")",
        f"- features: {', '.join(info.features)}",
        f"- profile: {info.profile}; seed: {'derandomised' if info.seed is None else info.seed}",
        f"- platform: {info.platform}, Python {info.python}, file system {info.filesystem}",
        f"- memspec {info.memspec}, spec version {info.spec_version or 'unknown'}, "
        f"started {info.started}",
        "",
        f"**{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped**"
        + (f" ({counts['xfailed']} expected failures)" if counts["xfailed"] else "")
        + (
            f"; **{counts['errors']} harness errors** (bugs in memspec, not in the backend)"
            if counts["errors"]
            else ""
        ),
        "",
    ]
    failing = failing_clauses(records, info.features, spec)
    pending = not_verified(level, records, info.features, spec)
    gaps = adapter_gaps(records)
    if failing or pending or gaps:
        lines += ["## What to fix, by the level it blocks", ""]
        lines += [*render(failing, pending, gaps=gaps, markdown=True), ""]
    lines += [
        "## Clauses",
        "",
        "| clause | strength | needed for | verdict | checks | why |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        why = "<br>".join(text.replace("|", "\\|") for text in row.why)
        stated = spec.clause(row.clause)
        needed = blocked_level(stated) if stated is not None else ""
        needed = "" if needed == "should" else needed
        lines.append(
            f"| {row.clause} | {row.level} | {needed} | {row.status} | {len(row.checks)} | {why} |"
        )
    measured = [r for r in records if r.figures]
    if measured:
        lines += ["", "## Figures", "", "| check | figure | value |", "|---|---|---|"]
        for record in measured:
            for name, value in record.figures.items():
                lines.append(f"| {record.id} | {name} | {value} |")
    failures = [r for r in records if r.status == Status.FAILED]
    if failures:
        lines += ["", "## Failures", ""]
        for record in failures:
            kind = "" if record.kind == Kind.VIOLATION else f" — {record.kind}"
            named = [f.clause for f in record.failures] or [record.blamed]
            blamed = f", blames {', '.join(named)}" if any(named) else ""
            lines += [
                f"### {record.id} ({', '.join(record.clauses)}{blamed}){kind}",
                "",
                "```",
                record.message.strip()[:6000],
                "```",
                "",
            ]
    return "\n".join(lines) + "\n"


def write_reports(
    directory: Path, info: RunInfo, records: Sequence[CheckRecord], spec: Spec | None = None
) -> None:
    """Writes ``report.json``, ``report.md`` and ``report.html`` into ``directory`` (created if
    missing), judging the records against ``spec`` (the installed SPEC.md by default)."""
    directory.mkdir(parents=True, exist_ok=True)
    spec = spec or installed_spec()
    rows = clause_matrix(spec.clauses, records, info.features)
    level = conformance_level(spec.clauses, records)
    payload = {
        "run": asdict(info),
        "summary": summary_counts(records),
        "level": level.to_json(),
        "checks": [record.to_json() for record in records],
        "clauses": [asdict(row) for row in rows],
    }
    _write(directory / "report.json", json.dumps(payload, indent=1) + "\n")
    _write(directory / "report.md", _markdown(info, records, rows, level, spec))
    _write(directory / "report.html", render_report(info, records, rows, level, spec))


def _write(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temp file; a lone surrogate a backend sent, quoted
    in a message, is written as its escape (``\\ud800``), never an encoding error."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
