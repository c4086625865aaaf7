"""Reports carry the version of SPEC.md they were certified against: report.json's
``run.spec_version`` (described by ``conformance/verdict/report.schema.json``), report.md's
header, the matrix and sweep pages, and the pytest report header."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import memspec.spec
from memspec.conformance.commands import cli
from memspec.conformance.core.settings import make_settings
from memspec.conformance.hermes.matrix import (
    Column,
    Matrix,
    render_html,
    render_markdown,
    spec_version_of,
)
from memspec.spec.errors import UsageError

PROJECT = Path(__file__).resolve().parent.parent.parent
SCHEMA = PROJECT / "conformance" / "verdict" / "report.schema.json"
GOOD = "# spec\n\nVersion 3 (2027-01-02). Text.\n\n## Changes\n\n### Version 3 (2027-01-02)\n\nx\n"
CLAUSE = "\n**FORMAT-1** (MUST) A clause.\n"
REFERENCE = "memspec.reference_impl:open_store"


def test_the_settings_carry_the_version_of_the_spec_they_run(tmp_path: Path) -> None:
    # The report header, report.json and report.md read the version of the run's spec.
    installed = make_settings(base=tmp_path, backend=REFERENCE)
    assert installed.spec.version == memspec.spec.SPEC_VERSION
    versioned = tmp_path / "SPEC.md"
    versioned.write_text(GOOD + CLAUSE, encoding="utf-8")
    assert make_settings(base=tmp_path, backend=REFERENCE, spec=versioned).spec.version == "3"
    versioned.write_text("# no version\n\n" + CLAUSE, encoding="utf-8")
    assert make_settings(base=tmp_path, backend=REFERENCE, spec=versioned).spec.version is None
    with pytest.raises(UsageError, match="cannot read the spec"):
        make_settings(base=tmp_path, backend=REFERENCE, spec="missing.md")


def _column(run: dict[str, Any]) -> Column:
    return Column("some backend 1.0", {"profile": "ci", "features": ["core"], **run}, ())


def test_the_matrix_names_the_spec_version_of_each_report() -> None:
    assert spec_version_of({"spec_version": 2}) == "2"
    assert spec_version_of({}) == "1"
    assert spec_version_of({"spec_version": None}) == "unknown"
    matrix = Matrix.build([_column({"spec_version": 2}), _column({})])
    text = render_markdown(matrix)
    assert f"The clauses of memspec spec version {memspec.spec.SPEC_VERSION}." in text
    assert "(spec version 2, profile ci" in text and "(spec version 1, profile ci" in text
    assert "spec version 2, profile ci" in render_html(matrix)


def _conforms(report: Any, schema: dict[str, Any]) -> list[str]:
    """Returns where ``report`` breaks ``schema`` (a JSON Schema validator from the index)."""
    validator = Draft202012Validator(schema)
    return sorted(f"{error.json_path}: {error.message}" for error in validator.iter_errors(report))


def test_a_report_conforms_to_the_report_schema(tmp_path: Path) -> None:
    result = cli.main(
        ["certify", "--backend", "memspec.reference_impl:open_store", "-k", "SNAP or FENCE-7",
         "--report", str(tmp_path), "-q", "--profile", "smoke"]
    )  # fmt: skip
    assert result == 0
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert _conforms(report, schema) == []
    assert report["run"]["spec_version"] == memspec.spec.SPEC_VERSION
    assert f"spec version {memspec.spec.SPEC_VERSION}," in (tmp_path / "report.md").read_text()
    assert set(report["run"]) == set(schema["properties"]["run"]["properties"])


def test_the_schema_is_valid_and_judges_a_broken_report() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    broken = {"run": {"spec_version": "2.x"}, "summary": {}, "checks": [{"status": "odd"}]}
    problems = _conforms(broken, schema)
    assert any("'clauses' is a required property" in p for p in problems), problems
    assert any(p.startswith("$.run.spec_version") for p in problems), problems
    assert any(p.startswith("$.checks[0].status") for p in problems), problems
