"""``memspec certify --coverage``: which lines and branches of a Python backend the harness ran.

The backend's package (or module file) is measured with the coverage package while the checks
run, so an author sees what certification never touched. Checks run in one process for this.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import TypedDict

import coverage
import pytest

from memspec.spec.errors import UsageError


def backend_source(spec: str) -> Path:
    """Returns the directory of the backend's package, or its module file."""
    module = spec.partition(":")[0]
    top = module.split(".")[0]
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise UsageError(f"cannot locate the backend module {module!r} to measure it")
    origin = Path(found.origin)
    if found.submodule_search_locations is not None or origin.name == "__init__.py":
        return origin.parent
    return origin if "." not in module or top == module else origin.parent


class FileSummary(TypedDict):
    """One file of a coverage summary: the share covered, the lines never run and the branches
    (``line->target``) never taken."""

    percent: float
    missing_lines: list[int]
    missing_branches: list[str]


class Summary(TypedDict):
    """A coverage summary (``coverage.json``): the totals, then each file."""

    source: str
    percent: float
    missing_lines: int
    missing_branches: int
    files: dict[str, FileSummary]


class BackendCoverage:
    """A pytest plugin that measures the backend while the checks run."""

    def __init__(self, spec: str, report: str | None) -> None:
        self.source = backend_source(spec)
        self.report = Path(report) if report else None
        self.notes: list[str] = []
        # a package is a source directory; a module file is measured by name (coverage's
        # ``source`` takes directories and packages: a file there measures nothing)
        measured, one_file = [str(self.source)], self.source.is_file()
        self.cov = coverage.Coverage(
            branch=True,
            data_file=None,
            config_file=False,
            include=measured if one_file else None,
            source=None if one_file else measured,
        )
        self.cov.start()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Stops measuring and reports."""
        self.cov.stop()
        summary = self.summarise()
        self.notes.append(
            f"backend coverage: {summary['percent']:.1f}% of lines and branches of "
            f"{self.source} ({summary['missing_lines']} lines, {summary['missing_branches']} "
            "branches never exercised)"
        )
        if self.report is not None:
            self.report.mkdir(parents=True, exist_ok=True)
            (self.report / "coverage.json").write_text(
                json.dumps(summary, indent=1) + "\n", encoding="utf-8"
            )
            self.notes.append(f"backend coverage details: {self.report / 'coverage.json'}")
            self._add_to_reports(summary)

    def _add_to_reports(self, summary: Summary) -> None:
        """Adds the summary to report.json and a section to report.md, when they exist."""
        assert self.report is not None
        report_json, report_md = self.report / "report.json", self.report / "report.md"
        if report_json.is_file():
            payload = json.loads(report_json.read_text(encoding="utf-8"))
            payload["coverage"] = summary
            report_json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        if report_md.is_file():
            lines = [
                "",
                "## Backend coverage",
                "",
                f"{summary['percent']:.1f}% of the lines and branches of `{summary['source']}` "
                "ran during certification. Never exercised:",
                "",
                "| file | covered | lines never run | branches never taken |",
                "|---|---|---|---|",
            ]
            for name, data in summary["files"].items():
                lines.append(
                    f"| {Path(name).name} | {data['percent']}% | "
                    f"{_ranges(data['missing_lines'])} | {', '.join(data['missing_branches'])} |"
                )
            with report_md.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")

    def summarise(self) -> Summary:
        """Returns the totals and, per file, the lines and branches never run."""
        files: dict[str, FileSummary] = {}
        data = self.cov.get_data()
        total = 0.0
        missing_lines = missing_branches = 0
        for filename in sorted(data.measured_files()):
            analysis = self.cov._analyze(filename)
            numbers = analysis.numbers
            missing = sorted(analysis.missing)
            partial = sorted(
                f"{line}->{target}"
                for line, targets in analysis.missing_branch_arcs().items()
                for target in targets
            )
            missing_lines += len(missing)
            missing_branches += len(partial)
            files[filename] = {
                "percent": round(numbers.pc_covered, 1),
                "missing_lines": missing,
                "missing_branches": partial,
            }
        if files:
            total = self.cov.report(file=io.StringIO(), show_missing=False)
        return {
            "source": str(self.source),
            "percent": total,
            "missing_lines": missing_lines,
            "missing_branches": missing_branches,
            "files": files,
        }


def _ranges(lines: list[int]) -> str:
    """Returns line numbers as compact ranges: ``[1, 2, 3, 7]`` -> ``1-3, 7``."""
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
