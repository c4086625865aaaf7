"""A backend author's loop, tried as a new author would: a first-attempt store certified at
``smoke``, its terminal output read as a person reads it, then one defect fixed and the
verdicts compared (``tests/backends/first_attempt.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memspec.conformance.verdict.summary import SHOULD, blocked_level
from memspec.spec.clauses import parse_clauses
from memspec.spec.document import installed_spec
from tests.harness.test_certify import certify

FIRST_ATTEMPT = "tests.backends.first_attempt:open_store"
ATOMIC_FIXED = "tests.backends.first_attempt:open_atomic_store"
MOST_LINES = 150
CLAUSE_LINE = re.compile(r"^  ([A-Z]+-\d+) +\S")
HEADING = re.compile(r"^(safe|core|full|advice): \d+ ")
INTERNAL_FRAME = re.compile(r"(conformance|fuzz|spec|reference_impl)/[\w/]+\.py:\d+")


def verdicts(directory: Path) -> dict[str, str]:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    return {row["clause"]: row["status"] for row in report["clauses"]}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    directory = tmp_path_factory.mktemp("first")
    result = certify("--backend", FIRST_ATTEMPT, "--profile", "smoke", "--report", str(directory))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, directory


def test_first_run_fits_a_screen_of_clauses(first_run: tuple[str, Path]) -> None:
    # A dozen defects: at most 150 lines, every failing clause on one line under the level it
    # blocks, no frame of memspec's own code, and the level and counts at the end.
    output, directory = first_run
    lines = output.splitlines()
    assert len(lines) <= MOST_LINES, output
    failing = {clause for clause, status in verdicts(directory).items() if status == "fail"}
    assert len(failing) >= 12
    shown = [CLAUSE_LINE.match(line) for line in lines]
    listed = [found.group(1) for found in shown if found]
    assert sorted(listed) == sorted(failing), output
    clauses = {clause.id: clause for clause in parse_clauses(installed_spec().text)}
    group = ""
    for line in lines:
        if heading := HEADING.match(line):
            group = heading.group(1)
        elif found := CLAUSE_LINE.match(line):
            expected = blocked_level(clauses[found.group(1)])
            assert group == ("advice" if expected == SHOULD else expected), line
    assert not INTERNAL_FRAME.search(output), INTERNAL_FRAME.search(output)
    assert lines[-2].startswith("conformance level: none (safe needs: ")
    assert re.fullmatch(r"\d+ passed, \d+ failed, \d+ skipped", lines[-1])


def test_report_has_the_same_grouping_and_no_internal_frames(first_run: tuple[str, Path]) -> None:
    _, directory = first_run
    text = (directory / "report.md").read_text(encoding="utf-8")
    assert "## What to fix, by the level it blocks" in text
    assert text.index("### safe: ") < text.index("### core: ")
    assert not INTERNAL_FRAME.search(text), INTERNAL_FRAME.search(text)


def test_fixing_the_atomic_write_changes_only_its_clauses(tmp_path: Path) -> None:
    # The write replaced by a temp file and a rename: the clauses a torn write breaks
    # (ATOMIC-2, and CRASH-1 for a kill during it) turn green, and no other verdict changes.
    runs = {}
    for name, factory in (("before", FIRST_ATTEMPT), ("after", ATOMIC_FIXED)):
        result = certify("--backend", factory, "--profile", "smoke",
                         "--report", str(tmp_path / name), "-q")  # fmt: skip
        assert result.returncode == 1, result.stdout[-3000:]
        runs[name] = verdicts(tmp_path / name)
    before, after = runs["before"], runs["after"]
    changed = {clause: (before[clause], after[clause]) for clause in before
               if before[clause] != after[clause]}  # fmt: skip
    assert changed == {"ATOMIC-2": ("fail", "pass"), "CRASH-1": ("fail", "pass")}, changed
