"""The repository tracks sources only: nothing a run generates is committed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

PROJECT = Path(__file__).resolve().parents[2]
GENERATED = (
    "__pycache__", "*.pyc", "*.egg-info", ".hypothesis", ".benchmarks", ".pytest_cache",
    ".coverage", ".coverage.*", "coverage.json", "coverage.xml", "junit.xml", "report.json",
)  # fmt: skip
"""Names that runs of memspec, pytest, coverage or setuptools write."""


def _git(*args: str) -> list[str]:
    if shutil.which("git") is None or not (PROJECT / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(
        ["git", *args], cwd=PROJECT, capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout.splitlines()


def generated_paths(tracked: list[str]) -> list[str]:
    """Returns the tracked paths of which some part has a generated name."""
    return [
        path
        for path in tracked
        if any(PurePosixPath(part).match(name) for part in path.split("/") for name in GENERATED)
    ]


def test_no_generated_file_is_tracked() -> None:
    assert generated_paths(_git("ls-files")) == []


def test_no_tracked_file_is_ignored() -> None:
    assert _git("ls-files", "--cached", "--ignored", "--exclude-standard") == []


def test_the_generated_names_are_recognised() -> None:
    tracked = ["conformance/suite/cov/coverage.json", "spec/SPEC.md", "a/__pycache__/b.pyc"]
    assert generated_paths(tracked) == [tracked[0], tracked[2]]
