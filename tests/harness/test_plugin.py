"""The pytest plugin, run in a sandbox as a user would run it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memspec.conformance.core.options import SETTINGS, WHICH_BACKEND
from memspec.spec.document import installed_spec

pytest_plugins = ["pytester"]
REFERENCE = "memspec.reference_impl:open_store"
SUITE = ["--pyargs", "memspec.conformance.suite", "-p", "no:cacheprovider"]
OPTIONS = (*WHICH_BACKEND, *SETTINGS)


PROJECT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(autouse=True)
def _project_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets the sandboxed pytest import the broken backends under tests/."""
    monkeypatch.setenv("PYTHONPATH", PROJECT)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*SUITE, *args, timeout=600)


def test_uncovered_must_clause_fails_the_run(pytester: pytest.Pytester) -> None:
    # The plugin fails the run when SPEC.md states a MUST clause that nothing checks.
    spec = pytester.path / "SPEC.md"
    spec.write_text(
        installed_spec().text + "\n**ZZZ-1** (MUST) A rule no check covers.\n", encoding="utf-8"
    )
    pytester.makeini(f"[pytest]\nmemspec_spec = {spec}\n")
    result = run(pytester, "--memspec-backend", REFERENCE, "-k", "every_must_clause")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*MUST clauses with no example and no check:*ZZZ-1 (SPEC.md line*"]
    )


def test_every_must_clause_is_covered_by_the_installed_spec(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--memspec-backend", REFERENCE, "-k", "every_must_clause")
    result.assert_outcomes(passed=1)


def test_feature_gating_skips_with_the_feature_named(pytester: pytest.Pytester) -> None:
    # CONTRACT-20: a check needing an unclaimed feature is skipped, naming it, never passed.
    result = run(
        pytester, "--memspec-backend", "tests.backends.wrappers:core_only", "-k", "batch", "-rs"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 3 and "passed" not in outcomes
    result.stdout.fnmatch_lines(["*needs feature batch, which the backend does not claim*"])


def test_report_header_says_what_is_certified(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        "--memspec-backend",
        REFERENCE,
        "--memspec-profile",
        "smoke",
        "-k",
        "format-one-file",
    )
    result.stdout.fnmatch_lines([f"memspec backend: {REFERENCE}", "memspec profile: smoke*"])
    result.assert_outcomes(passed=1)


def test_without_a_backend_the_suite_is_a_usage_error(pytester: pytest.Pytester) -> None:
    # Skipping every check would pass a CI job that certifies nothing.
    result = run(pytester, "-k", "format-one-file")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the memspec suite needs a backend: pass --memspec-backend*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memspec-backend", REFERENCE, "--memspec-backend-cmd", "x"], "exactly one"),
        (["--memspec-backend", REFERENCE, "--memspec-profile", "huge"], "unknown profile"),
        (["--memspec-backend", REFERENCE, "--memspec-timeout", "-1"], "must be positive"),
        (["--memspec-backend", "nope:nope"], "cannot import backend module"),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_the_plugin_offers_every_setting_as_declared(pytester: pytest.Pytester) -> None:
    # The plugin adds each setting of conformance/core/options.py as --memspec-NAME, as declared.
    result = pytester.runpytest_subprocess("--help")
    text = " ".join(result.stdout.str().split())
    for option in OPTIONS:
        assert f"--memspec-{option.name}={option.metavar}" in text
        assert " ".join(option.help.split()) in text


BOOM = """
from dataclasses import replace
from memspec.conformance.core import registry

registry.all_checks()
CHECK = "files.rewrite_keeps_the_mode"

def boom(ctx):
    raise TypeError("a bug in the check, not in the backend")

registry.CHECKS[CHECK] = replace(registry.CHECKS[CHECK], function=boom)
"""


def test_a_bug_in_a_check_is_a_harness_error_never_a_backend_failure(
    pytester: pytest.Pytester,
) -> None:
    # A check's own exception is a harness error in the report, never a backend failure.
    pytester.makeconftest(BOOM)
    report = pytester.path / "report"
    pytester.runpytest_subprocess(
        "--pyargs", "memspec.conformance.suite", "-p", "no:cacheprovider",
        "--memspec-backend", "tests.backends.wrappers:core_only",
        "-k", "rewrite_keeps_the_mode or batch-applies-items", f"--memspec-report={report}",
        timeout=300,
    )  # fmt: skip
    payload = json.loads((report / "report.json").read_text(encoding="utf-8"))
    by_id = {check["id"]: check for check in payload["checks"]}
    boom = by_id["FILES/files.rewrite_keeps_the_mode"]
    assert boom["status"] == "failed" and boom["kind"] == "harness-error"
    assert boom["reason"] == "TypeError: a bug in the check, not in the backend"
    assert payload["summary"]["errors"] == 1 and payload["summary"]["failed"] == 0
    assert {row["clause"]: row["status"] for row in payload["clauses"]}["FILES-2"] != "fail"
    # A check that needs a feature the backend does not claim carries the feature as data.
    skipped = [check for check in payload["checks"] if check["status"] == "skipped"]
    assert skipped and all(check["missing_features"] == ["batch"] for check in skipped)


def test_a_refused_core_action_fails_its_own_clauses_and_masks_no_other(
    pytester: pytest.Pytester,
) -> None:
    # A backend that refuses replace (E_UNSUPPORTED, as the 0.22 Hermes line does) fails
    # CONTRACT-2 and REPLACE-1; a clause whose example or check drives the store through replace
    # is not verified by it, never failed, and a worker process reports the refusal as well.
    report = pytester.path / "report"
    pytester.runpytest_subprocess(
        *SUITE, "--memspec-backend", "tests.backends.wrappers:refuses_replace",
        "-k", "replace-whole-entry or match-substring or atomic.acknowledged_is_visible "
        "or history_is_linearizable or lock-interleaved-sessions or answers_have_contract_shapes",
        f"--memspec-report={report}", timeout=300,
    )  # fmt: skip
    payload = json.loads((report / "report.json").read_text(encoding="utf-8"))
    verdicts = {row["clause"]: row for row in payload["clauses"]}
    assert verdicts["REPLACE-1"]["status"] == verdicts["CONTRACT-2"]["status"] == "fail"
    failed = {clause for clause, row in verdicts.items() if row["status"] == "fail"}
    assert failed == {"REPLACE-1", "CONTRACT-2"}
    assert verdicts["MATCH-1"]["status"] == "skip"
    assert "stopped on CONTRACT-2, REPLACE-1" in verdicts["MATCH-1"]["why"][0]
    history = {check["id"]: check for check in payload["checks"]}[
        "LOCK/concurrency.history_is_linearizable"
    ]
    assert history["blamed"] == "CONTRACT-2" and not history["completed"]
    assert verdicts["LOCK-3"]["status"] == "pass"  # by lock-interleaved-sessions, adds only


def test_a_tool_call_of_a_core_action_the_schema_hides_is_not_verified(
    pytester: pytest.Pytester,
) -> None:
    # A tool whose schema offers patch in place of replace fails TOOL-2; an example that calls
    # replace through it is not verified on its own clauses (TOOL-11, TOOL-13), never failed.
    report = pytester.path / "report"
    pytester.runpytest_subprocess(
        *SUITE, "--memspec-backend", "tests.backends.tool_broken:hides_replace",
        "-k", "tool-replace-says-what-it-overwrote or tool-never-shows-threat-text "
        "or schema_is_valid_and_agrees", f"--memspec-report={report}", timeout=300,
    )  # fmt: skip
    payload = json.loads((report / "report.json").read_text(encoding="utf-8"))
    verdicts = {row["clause"]: row for row in payload["clauses"]}
    assert {c for c, row in verdicts.items() if row["status"] == "fail"} == {"TOOL-2"}
    assert "stopped on TOOL-2" in verdicts["TOOL-11"]["why"][0]


def test_a_backend_module_of_the_current_directory_is_imported(pytester: pytest.Pytester) -> None:
    """As ``memspec certify`` does, the plugin finds ``--memspec-backend`` in the directory pytest
    was started in, also through the ``pytest`` script (which, unlike ``python -m pytest``, does
    not put that directory on ``sys.path``)."""
    pytester.makepyfile(mystore="from memspec.reference_impl import open_store\n")
    script = Path(sys.executable).with_name("pytest")
    args = [*SUITE, "--memspec-backend", "mystore:open_store", "-k", "format-one-file"]
    result = pytester.run(str(script), *args, timeout=600)
    result.assert_outcomes(passed=1)


def test_the_plugin_prints_the_failing_clauses_and_the_level_and_writes_junit(
    pytester: pytest.Pytester,
) -> None:
    """Under the user's own pytest, as under certify: the failing clauses by the level they
    block, the level line, and with ``--memspec-report`` a junit.xml beside the reports."""
    report = pytester.path / "out"
    result = run(
        pytester, "--memspec-backend", "tests.backends.first_attempt:open_store",
        "--memspec-report", str(report), "-k", "entry-delimiter-line-refused or format-one-file",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*memspec*", "core: 1 clause fails*", "  ENTRY-3 *", "conformance level: none*"]
    )
    assert {"junit.xml", "report.json", "report.md"} <= {p.name for p in report.iterdir()}
