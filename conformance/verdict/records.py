"""Certification records: one per check, with its verdict as data, and what the run was.

A :class:`CheckRecord` is made from pytest's report of a check; ``report.json`` holds one per
check (``verdict/report.py`` writes it) and a saved report reads back into records
(:meth:`CheckRecord.from_json`), so the matrix and the sweep judge saved runs by the same rules.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from memspec.conformance.verdict.findings import ClauseFailure, Evidence, Kind, Verdict, shorten

Figure = bool | int | float | str
"""One figure a check reports (``CheckContext.figures``): a count, seconds, a flag, a name."""


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
    (``verdict/findings.py``): ``kind`` (or ``stale`` for a listed expected failure that passed),
    ``blamed`` ("" for every clause it cites), ``reason``, ``missing_features``, and for a check
    that went on after a failure, ``failures`` and ``completed``; ``adapter_gap`` marks an
    unverified check that memspec's adapter of the store could not map (``AdapterGap``);
    ``evidence`` what a failed example's step sent, received and expected.
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
    adapter_gap: bool = False
    evidence: Evidence | None = None

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


XDIST_HEADER = re.compile(r"\[gw\d+\] \S+ -- Python \S+ ")
"""The line pytest-xdist puts before a worker's failure (its interpreter's path): no verdict."""


def _failure_text(report: Any) -> str:
    """Returns the failure's text, without the header line of an xdist worker."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = report.longreprtext if hasattr(report, "longreprtext") else str(report.longrepr)
    if crash is not None and len(text) > 4000:
        return crash.message
    first, _, rest = text.partition("\n")
    return rest if XDIST_HEADER.match(first) else text


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
        backend: BackendInfo,
        profile: str,
        seed: int | None,
        where: Path,
        *,
        spec_version: str | None,
        started: str | None = None,
    ) -> RunInfo:
        """Returns the run info of a run of ``backend`` (as one session described it) on the
        file system of ``where``; ``spec_version`` is that of the SPEC.md the run used
        (``None``: it states none), ``started`` when the run began (default: now)."""
        from importlib.metadata import version as dist_version

        return cls(
            backend=backend.label,
            name=backend.name,
            version=backend.version,
            features=backend.features,
            profile=profile,
            seed=seed,
            platform=platform.platform(),
            python=sys.version.split()[0],
            filesystem=filesystem_type(where),
            memspec=dist_version("memspec"),
            spec_version=spec_version,
            **({"started": started} if started else {}),
        )


@dataclass(frozen=True)
class BackendInfo:
    """BackendInfo is what a run reports of its backend: the name it was given (``label``),
    its own name and version, and the features it claims (when no session could be opened, one
    item saying why)."""

    label: str
    name: str
    version: str
    features: tuple[str, ...]


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
