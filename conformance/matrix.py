"""The clause matrix of several backends, and the timeline of a release sweep.

Both are made from ``report.json`` files (CONTRACT-17), so a matrix can be rendered again from
saved certifications without running anything. Each cell is the verdict of one clause for one
backend, with the reason when it is not a pass:

- ``fail``: a check citing the clause failed (or failed as listed in an expected-failures file),
  and its message does not blame another clause; the reason is its first assertion line.
- ``skip``: no citing check passed or failed, **or** one was skipped because the backend does not
  claim a feature it needs. A clause whose mechanism a backend lacks (no drift guard, no
  directory fsync) therefore never reads as passed on the strength of its other checks
  (CONTRACT-20). A check skipped only because it needs a Python backend (interposition) or the
  JSON Lines protocol does not demote a pass; the cell notes it.
- ``pass``: otherwise, when at least one citing check passed.
- ``n/a``: no check of the suite cites the clause (rules of the agent, verified by memspec's own
  tests).

The library never prints: it returns text (Markdown, or one self-contained HTML page).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.backend import UsageError
from memspec.spec.clauses import Clause, parse_clauses
from memspec.spec.examples import spec_text

FEATURE_SKIP = re.compile(r"needs feature (?P<features>[\w, -]+), which the backend does not claim")
REASON_WIDTH = 240
DEFECT = "backend defect: "
GENERATED_CHECKS = r"(properties|machine|crash|crashstates)\.\w+"
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
    """A Verdict is a clause's status for one backend, with the reason when it is not a pass."""

    status: str
    reason: str = ""


def failure_reason(message: str) -> str:
    """Returns one line saying why a check failed, from its report message.

    An example's failure is its step and the difference (``add "memory" "a\\n§\\nb": expected
    code E_DELIMITER, got OK``); a named check's is its assertion line; a backend that raised
    adds the exception's last line.
    """
    lines = [line[1:].strip() for line in message.splitlines() if line.startswith("E ")]
    if not lines:
        plain = [line.strip() for line in message.splitlines() if line.strip()]
        plain = [line for line in plain if not line.startswith("[gw")]
        return _shorten(plain[0] if plain else "failed")
    first = lines[0].removeprefix("AssertionError: ")
    first = re.sub(r"^(memspec\.conformance\.backend\.)?BackendDefect: ", DEFECT, first)
    fields = {
        key: line.split(":", 1)[1].strip()
        for line in lines
        for key in ("step", "why")
        if line.startswith(f"{key}:")
    }
    if first.startswith("example ") and "why" in fields:
        first = f"{first.split(' (', 1)[0]}: {fields.get('step', '')} → {fields['why']}"
    raised = [line for line in lines if re.match(r"^\w+(Error|Exception): ", line)]
    if raised and "exited" in first:
        first += f" ({raised[-1]})"
    return _shorten(first)


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"


def _blamed(check: dict[str, Any]) -> str | None:
    """Returns the clause a failure message blames: the id it starts with (``DRIFT-5: ...``),
    or CONTRACT-6 when a named check stopped because the backend raised or died."""
    reason = failure_reason(str(check.get("message", "")))
    if reason.startswith(DEFECT):
        return "CONTRACT-6"
    found = re.match(r"([A-Z]+-\d+): ", reason)
    return found.group(1) if found else None


def clause_verdict(clause: str, column: Column) -> Verdict:
    """Returns the verdict of ``clause`` for ``column`` (rules in the module docstring).

    A failure counts against the clause unless its message blames another clause: the state
    machine cites twenty clauses, and when it stops on ``DRIFT-5: ...`` the other nineteen were
    not shown to fail (nor to pass, by that check).
    """
    cited = [check for check in column.checks if clause in check.get("clauses", ())]
    if not cited:
        return Verdict("n/a")
    failures = [check for check in cited if check["status"] in ("failed", "xfailed")]
    own = sorted(
        (check for check in failures if _blamed(check) in (None, clause)),
        key=lambda check: (_blamed(check) != clause, len(check.get("clauses", ()))),
    )
    if own:
        check = own[0]
        expected = " (expected)" if check["status"] == "xfailed" else ""
        reason = failure_reason(str(check.get("message", "")))
        return Verdict("fail", f"{check['id']}{expected}: {reason}")
    skipped = [check for check in cited if check["status"] == "skipped"]
    for check in skipped:
        missing = FEATURE_SKIP.search(str(check.get("message", "")))
        if missing:
            return Verdict("skip", f"needs feature {missing['features']}, not claimed")
    others = [f"{check['id']} stopped on {_blamed(check)}" for check in failures]
    if any(check["status"] == "passed" for check in cited):
        notes = [f"{len(skipped)} of {len(cited)} checks skipped"] if skipped else []
        return Verdict("pass", "; ".join(notes + others))
    if others:
        return Verdict("skip", "not verified: " + "; ".join(others))
    return Verdict("skip", _shorten(str(skipped[0].get("message", "")).splitlines()[0]))


@dataclass(frozen=True)
class Matrix:
    """A Matrix is one verdict per clause and backend, clauses in SPEC.md order."""

    clauses: tuple[Clause, ...]
    columns: tuple[Column, ...]
    cells: tuple[tuple[Verdict, ...], ...]

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
            f"- **{_md(column.label)}**: {counts['pass']} pass, {counts['fail']} fail, "
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
        f"<li><b>{html.escape(column.label)}</b>: "
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
        reasons = (self.before.reason, self.after.reason)
        return any(re.search(GENERATED_CHECKS, reason) for reason in reasons)


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
    lines = ["| release | pass | fail | skip | features |", "|---|---|---|---|---|"]
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        lines.append(
            f"| {_md(column.label)} | {counts['pass']} | {counts['fail']} | {counts['skip']} | "
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
