"""Certification records and the reports made from them (CONTRACT certify clauses).

The library never prints: this module turns verdicts into ``report.json`` (run info and one
record per check) and ``report.md`` (the clause-by-clause matrix); the CLI renders the summary.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from memspec.conformance.core.errors import UsageError
from memspec.conformance.core.findings import (
    ClauseFailure,
    Kind,
    Level,
    Verdict,
    bears_on,
    conformance_level,
    shorten,
)
from memspec.conformance.core.registry import Figure
from memspec.conformance.core.summary import (
    adapter_gaps,
    blocked_level,
    failing_clauses,
    not_verified,
    render,
)
from memspec.conformance.core.verdicts import clause_verdict
from memspec.conformance.transport.backend import Backend, BackendDefect
from memspec.spec.clauses import Clause, parse_clauses
from memspec.spec.examples import spec_text


class Status(StrEnum):
    """How a check ended, as ``report.json`` spells it (see :class:`CheckRecord`)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"


@dataclass(frozen=True)
class CheckRecord:
    """A CheckRecord is the verdict of one check: its id, clauses, status, message, duration.

    ``status`` is ``passed``, ``failed``, ``skipped`` or ``xfailed``; ``figures`` are the numbers
    the check reported. A check that did not pass carries its verdict as data
    (``core/findings.py``): ``kind`` (or ``stale`` for a listed expected failure that passed),
    ``blamed`` ("" for every clause it cites), ``reason``, ``missing_features``, and for a check
    that went on after a failure, ``failures`` and ``completed``.
    """

    id: str
    clauses: tuple[str, ...]
    features: tuple[str, ...]
    status: Status
    message: str
    duration: float
    figures: dict[str, Figure] = field(default_factory=dict)
    kind: Kind = Kind.NONE
    blamed: str = ""
    reason: str = ""
    missing_features: tuple[str, ...] = ()
    failures: tuple[ClauseFailure, ...] = ()
    completed: bool = False

    @classmethod
    def from_report(
        cls,
        report: Any,
        clauses: tuple[str, ...],
        features: tuple[str, ...],
        verdict: Verdict | None,
        figures: Mapping[str, Figure],
        stale: str | None = None,
    ) -> CheckRecord:
        """Returns the record of a pytest report of a memspec check: ``clauses`` and
        ``features`` are those of its marker, ``verdict`` how it ended when it did not pass,
        ``stale`` the reason of an expected failure that passed (``None``: it was not one)."""
        check_id = (
            report.nodeid.split("[", 1)[-1].rstrip("]") if "[" in report.nodeid else (report.nodeid)
        )
        if stale is not None:
            status = Status.FAILED
            message = (
                f"{stale}, but it passed: remove it from the expected-failures file "
                "(the list must not go stale)"
            )
            verdict = Verdict(Kind.STALE, reason=shorten(message))
        elif hasattr(report, "wasxfail"):
            status, message = Status.XFAILED, report.wasxfail
        elif report.skipped:
            status = Status.SKIPPED
            longrepr = report.longrepr
            message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            message = message.removeprefix("Skipped: ")
        else:
            status = Status.FAILED if report.failed else Status.PASSED
            message = _failure_text(report) if report.failed else ""
        if verdict is None and status != Status.PASSED:
            verdict = Verdict(
                Kind.UNSUPPORTED if status == Status.SKIPPED else Kind.HARNESS_ERROR,
                reason=shorten(message.splitlines()[0] if message.strip() else status),
            )
        return cls(
            check_id, clauses, features, status, message, round(report.duration, 4), dict(figures),
            *(getattr(verdict, name.name) for name in fields(verdict)) if verdict else (),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """Returns the record as a check of ``report.json``."""
        return {**asdict(self), "status": str(self.status), "kind": str(self.kind)}

    @classmethod
    def from_json(cls, check: Mapping[str, Any]) -> CheckRecord:
        """Returns the record a check of ``report.json`` (or of a report sent between pytest
        processes) holds; a report of an older memspec may lack the verdict's fields."""
        return cls(
            id=check["id"],
            clauses=tuple(check["clauses"]),
            features=tuple(check.get("features") or ()),
            status=Status(check["status"]),
            message=check.get("message", ""),
            duration=check.get("duration", 0.0),
            figures=dict(check.get("figures") or {}),
            **vars(Verdict.from_json(check)),
        )


def _failure_text(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = report.longreprtext if hasattr(report, "longreprtext") else str(report.longrepr)
    if crash is not None and len(text) > 4000:
        return crash.message
    return text


@dataclass(frozen=True)
class RunInfo:
    """RunInfo says what was certified, where and how, against which version of SPEC.md
    (``spec_version``, the number of its version line)."""

    backend: str
    name: str
    version: str
    features: tuple[str, ...]
    profile: str
    seed: int | None
    platform: str
    python: str
    filesystem: str
    memspec: str
    spec_version: str | None
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @classmethod
    def collect(
        cls,
        backend: Backend,
        profile: str,
        seed: int | None,
        where: Path,
        *,
        spec_version: str | None,
        started: str | None = None,
    ) -> RunInfo:
        """Returns the run info, opening one session on a scratch root to read the features;
        ``spec_version`` is that of the SPEC.md the run used (``None``: it states none),
        ``started`` when the run began (default: now)."""
        name, version, features = backend.label, "", ("?",)
        with tempfile.TemporaryDirectory(prefix="memspec-info-") as scratch:
            try:
                session = backend.open(Path(scratch))
            except (BackendDefect, UsageError) as error:
                features = (f"could not open a session: {error}",)
            else:
                features = tuple(sorted(session.features))
                name = getattr(session, "name", name) or name
                version = str(getattr(session, "version", "") or "")
                session.close()
        from importlib.metadata import version as dist_version

        return cls(
            backend=backend.label,
            name=name,
            version=version,
            features=features,
            profile=profile,
            seed=seed,
            platform=platform.platform(),
            python=sys.version.split()[0],
            filesystem=filesystem_type(where),
            memspec=dist_version("memspec"),
            spec_version=spec_version,
            **({"started": started} if started else {}),
        )


def filesystem_type(path: Path) -> str:
    """Returns the type of the file system holding ``path``: the mount table's, whose name is
    exact (``stat -f`` names ext4 ``ext2/ext3``, their magic number being one), else what
    ``stat -f`` says, else ``unknown``."""
    probe = path if path.exists() else Path(tempfile.gettempdir())
    mounted = _mounted_type(probe.resolve())
    if mounted is not None:
        return mounted
    try:
        result = subprocess.run(
            ["stat", "-f", "-c", "%T", str(probe)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() or "unknown"


def _mounted_type(path: Path) -> str | None:
    """Returns the type /proc/self/mounts gives the mount that holds ``path`` (the longest
    mount point above it), or ``None`` where there is no such table."""
    try:
        lines = Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    found: tuple[int, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(fields[1].replace("\\040", " "))
        if (path == point or point in path.parents) and (
            found is None or len(point.parts) >= found[0]
        ):
            found = (len(point.parts), fields[2])
    return None if found is None else found[1]


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
    :func:`memspec.conformance.core.verdicts.clause_verdict` decides it, ``expected fail`` when
    every deciding check was listed, and for a clause no check cites ``n/a`` when memspec's own
    tests verify it (``Checked by:``), else ``unchecked``."""
    checks = list(records)
    rows = []
    for clause in clauses:
        verdict = clause_verdict(clause.id, checks, claimed)
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


def summary_counts(records: Iterable[CheckRecord]) -> dict[str, int]:
    """Returns how many checks passed, failed, were skipped and failed as expected, and how many
    stopped on a harness error (counted apart: never a failure of the backend)."""
    counts = dict.fromkeys((*Status, "errors"), 0)
    for record in records:
        if record.kind == Kind.HARNESS_ERROR and record.status == Status.FAILED:
            counts["errors"] += 1
        else:
            counts[record.status] += 1
    return counts


def level_of(records: Iterable[CheckRecord]) -> Level:
    """Returns the conformance level the records reach over the clauses of SPEC.md
    (:func:`~memspec.conformance.core.findings.conformance_level`)."""
    return conformance_level(parse_clauses(spec_text()), records)


def _markdown(
    info: RunInfo, records: Sequence[CheckRecord], rows: Sequence[ClauseRow], level: Level
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
    failing = failing_clauses(records, info.features)
    pending = not_verified(level, records, info.features)
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
    stated = {clause.id: clause for clause in parse_clauses(spec_text())}
    for row in rows:
        why = "<br>".join(text.replace("|", "\\|") for text in row.why)
        needed = blocked_level(stated[row.clause]) if row.clause in stated else ""
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


def write_reports(directory: Path, info: RunInfo, records: Sequence[CheckRecord]) -> None:
    """Writes ``report.json`` and ``report.md`` into ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    clauses = parse_clauses(spec_text())
    rows = clause_matrix(clauses, records, info.features)
    level = conformance_level(clauses, records)
    payload = {
        "run": asdict(info),
        "summary": summary_counts(records),
        "level": level.to_json(),
        "checks": [record.to_json() for record in records],
        "clauses": [asdict(row) for row in rows],
    }
    _write(directory / "report.json", json.dumps(payload, indent=1) + "\n")
    _write(directory / "report.md", _markdown(info, records, rows, level))


def _write(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temp file; a lone surrogate a backend sent, quoted
    in a message, is written as its escape (``\\ud800``), never an encoding error."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
