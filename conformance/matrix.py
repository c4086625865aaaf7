"""The clause matrix of several backends, and the timeline of a release sweep.

Both are made from ``report.json`` files (CONTRACT-17), so a matrix can be rendered again from
saved certifications without running anything. Each cell is the verdict of one clause for one
backend, with the reason when it is not a pass:

- ``fail``: a check citing the clause failed (or failed as listed in an expected-failures file),
  and its message does not blame another clause; the reason is its first assertion line.
- ``skip``: the clause binds only a backend that claims a feature this one does not claim
  (SPEC.md, "Scope"); or no citing check passed or failed, **or** one was skipped because the
  backend does not claim a feature it needs. A clause whose mechanism a backend lacks (no
  drift guard, no directory fsync) therefore never reads as passed on the strength of its
  other checks (CONTRACT-20). A check skipped only because it needs a Python backend
  (interposition) or the JSON Lines protocol does not demote a pass; the cell notes it.
- ``pass``: otherwise, when at least one citing check passed.
- ``n/a``: no check of the suite cites the clause (rules of the agent, verified by memspec's own
  tests).

Each column also states the conformance level its backend reached, computed from its checks by
:func:`~memspec.conformance.findings.conformance_level`, the rule of its ``report.json``.

The library never prints: it returns text (Markdown, or one self-contained HTML page).
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.backend import UsageError
from memspec.conformance.findings import (
    DEFECT_CLAUSE,
    Level,
    conformance_level,
    fails_clause,
    scope_skip,
    shorten,
)
from memspec.spec.clauses import Clause, parse_clauses
from memspec.spec.examples import spec_text

GENERATED_GROUPS = ("properties", "drift_properties", "machine", "crash", "crashstates")
"""Check-id groups whose checks are generated or timed (a property, the state machine, kill -9
at random moments)."""
GENERATED_NOTE = (
    "decided by a generated or timed check (a property, the state machine, kill -9 at random "
    "moments): where it stops first follows its inputs and timing, not only the release."
)


@dataclass(frozen=True)
class Column:
    """A Column is one certified backend: its label and the records of its ``report.json``."""

    label: str
    run: dict[str, Any]
    checks: tuple[dict[str, Any], ...]

    @classmethod
    def load(cls, directory: Path, label: str | None = None) -> Column:
        """Reads ``directory/report.json`` (raises UsageError naming the file and the problem)."""
        path = directory / "report.json"
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            run, checks = payload["run"], payload["checks"]
        except OSError as error:
            raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{path} is not a memspec report.json (no run and checks)") from None
        name = str(run.get("name") or run.get("backend") or directory.name)
        version = str(run.get("version") or "")
        default = f"{name} {version}".strip()
        return cls(label or default, run, tuple(checks))


@dataclass(frozen=True)
class Verdict:
    """A Verdict is a clause's status for one backend, with the reason when it is not a pass,
    and the ids of the checks that decided it."""

    status: str
    reason: str = ""
    checks: tuple[str, ...] = ()


def failure_reason(check: dict[str, Any]) -> str:
    """Returns one line saying why a check did not pass: its recorded reason (the record's
    verdict, :mod:`memspec.conformance.findings`), or for a report of an older memspec that
    has none, the first line of its message."""
    reason = str(check.get("reason") or "")
    if reason:
        return reason
    lines = [line.strip() for line in str(check.get("message", "")).splitlines() if line.strip()]
    return shorten(lines[0] if lines else "failed")


def blamed(check: dict[str, Any]) -> str:
    """Returns the clause a failed check blames ("" for every clause it cites)."""
    if check.get("kind") == "defect":
        return str(check.get("blamed") or DEFECT_CLAUSE)
    return str(check.get("blamed") or "")


def _against(check: dict[str, Any], clause: str) -> bool:
    return fails_clause(check["status"], str(check.get("kind") or ""), blamed(check), clause)


def _stopped(check: dict[str, Any]) -> str:
    if check.get("kind") == "harness-error":
        return f"{check['id']} stopped on a harness error"
    return f"{check['id']} stopped on {blamed(check)}"


@functools.cache
def _clauses_by_id() -> dict[str, Clause]:
    return {clause.id: clause for clause in parse_clauses(spec_text())}


def clause_verdict(clause: str, column: Column) -> Verdict:
    """Returns the verdict of ``clause`` for ``column`` (rules in the module docstring).

    A failure counts against the clause unless it blames another clause: the state machine
    cites twenty clauses, and when it stops on ``DRIFT-5`` the other nineteen were not shown to
    fail (nor to pass, by that check). A harness error counts against no clause. A clause of an
    optional feature the backend does not claim reads ``skip``, whatever its checks did: it
    binds only a backend that claims the feature (SPEC.md, "Scope").
    """
    cited = [check for check in column.checks if clause in check.get("clauses", ())]
    if not cited:
        return Verdict("n/a")
    stated = _clauses_by_id().get(clause)
    unclaimed = scope_skip(stated, column.run.get("features") or ()) if stated else None
    if unclaimed is not None:
        return Verdict("skip", unclaimed, tuple(check["id"] for check in cited))
    own = sorted(
        (check for check in cited if _against(check, clause)),
        key=lambda check: (blamed(check) != clause, len(check.get("clauses", ()))),
    )
    if own:
        check = own[0]
        expected = " (expected)" if check["status"] == "xfailed" else ""
        return Verdict("fail", f"{check['id']}{expected}: {failure_reason(check)}", (check["id"],))
    skipped = [check for check in cited if check["status"] == "skipped"]
    for check in skipped:
        missing = check.get("missing_features") or ()
        if missing:
            reason = f"needs feature {', '.join(missing)}, not claimed"
            return Verdict("skip", reason, (check["id"],))
    others = [check for check in cited if check["status"] in ("failed", "xfailed")]
    stopped = [_stopped(check) for check in others if check.get("kind") != "stale"]
    ids = tuple(check["id"] for check in others)
    if any(check["status"] == "passed" or check.get("kind") == "stale" for check in cited):
        notes = [f"{len(skipped)} of {len(cited)} checks skipped"] if skipped else []
        return Verdict("pass", "; ".join(notes + stopped), ids)
    if stopped:
        return Verdict("skip", "not verified: " + "; ".join(stopped), ids)
    return Verdict("skip", failure_reason(skipped[0]), (skipped[0]["id"],))


@dataclass(frozen=True)
class Matrix:
    """A Matrix is one verdict per clause and backend, clauses in SPEC.md order."""

    clauses: tuple[Clause, ...]
    columns: tuple[Column, ...]
    cells: tuple[tuple[Verdict, ...], ...]

    def level(self, index: int) -> Level:
        """Returns the conformance level column ``index`` reached (SPEC.md, "Conformance
        levels"), computed from its checks by the same rule as its report."""
        return conformance_level(self.clauses, self.columns[index].checks)

    @classmethod
    def build(cls, columns: Sequence[Column]) -> Matrix:
        """Returns the matrix of ``columns`` over every clause of SPEC.md."""
        clauses = tuple(parse_clauses(spec_text()))
        cells = tuple(
            tuple(clause_verdict(clause.id, column) for column in columns) for clause in clauses
        )
        return cls(clauses, tuple(columns), cells)

    def counts(self, index: int) -> dict[str, int]:
        """Returns how many clauses pass, fail, skip and are n/a for column ``index``."""
        counts = {"pass": 0, "fail": 0, "skip": 0, "n/a": 0}
        for row in self.cells:
            counts[row[index].status] += 1
        return counts


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(matrix: Matrix, title: str = "memspec clause matrix") -> str:
    """Returns the matrix as Markdown: the table, then every fail and skip with its reason."""
    labels = [column.label for column in matrix.columns]
    lines = [f"## {title}", ""]
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        run = column.run
        lines.append(
            f"- **{_md(column.label)}**: level **{matrix.level(index).name}**; "
            f"{counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['skip']} skip, {counts['n/a']} n/a (profile {run.get('profile', '?')}; "
            f"features: {', '.join(run.get('features', ()))})"
        )
    lines += ["", "| clause | level | " + " | ".join(map(_md, labels)) + " |"]
    lines.append("|---|---|" + "---|" * len(labels))
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        cells = [("**FAIL**" if v.status == "fail" else v.status) for v in row]
        lines.append(f"| {clause.id} | {clause.level} | " + " | ".join(cells) + " |")
    for index, column in enumerate(matrix.columns):
        notes = [
            f"- {clause.id} {row[index].status}: {_md(row[index].reason)}"
            for clause, row in zip(matrix.clauses, matrix.cells, strict=True)
            if row[index].status in ("fail", "skip")
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


def _html_cell(verdict: Verdict) -> str:
    css = "na" if verdict.status == "n/a" else verdict.status
    reason = f"<small>{html.escape(verdict.reason)}</small>" if verdict.reason else ""
    return f'<td class="{css}">{html.escape(verdict.status)}{reason}</td>'


def render_html(matrix: Matrix, title: str = "memspec clause matrix") -> str:
    """Returns the matrix as one static, self-contained HTML page (no scripts, no links)."""
    head = "".join(f"<th>{html.escape(column.label)}</th>" for column in matrix.columns)
    summary = "".join(
        f"<li><b>{html.escape(column.label)}</b>: level <b>{matrix.level(index).name}</b>; "
        + ", ".join(f"{n} {status}" for status, n in matrix.counts(index).items())
        + f" — profile {html.escape(str(column.run.get('profile', '?')))}, features "
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
        f"<h1>{html.escape(title)}</h1><ul>{summary}</ul>"
        f"<table><thead><tr><th>clause</th><th>level</th>{head}</tr></thead>"
        f"<tbody>{rows}</tbody></table></body></html>\n"
    )


@dataclass(frozen=True)
class Change:
    """A Change is a clause whose verdict differs between two consecutive releases."""

    clause: str
    release: str
    before: Verdict
    after: Verdict

    @property
    def why(self) -> str:
        """The reason of the new verdict, or of the old one when the clause now passes."""
        if self.after.status == "pass" and self.before.reason:
            return f"was: {self.before.reason}"
        return self.after.reason or self.before.reason

    @property
    def generated(self) -> bool:
        """Whether a generated or timed check decided either verdict (see GENERATED_NOTE)."""
        decided = (*self.before.checks, *self.after.checks)
        groups = {check.split("/", 1)[-1].split(".", 1)[0] for check in decided}
        return bool(groups & set(GENERATED_GROUPS))


def timeline(matrix: Matrix) -> list[Change]:
    """Returns, for columns in release order, every clause verdict that changed, oldest first:
    the release where a clause started or stopped passing (or started being checked)."""
    changes = []
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        for index in range(1, len(row)):
            if row[index].status != row[index - 1].status:
                changes.append(
                    Change(clause.id, matrix.columns[index].label, row[index - 1], row[index])
                )
    return changes


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
    lines += ["", f"Clauses whose verdict changed after {first}:", ""]
    if not changes:
        lines.append("- none")
    for change in changes:
        mark = " †" if change.generated else ""
        lines.append(
            f"- **{change.clause}** {change.before.status} → {change.after.status} in "
            f"{_md(change.release)}{mark}" + (f": {_md(change.why)}" if change.why else "")
        )
    if any(change.generated for change in changes):
        lines += ["", f"† {GENERATED_NOTE}"]
    return "\n".join(lines) + "\n"


def render_timeline_html(matrix: Matrix, changes: Sequence[Change], title: str) -> str:
    """Returns the sweep as one self-contained HTML page: the changes, then the whole matrix."""
    items = "".join(
        f"<li><b>{c.clause}</b> {c.before.status} → {c.after.status} in "
        f"{html.escape(c.release)}{' †' if c.generated else ''}: {html.escape(c.why)}</li>"
        for c in changes
    )
    if any(c.generated for c in changes):
        items += f"<li>† {html.escape(GENERATED_NOTE)}</li>"
    page = render_html(matrix, title)
    return page.replace("<table>", f"<h2>Changes</h2><ul>{items or '<li>none</li>'}</ul><table>", 1)
