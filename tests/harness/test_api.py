"""``memspec.certify``: the programmatic front door, given a name, a factory or a command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memspec
from memspec.conformance.transport.backend import InProcessBackend, factory_name
from memspec.reference_impl import open_store
from tests.backends.wrappers import stuck_when_full

# Worker processes run the concurrent-writer checks: a factory must reach them too.
SELECTION = "FORMAT or LIMIT or locking.concurrent_adds_are_all_kept"


def test_a_named_factory_certifies_with_reports(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    result = memspec.certify(open_store, profile="smoke", select=SELECTION, report="out", workers=2)
    assert result.ok, result.summary + result.output[-2000:]
    assert result.counts["passed"] == len(result.records) > 10
    assert "locking.concurrent_adds_are_all_kept" in {r.id.split("/")[1] for r in result.records}
    assert (tmp_path / "out" / "report.json").is_file()
    assert "passed in" in result.output  # quiet: what pytest printed is in the result


def test_a_nameless_factory_reaches_worker_processes() -> None:
    factory = lambda root, **limits: open_store(root, **limits)  # noqa: E731
    result = memspec.certify(factory, profile="smoke", select=SELECTION)
    assert result.ok, result.summary + result.output[-3000:]
    assert any(r.id.endswith("concurrent_adds_are_all_kept") for r in result.records)


def test_a_broken_factory_fails_on_its_clause() -> None:
    result = memspec.certify(stuck_when_full, profile="smoke", select="LIMIT")
    assert result.status == 1 and not result.ok
    failed = [r for r in result.records if r.status == "failed"]
    assert failed and any("LIMIT-4" in r.clauses for r in failed), result.summary
    assert "failed: LIMIT/" in result.summary


def test_a_command_backend_certifies() -> None:
    command = "memspec serve --backend memspec.reference_impl:open_store"
    result = memspec.certify(backend_cmd=command, profile="smoke", select="FORMAT")
    assert result.ok and result.counts["passed"] > 3, result.summary


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"backend": "nope:factory"}, "cannot import backend module 'nope'"),
        ({"backend": 42}, "backend must be 'MODULE:FACTORY' or a factory callable, got int"),
        ({}, "give exactly one of"),
        ({"backend": "memspec.reference_impl:open_store", "profile": "hard"}, "unknown profile"),
        ({"backend": "memspec.reference_impl:open_store", "timeout": 0}, "timeout must be"),
        ({"backend": lambda root, **k: None, "workers": 2}, "runs in one process"),
    ],
)
def test_bad_arguments_raise_usage_errors(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(memspec.UsageError, match=error):
        memspec.certify(**kwargs)


def test_a_factory_that_cannot_open_is_status_2() -> None:
    def refuses(root: Path, **limits: int) -> Any:
        raise RuntimeError("no database")

    result = memspec.certify(refuses, profile="smoke")
    assert result.status == 2 and "no database" in result.notes[0]


def test_factory_names() -> None:
    assert factory_name(open_store) == "memspec.reference_impl.store:open_store"
    assert factory_name(lambda root: None) is None
    assert factory_name(InProcessBackend.of_factory) is None


def test_selecting_nothing_is_a_usage_error() -> None:
    nothing = memspec.certify(open_store, profile="smoke", select="NO-SUCH-CLAUSE")
    assert nothing.status == 2 and not nothing.records
    assert "no check matched -k 'NO-SUCH-CLAUSE'" in nothing.notes[0]


def test_coverage_from_python(tmp_path: Path) -> None:
    # memspec.certify(coverage=True) measures the backend as certify --coverage does.
    result = memspec.certify(
        "tests.backends.first_attempt:open_store", profile="smoke", select="ENTRY",
        report=tmp_path, coverage=True,
    )  # fmt: skip
    line = next(note for note in result.notes if note.startswith("backend coverage:"))
    # a module of a package: the package's directory is measured, the module's lines in it
    assert "tests/backends" in line and not line.startswith("backend coverage: 0.0%"), line
    assert "coverage" in json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
