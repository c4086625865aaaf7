"""A run certifies against one SPEC.md: the installed one, or the file it is given (``certify
--spec``, ``memspec.certify(spec=...)``, the plugin's ``--memspec-spec`` and ``memspec_spec``).
Its examples are the suite's, its clauses judge the records (the report's clause table, the level,
the summary) and its version is the report's; a file that cannot be read or parsed is one usage
error, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memspec
from memspec.spec.document import installed_spec

pytest_plugins = ["pytester"]
PROJECT = Path(__file__).resolve().parents[2]
REFERENCE = "memspec.reference_impl:open_store"
CHANGED = "format-one-file-per-target"
"""The installed example the given spec changes: its expected code, so the reference fails it."""
ADDED = "format-given-spec-only"
"""The example only the given spec has, citing the clause only it states."""
SELECTION = f"{CHANGED} or {ADDED}"


def given_spec(directory: Path) -> Path:
    """Writes a copy of the installed SPEC.md with another version, one example's expected code
    changed, and one clause with an example of its own added; returns its path."""
    text = installed_spec().text
    version = "Version 2.2 (2026-12-06)."
    changed = f'```memspec id={CHANGED} clauses=FORMAT-1\nadd memory "User prefers tabs" -> OK\n'
    assert version in text and changed in text, "the installed SPEC.md moved: update this test"
    text = text.replace(version, "Version 9.4 (2027-01-01).")
    text = text.replace(changed, changed.replace("-> OK", "-> E_LIMIT"))
    added = (
        "**FORMAT-99** (SHOULD) A clause only the given spec states.\n\n"
        f"```memspec id={ADDED} clauses=FORMAT-99\n"
        'add memory "given" -> OK\n'
        'disk memory == "given"\n'
        "```\n\n"
    )
    text = text.replace("**FORMAT-2** (MUST)", added + "**FORMAT-2** (MUST)", 1)
    path = directory / "GIVEN-SPEC.md"
    path.write_text(text, encoding="utf-8")
    return path


def certify(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "certify", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {check["id"]: check["status"] for check in report["checks"]}


def test_certify_runs_and_judges_by_the_given_spec(tmp_path: Path) -> None:
    spec = given_spec(tmp_path)
    out = tmp_path / "report"
    # relative, as a user types it: resolved against the directory certify was called from
    result = certify("--backend", REFERENCE, "--spec", spec.name, "-k", SELECTION,
                     "--report", str(out), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    # the changed example fails on its new expectation, the added one runs and passes
    assert statuses(report) == {f"FORMAT/{CHANGED}": "failed", f"FORMAT/{ADDED}": "passed"}
    # the version and the clause table are the given file's
    assert report["run"]["spec_version"] == "9.4"
    rows = {row["clause"]: row for row in report["clauses"]}
    assert rows["FORMAT-99"]["level"] == "SHOULD" and rows["FORMAT-99"]["status"] == "pass"
    assert rows["FORMAT-1"]["status"] == "fail"
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "spec version 9.4," in markdown and "| FORMAT-99 | SHOULD |" in markdown
    # the terminal summary judges by it too
    assert "FORMAT-1 " in result.stdout and result.stdout.strip().endswith(
        "1 passed, 1 failed, 0 skipped"
    )


def test_the_python_api_takes_the_spec_to_its_workers(tmp_path: Path) -> None:
    # workers=2: the xdist workers collect and judge the given spec's examples too
    result = memspec.certify(
        REFERENCE, spec=given_spec(tmp_path), select=SELECTION, workers=2, profile="smoke"
    )
    assert {record.id: record.status for record in result.records} == {
        f"FORMAT/{CHANGED}": "failed",
        f"FORMAT/{ADDED}": "passed",
    }, result.output[-3000:]
    assert result.status == 1 and result.spec.version == "9.4"
    assert result.spec.clause("FORMAT-99") is not None


def test_an_expected_failure_may_name_what_only_the_given_spec_states(tmp_path: Path) -> None:
    listed = tmp_path / "expected.txt"
    listed.write_text(f"{CHANGED}\nFORMAT-99  # a clause only the given spec states\n", "utf-8")
    spec = given_spec(tmp_path)
    result = memspec.certify(REFERENCE, spec=spec, select=CHANGED, expected_failures=listed)
    assert result.status == 0 and result.counts["xfailed"] == 1, result.output[-3000:]
    with pytest.raises(memspec.UsageError, match="FORMAT-99 \\(line 2\\)"):
        memspec.certify(REFERENCE, select=CHANGED, expected_failures=listed)


def _malformed(directory: Path) -> Path:
    path = directory / "malformed.md"
    text = installed_spec().text.replace(
        f"```memspec id={CHANGED} clauses=FORMAT-1\n",
        f"```memspec id={CHANGED} clauses=FORMAT-1\nfrobnicate memory\n",
    )
    path.write_text(text, encoding="utf-8")
    return path


def _not_a_spec(directory: Path) -> Path:
    path = directory / "notes.md"
    path.write_text("# my notes\n\nNothing here is a clause.\n", encoding="utf-8")
    return path


def _undecodable(directory: Path) -> Path:
    path = directory / "latin1.md"
    path.write_bytes("**FORMAT-1** (MUST) caf\xe9".encode("latin-1"))
    return path


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda directory: directory / "missing.md", "cannot read the spec"),
        (_undecodable, "cannot read the spec"),
        (_not_a_spec, "states no clause"),
        (_malformed, "is malformed"),
    ],
)
def test_a_spec_that_cannot_be_used_is_one_usage_error(
    tmp_path: Path, make: Any, said: str
) -> None:
    path = make(tmp_path)
    result = certify("--backend", REFERENCE, "--spec", str(path), "--report", str(tmp_path / "r"))
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memspec: error: ") and said in lines[0]
    assert str(path) in lines[0] and "Traceback" not in result.stdout + result.stderr
    with pytest.raises(memspec.UsageError, match=said):
        memspec.certify(REFERENCE, spec=path)


def test_the_plugin_runs_the_spec_of_its_ini_option(pytester: pytest.Pytester) -> None:
    spec = given_spec(pytester.path)
    pytester.makeini(f"[pytest]\nmemspec_spec = {spec.name}\n")  # relative to the ini file
    result = pytester.runpytest_subprocess(
        "--pyargs", "memspec.conformance.suite", "-p", "no:cacheprovider",
        "--memspec-backend", REFERENCE, "-k", SELECTION, timeout=600,
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"memspec spec: version 9.4, {spec}", f"FAILED*{CHANGED}*"])


def test_the_plugin_option_overrides_the_ini(pytester: pytest.Pytester) -> None:
    spec = given_spec(pytester.path)
    pytester.makeini("[pytest]\nmemspec_spec = missing.md\n")
    result = pytester.runpytest_subprocess(
        "--pyargs", "memspec.conformance.suite", "-p", "no:cacheprovider",
        "--memspec-backend", REFERENCE, f"--memspec-spec={spec}", "-k", ADDED, timeout=600,
    )  # fmt: skip
    result.assert_outcomes(passed=1)


def test_memspec_examples_runs_the_given_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memspec.conformance.commands.cli import main

    assert main(["examples", "--backend", REFERENCE, "--spec", str(given_spec(tmp_path))]) == 1
    out = capsys.readouterr().out
    assert f"FAIL example {CHANGED}" in out, out[-2000:]
    passed, failed, skipped = (int(word) for word in out.splitlines()[-1].split()[::2])
    assert failed == 1 and passed + failed + skipped == len(installed_spec().examples) + 1
