"""The clause matrix of several backends, and the timeline of a release sweep.

Both are made from ``report.json`` files (CONTRACT-17), so a matrix can be rendered again without
running anything. Each cell is one clause's verdict for one backend by
:func:`memspec.conformance.core.verdicts.clause_verdict`, as in a report (a clause of an unclaimed
feature reads ``skip``); each column states the level from
:func:`~memspec.conformance.verdict.standing.conformance_level`. The library returns text, never
prints.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from memspec.conformance.verdict.findings import shorten
from memspec.conformance.verdict.records import XDIST_HEADER, CheckRecord
from memspec.conformance.verdict.standing import (
    ClauseVerdict,
    Level,
    clause_verdict,
    conformance_level,
)
from memspec.spec.clauses import PROVIDER, STORE, Clause
from memspec.spec.document import installed_spec, installed_version
from memspec.spec.errors import UsageError

GENERATED_GROUPS = ("properties", "drift_properties", "machine", "crash", "crashstates")
"""Check-id groups whose checks are generated or timed (a property, the state machine, kill -9
at random moments)."""
GENERATED_NOTE = (
    "the failure was found by a generated or timed check (a property, the state machine, "
    "kill -9 at random moments): an earlier release may have the same defect, unfound by a "
    "search that followed its other answers."
)


class RunRecord(TypedDict, total=False):
    """The ``run`` of a ``report.json`` (:class:`~memspec.conformance.core.records.RunInfo`),
    in the fields the matrix reads: a report written before SPEC.md had a version line has no
    ``spec_version``."""

    profile: str
    features: list[str]
    spec_version: str | None


@dataclass(frozen=True)
class Column:
    """A Column is one certified backend: its label and the records of its ``report.json``."""

    label: str
    run: RunRecord
    checks: tuple[CheckRecord, ...]

    @classmethod
    def load(cls, directory: Path, label: str | None = None) -> Column:
        """Reads ``directory/report.json`` (raises UsageError naming the file and the problem)."""
        path = directory / "report.json"
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            run = payload["run"]
            records = tuple(CheckRecord.from_json(check) for check in payload["checks"])
        except OSError as error:
            raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path} is not a memspec report.json (no run and checks)") from None
        name = str(run.get("name") or run.get("backend") or directory.name)
        version = str(run.get("version") or "")
        default = f"{name} {version}".strip()
        return cls(label or default, run, records)


def _subject_of(columns: Sequence[Column]) -> str:
    """Returns the subject the ``columns`` certify: PROVIDER when their checks cite provider
    clauses alone (``memspec provider`` reports), else STORE."""
    provider = {c.id for c in installed_spec(PROVIDER).clauses}
    cited = {clause for column in columns for check in column.checks for clause in check.clauses}
    return PROVIDER if cited and cited <= provider else STORE


@dataclass(frozen=True)
class Matrix:
    """A Matrix is one verdict per clause and backend, clauses in SPEC.md order."""

    clauses: tuple[Clause, ...]
    columns: tuple[Column, ...]
    cells: tuple[tuple[ClauseVerdict, ...], ...]

    @classmethod
    def build(cls, columns: Sequence[Column]) -> Matrix:
        """Returns the matrix of ``columns`` over the clauses of SPEC.md of their subject
        (SPEC.md, "Subjects"): a provider plugin's when every column is one, else a store's,
        so that a store's level is never held back by the other subject's clauses."""
        clauses = installed_spec(_subject_of(columns)).clauses
        cells = tuple(
            tuple(
                clause_verdict(clause.id, column.checks, column.run.get("features") or ())
                for column in columns
            )
            for clause in clauses
        )
        return cls(clauses, tuple(columns), cells)

    def fails_and_skips(self, index: int) -> list[tuple[Clause, ClauseVerdict]]:
        """Returns the clauses column ``index`` fails or skips, with their verdicts, in order."""
        return [
            (clause, row[index])
            for clause, row in zip(self.clauses, self.cells, strict=True)
            if row[index].status in ("fail", "skip")
        ]

    def level(self, index: int) -> Level:
        """Returns the conformance level column ``index`` reached (SPEC.md, "Conformance
        levels"), computed from its checks by the same rule as its report."""
        return conformance_level(self.clauses, self.columns[index].checks)

    def counts(self, index: int) -> dict[str, int]:
        """Returns how many clauses pass, fail, skip and are n/a for column ``index``."""
        counts = {"pass": 0, "fail": 0, "skip": 0, "n/a": 0}
        for row in self.cells:
            counts[row[index].status] += 1
        return counts


SAVED_FORMAT = "memspec-matrix"
"""The ``format`` of the JSON a matrix or sweep saves (``--json FILE``)."""


def matrix_json(
    matrix: Matrix, title: str, base: str | None = None, bases: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Returns what ``matrix --json`` and ``sweep --json`` save of a matrix: per column its
    label, its run and its records (each message cut to its first line, without evidence,
    figures or fields at their default: the verdicts are data, :meth:`Matrix.build` judges
    them again), so a page can be rendered again from it (:func:`columns_from_json`). A sweep
    with later lines saves the label of their ``base`` release and each one's own ``bases``
    (:func:`timeline`)."""

    def kept(record: CheckRecord) -> dict[str, Any]:
        lines = [
            line
            for line in record.message.splitlines()
            if line.strip() and not XDIST_HEADER.match(line)
        ]
        fields = {**record.to_json(), "message": shorten(lines[0]) if lines else ""}
        dropped = {"evidence", "figures"}
        return {
            name: value
            for name, value in fields.items()
            if name in ("id", "clauses", "status") or (name not in dropped and value)
        }

    saved = {
        "format": SAVED_FORMAT,
        "version": 1,
        "title": title,
        "spec_version": installed_version().number,
        "columns": [
            {"label": c.label, "run": dict(c.run), "checks": [kept(r) for r in c.checks]}
            for c in matrix.columns
        ],
    }
    if bases:
        saved["bases"] = dict(bases)
    return {**saved, "base": base} if base else saved


def columns_from_json(payload: Any, source: str) -> list[Column]:
    """Returns the columns a saved matrix holds (:func:`matrix_json`); raises UsageError naming
    ``source`` when it is not one."""
    try:
        if payload["format"] != SAVED_FORMAT:
            raise ValueError(payload["format"])
        columns = []
        for column in payload["columns"]:
            if not isinstance(column["run"], dict):
                raise TypeError(column["run"])
            run = cast(RunRecord, column["run"])
            checks = tuple(CheckRecord.from_json(check) for check in column["checks"])
            columns.append(Column(str(column["label"]), run, checks))
        return columns
    except (KeyError, TypeError, ValueError):
        raise UsageError(
            f"{source} is not a saved matrix (the JSON of memspec matrix or sweep --json)"
        ) from None


def spec_version_of(run: RunRecord) -> str:
    """Returns the spec version a report's run was certified against: its ``spec_version``, and
    ``1`` for a report written before SPEC.md had a version line (``unknown`` when the run's
    SPEC.md stated none)."""
    version = run.get("spec_version", 1)
    return "unknown" if version is None else str(version)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(matrix: Matrix, title: str = "memspec clause matrix") -> str:
    """Returns the matrix as Markdown: the table, then every fail and skip with its reason."""
    labels = [column.label for column in matrix.columns]
    version = installed_version().number
    lines = [f"## {title}", "", f"The clauses of memspec spec version {version}.", ""]
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        run = column.run
        lines.append(
            f"- **{_md(column.label)}**: level **{matrix.level(index).name}**; "
            f"{counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['skip']} skip, {counts['n/a']} n/a (spec version {spec_version_of(run)}, "
            f"profile {run.get('profile', '?')}; features: {', '.join(run.get('features', ()))})"
        )
    lines += ["", "| clause | level | " + " | ".join(map(_md, labels)) + " |"]
    lines.append("|---|---|" + "---|" * len(labels))
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        cells = [("**FAIL**" if v.status == "fail" else v.status) for v in row]
        lines.append(f"| {clause.id} | {clause.level} | " + " | ".join(cells) + " |")
    for index, column in enumerate(matrix.columns):
        notes = [
            f"- {clause.id} {verdict.status}: {_md(verdict.reason)}"
            for clause, verdict in matrix.fails_and_skips(index)
        ]
        if notes:
            lines += ["", f"### {_md(column.label)}: fails and skips", "", *notes]
    return "\n".join(lines) + "\n"


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}td.pass{background:#e6f4e6}
td.fail{background:#f9d6d5;font-weight:bold}td.skip{background:#fff4cc}td.na{color:#999}
td small{display:block;font-weight:normal;max-width:28em;color:#444}
"""


def _html_cell(verdict: ClauseVerdict) -> str:
    css = "na" if verdict.status == "n/a" else verdict.status
    reason = f"<small>{html.escape(verdict.reason)}</small>" if verdict.reason else ""
    return f'<td class="{css}">{html.escape(verdict.status)}{reason}</td>'


def render_html(matrix: Matrix, title: str = "memspec clause matrix") -> str:
    """Returns the matrix as one static, self-contained HTML page (no scripts, no links)."""
    head = "".join(f"<th>{html.escape(column.label)}</th>" for column in matrix.columns)
    summary = "".join(
        f"<li><b>{html.escape(column.label)}</b>: level <b>{matrix.level(index).name}</b>; "
        + ", ".join(f"{n} {status}" for status, n in matrix.counts(index).items())
        + f" — spec version {html.escape(spec_version_of(column.run))}, profile "
        + f"{html.escape(str(column.run.get('profile', '?')))}, features "
        + html.escape(", ".join(column.run.get("features", ())))
        + "</li>"
        for index, column in enumerate(matrix.columns)
    )
    rows = "".join(
        f'<tr><th id="{clause.id}">{clause.id}</th><td>{clause.level}</td>'
        + "".join(_html_cell(verdict) for verdict in row)
        + "</tr>"
        for clause, row in zip(matrix.clauses, matrix.cells, strict=True)
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>The clauses of memspec spec version {installed_version().number}.</p>"
        f"<ul>{summary}</ul>"
        f"<table><thead><tr><th>clause</th><th>level</th>{head}</tr></thead>"
        f"<tbody>{rows}</tbody></table></body></html>\n"
    )


@dataclass(frozen=True)
class Change:
    """A Change is a clause whose verdict differs between two consecutive releases, or between
    a later line's release and the base release it is compared with (``against``)."""

    clause: str
    release: str
    before: ClauseVerdict
    after: ClauseVerdict
    against: str = ""

    @property
    def why(self) -> str:
        """The reason of the new verdict, or of the old one when the clause now passes."""
        if self.after.status == "pass" and self.before.reason:
            return f"was: {self.before.reason}"
        return self.after.reason or self.before.reason

    @property
    def generated(self) -> bool:
        """Whether a generated or timed check found the failure on either side (see
        GENERATED_NOTE). A change between a feature not claimed and a verdict, or between a
        pass and a clause not verified, says nothing about a search, and is not marked."""
        decided = [
            check for verdict in (self.before, self.after) if verdict.status == "fail"
            for check in verdict.checks
        ]  # fmt: skip
        groups = {check.split("/", 1)[-1].split(".", 1)[0] for check in decided}
        return bool(groups & set(GENERATED_GROUPS))


def timeline(
    matrix: Matrix, base: str | None = None, bases: Mapping[str, str] | None = None
) -> list[Change]:
    """Returns, for columns in release order, every clause verdict that changed, oldest first:
    the release where a clause started or stopped passing (or started being checked). With
    ``base``, the label of a column, each column after it (a later line, ``sweep --then``) is
    compared with a base release, not with the fork before it: the one ``bases`` names for its
    label (:mod:`~memspec.conformance.hermes.lineage`), else ``base``."""
    labels = [column.label for column in matrix.columns]
    pivot = labels.index(base) if base in labels else len(labels)
    chosen = {label: labels.index(of) for label, of in (bases or {}).items() if of in labels}
    changes = []
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        for index in range(1, len(row)):
            before = index - 1 if index <= pivot else chosen.get(labels[index], pivot)
            if row[index].status != row[before].status:
                against = labels[before] if index > pivot else ""
                changes.append(Change(clause.id, labels[index], row[before], row[index], against))
    return changes


def change_place(change: Change) -> str:
    """Returns where a change happened, as its list item says it: the release, and for a later
    line the base release it is compared with."""
    return f"{change.release} (against {change.against})" if change.against else change.release


def render_timeline_markdown(matrix: Matrix, changes: Sequence[Change]) -> str:
    """Returns the sweep as Markdown: clause counts per release, then each change with why."""
    lines = ["| release | level | pass | fail | skip | features |", "|---|---|---|---|---|---|"]
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        lines.append(
            f"| {_md(column.label)} | {matrix.level(index).name} | {counts['pass']} | "
            f"{counts['fail']} | {counts['skip']} | "
            f"{', '.join(f for f in column.run.get('features', ()) if f != 'core')} |"
        )
    first = matrix.columns[0].label if matrix.columns else ""
    compared = any(change.against for change in changes)
    later = "; each later line's against its base release's, named beside it" if compared else ""
    lines += ["", f"Clauses whose verdict changed after {first}{later}:", ""]
    if not changes:
        lines.append("- none")
    for change in changes:
        mark = " †" if change.generated else ""
        lines.append(
            f"- **{change.clause}** {change.before.status} → {change.after.status} in "
            f"{_md(change_place(change))}{mark}" + (f": {_md(change.why)}" if change.why else "")
        )
    if any(change.generated for change in changes):
        lines += ["", f"† {GENERATED_NOTE}"]
    return "\n".join(lines) + "\n"


def render_timeline_html(matrix: Matrix, changes: Sequence[Change], title: str) -> str:
    """Returns the sweep as one self-contained HTML page: the changes, then the whole matrix."""
    items = "".join(
        f"<li><b>{c.clause}</b> {c.before.status} → {c.after.status} in "
        f"{html.escape(change_place(c))}{' †' if c.generated else ''}: {html.escape(c.why)}</li>"
        for c in changes
    )
    if any(c.generated for c in changes):
        items += f"<li>† {html.escape(GENERATED_NOTE)}</li>"
    page = render_html(matrix, title)
    return page.replace("<table>", f"<h2>Changes</h2><ul>{items or '<li>none</li>'}</ul><table>", 1)
