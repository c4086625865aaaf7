"""A verdict blames only the clause at fault: stores that differ from the reference in one part
of the snapshot header alone, certified with the whole harness, fail that part's clause and no
other (examples judge per expectation; the machine, the attack corpus and the recovery check
blame a header difference on its own clause)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memspec


@pytest.mark.parametrize(
    ("factory", "clause"),
    [("other_header_wording", "SNAP-5"), ("usage_without_delimiters", "SNAP-8")],
)
def test_a_header_difference_fails_only_its_own_clause(
    factory: str, clause: str, tmp_path: Path
) -> None:
    result = memspec.certify(f"tests.backends.wrappers:{factory}", report=tmp_path)
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    failing = sorted(row["clause"] for row in report["clauses"] if row["status"] == "fail")
    assert failing == [clause], result.output[-3000:]
    assert result.status == 1 and result.level.name == "safe"


def test_the_process_zoos_base_store_passes_what_its_members_share(tmp_path: Path) -> None:
    # every member of the process zoo breaks one step of this store; the drift, file and
    # recovery rules none of them breaks must hold for it, or each member fails them beyond
    # its own clause (they did, six clauses each, until the store kept backups and modes)
    result = memspec.certify(
        "tests.backends.procs:open_sound", select="drift or files or recovery", report=tmp_path
    )
    assert result.status == 0 and result.counts["failed"] == 0, result.output[-3000:]


@pytest.mark.parametrize("factory", ["wrappers:replaces_substring", "naive_broken:LazyWriter"])
def test_a_stress_check_first_confirms_the_store_does_what_the_spec_says(
    factory: str, tmp_path: Path
) -> None:
    # a store whose replace keeps the rest of the entry, or whose acknowledged writes are not in
    # the file, differs from the model under a crash or beside other sessions for that reason
    # alone: the crash and concurrency checks read not verified, saying so, and blame nothing
    result = memspec.certify(
        f"tests.backends.{factory}",
        select="crash_states_are_old_or_new or history_is",
        report=tmp_path,
    )
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    checks = {row["id"]: row for row in report["checks"]}
    assert len(checks) == 2 and result.counts["failed"] == 0, result.output[-3000:]
    for row in checks.values():
        assert row["status"] == "skipped" and "with nothing else going on" in row["reason"], row
