"""What a report says of its run: when it started and on which file system."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

import pytest

import memspec
from memspec.conformance.verdict import records
from memspec.conformance.verdict.records import filesystem_type

REFERENCE = "memspec.reference_impl:open_store"


def test_the_file_system_is_the_mount_tables(tmp_path: Path) -> None:
    # `stat -f` names ext4 "ext2/ext3" (one magic number): the mount table names it exactly
    mounts = Path("/proc/self/mounts")
    if not mounts.exists():
        pytest.skip("no /proc/self/mounts on this system")
    listed = {line.split()[1]: line.split()[2] for line in mounts.read_text().splitlines()}
    assert filesystem_type(Path("/proc")) == listed["/proc"]
    assert filesystem_type(Path("/")) == listed["/"]


def test_a_report_says_when_the_run_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the run info is put together when the report is written, after every check; a clock that
    # jumps an hour ahead there must not move the run's start
    monkeypatch.setattr(records, "datetime", _HourAhead)
    before = datetime.now(UTC)
    memspec.certify(REFERENCE, profile="smoke", select="unreadable_file", report=tmp_path / "r")
    run = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["run"]
    started = datetime.fromisoformat(run["started"])
    assert before - timedelta(seconds=1) <= started <= datetime.now(UTC), run["started"]


class _HourAhead(datetime):
    """A clock an hour ahead."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        return datetime.now(tz) + timedelta(hours=1)
