"""Reports carry the version of SPEC.md they were certified against: report.json's
``run.spec_version`` (described by ``conformance/report.schema.json``), report.md's header, the
matrix and sweep pages, and the pytest report header."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import memspec.spec
from memspec.conformance import cli
from memspec.conformance.matrix import Column, Matrix, render_html, render_markdown, spec_version_of
from memspec.conformance.plugin import _spec_version

PROJECT = Path(__file__).resolve().parent.parent.parent
SCHEMA = PROJECT / "conformance" / "report.schema.json"
GOOD = "# spec\n\nVersion 3 (2027-01-02). Text.\n\n## Changes\n\n### Version 3 (2027-01-02)\n\nx\n"



def test_the_plugin_reads_the_version_of_the_spec_it_runs(tmp_path: Path) -> None:
    assert _spec_version(None) == memspec.spec.SPEC_VERSION
    versioned = tmp_path / "SPEC.md"
    versioned.write_text(GOOD, encoding="utf-8")
    assert _spec_version(versioned) == 3
    versioned.write_text("# no version", encoding="utf-8")
    assert _spec_version(versioned) is None
    assert _spec_version(tmp_path / "missing.md") is None


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


def _conforms(value: Any, schema: dict[str, Any], where: str = "report") -> list[str]:
    """Returns where ``value`` breaks the subset of JSON Schema the report schema uses."""
    kinds = {"object": dict, "array": list, "string": str, "number": (int, float),
             "integer": int, "null": type(None)}  # fmt: skip
    allowed = schema.get("type")
    if allowed is not None:
        names = allowed if isinstance(allowed, list) else [allowed]
        fits = [isinstance(value, kinds[name]) and not isinstance(value, bool) for name in names]
        if not any(fits):
            return [f"{where}: {value!r} is not {allowed}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    problems = [f"{where}: missing {key}" for key in schema.get("required", ()) if key not in value]
    for key, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value:
            problems += _conforms(value[key], sub, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problems += _conforms(item, schema["items"], f"{where}[{index}]")
    return problems


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


def test_the_schema_judge_finds_what_is_wrong() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    broken = {"run": {"spec_version": "2"}, "summary": {}, "checks": [{"status": "odd"}]}
    problems = _conforms(broken, schema)
    assert "report: missing clauses" in problems
    assert any(p.startswith("report.run.spec_version") for p in problems)
    assert any(p.startswith("report.checks[0].status") for p in problems)
