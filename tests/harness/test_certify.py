"""``memspec certify`` end to end, run as a user would: exit status, summary, reports, and what
it leaves behind (temporary files, Hypothesis's caches, the environment it changed).

How an installed, read-only memspec certifies is in ``tests/integration/test_install.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memspec.conformance.commands import certify as certify_module
from memspec.conformance.core.locations import cache_dir
from memspec.conformance.transport.jsonlines import INVOCATION_DIR

PROJECT = Path(__file__).resolve().parents[2]
REFERENCE = "memspec.reference_impl:open_store"


def certify(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs ``memspec certify ARGS`` in a subprocess from the project directory."""
    return subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "certify", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.strip().splitlines()[-1]


def report(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text(encoding="utf-8"))


def failed_clauses(directory: Path) -> set[str]:
    return {c for r in report(directory)["checks"] if r["status"] == "failed" for c in r["clauses"]}


def test_certify_reference_passes(tmp_path: Path) -> None:
    # CONTRACT-15: certify runs examples and checks; the reference passes all of them.
    result = certify("--backend", REFERENCE, "--report", str(tmp_path), "-q")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    counts = report(tmp_path)["summary"]
    assert counts["failed"] == 0 and counts["passed"] > 80


def test_a_failure_whose_evidence_holds_a_lone_surrogate_crosses_the_worker_channel(
    tmp_path: Path,
) -> None:
    """The evidence of a failed ENTRY-4 example holds the lone surrogate it sent; with checks in
    worker processes (-n 2) it reaches the report, and the run does not end in a harness error
    (hermes-agent, which stores such content, stopped after 40 checks)."""
    backend = "tests.backends.wrappers:raises_on_surrogate"
    result = certify("--backend", backend, "-k", "entry-lone-surrogate", "-n", "2", "--report",
                     str(tmp_path), "-q")  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "INTERNAL ERROR" not in result.stdout + result.stderr
    records = report(tmp_path)["checks"]
    sent = [r["evidence"]["sent"] for r in records if r.get("evidence")]
    assert any("\ud800" in value.get("content", "") for value in sent), sent


def test_exit_status_and_summary_line(tmp_path: Path) -> None:
    # CONTRACT-16: 1 when something failed, and the last line is the summary.
    result = certify("--backend", "tests.backends.wrappers:float_percent", "-k", "SNAP", "-q")
    assert result.returncode == 1
    assert last_line(result).endswith(" skipped")
    passed, failed, _skipped = (int(part.split()[0]) for part in last_line(result).split(", "))
    assert failed >= 1 and passed >= 1


@pytest.mark.parametrize(
    "args",
    [
        ["--backend", "no_such_module:open_store"],
        ["--backend", "memspec.reference_impl"],
        ["--backend", "tests.backends.wrappers:factory_raises"],
        ["--backend-cmd", "/nonexistent/backend"],
        ["--backend-cmd", "python -m tests.backends.protocol_faults no-open"],
        ["--backend", REFERENCE, "--profile", "nope"],
        ["--backend", REFERENCE, "--expected-failures", "/nonexistent/file"],
        ["--backend", REFERENCE, "--report", "/proc/no-such-dir"],
        ["--backend", REFERENCE, "-k", "bad ((expression"],
        ["--backend", REFERENCE, "-n", "0"],
        ["--backend", REFERENCE, "--backend-cmd", "x"],
        [],
    ],
)
def test_usage_errors_exit_2_without_a_traceback(args: list[str]) -> None:
    # CONTRACT-16: a usage error or a backend that cannot start exits 2, with a clear message.
    result = certify(*args, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "error" in result.stderr.lower()


def test_bad_files_are_usage_errors_before_any_check(tmp_path: Path) -> None:
    """An expected-failures id that names nothing, and a report directory that cannot be
    written, stop the run at once with one line naming them, not after the whole run."""
    listed = tmp_path / "expected.txt"
    listed.write_text("FORMAT-1\nFORMAT-99\n# a comment\nformat.no_such_check\n", "utf-8")
    unknown = certify("--backend", REFERENCE, "--expected-failures", str(listed), timeout=60)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr
    assert "FORMAT-99 (line 2), format.no_such_check (line 4)" in unknown.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("", "utf-8")
    unwritable = certify("--backend", REFERENCE, "--report", str(blocker / "report"), timeout=60)
    assert unwritable.returncode == 2 and "cannot write the report directory" in unwritable.stderr


def test_reports_are_written(tmp_path: Path) -> None:
    # CONTRACT-17: report.json has run info and one record per check; report.md the matrix.
    result = certify(
        "--backend",
        "tests.backends.wrappers:dedup_on_read",
        "--report",
        str(tmp_path),
        "-k",
        "READ or DUP",
        "-q",
    )
    assert result.returncode == 1
    data = report(tmp_path)
    assert {"backend", "features", "profile", "platform", "filesystem"} <= set(data["run"])
    assert all({"id", "clauses", "status", "message", "duration"} <= set(r) for r in data["checks"])
    assert {"READ-5", "DUP-4"} <= failed_clauses(tmp_path)
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "| READ-5 | MUST | core | fail |" in markdown
    assert (tmp_path / "junit.xml").read_text(encoding="utf-8").startswith("<?xml")


def test_stale_expected_failure_fails(tmp_path: Path) -> None:
    # CONTRACT-18: listed failures are expected; a listed id that passes fails the run. At ci
    # the snapshot property draws a percent that float arithmetic rounds up, too (SNAP-6).
    expected = tmp_path / "expected.txt"
    expected.write_text(
        "snap-percent-integer-arithmetic  # float percent, known\nsnap-percent-capped\n"
        "properties.snapshot_frozen_until_load  # its headers show the percent too\n",
        encoding="utf-8",
    )
    broken = certify(
        "--backend",
        "tests.backends.wrappers:float_percent",
        "-k",
        "SNAP",
        "--expected-failures",
        str(expected),
        "-q",
    )
    assert broken.returncode == 0, broken.stdout[-3000:]
    assert "expected failure" in broken.stdout
    stale = certify(
        "--backend",
        REFERENCE,
        "-k",
        "SNAP",
        "--expected-failures",
        str(expected),
        "--report",
        str(tmp_path / "r"),
        "-q",
    )
    assert stale.returncode == 1
    messages = [r["message"] for r in report(tmp_path / "r")["checks"] if r["status"] == "failed"]
    assert messages and all("remove it from the expected-failures file" in m for m in messages)


@pytest.mark.parametrize(
    ("backend", "clauses"),
    [
        ("float_percent", {"SNAP-6"}),
        ("dedup_on_read", {"READ-5", "DUP-4"}),
        ("accepts_delimiter_line", {"ENTRY-3"}),
        ("truncates_to_fit", {"LIMIT-2"}),
        ("raises_on_add", {"CONTRACT-6"}),
    ],
)
def test_broken_backends_fail_on_their_clauses(
    tmp_path: Path, backend: str, clauses: set[str]
) -> None:
    # A backend broken on purpose fails, and its report names the violated clause ids.
    result = certify(
        "--backend",
        f"tests.backends.wrappers:{backend}",
        "--report",
        str(tmp_path),
        "-k",
        "example",
        "-q",
    )
    assert result.returncode == 1
    assert clauses <= failed_clauses(tmp_path)


@pytest.mark.parametrize("mode", ["hang", "crash", "garbage", "wrong-id"])
def test_misbehaving_command_backends_fail_without_hanging(tmp_path: Path, mode: str) -> None:
    # CONTRACT-14: protocol failures are reported as failures, with what was sent and received.
    result = certify(
        "--backend-cmd",
        f"{sys.executable} -m tests.backends.protocol_faults {mode}",
        # Long enough for a Python backend to start on a loaded machine, short for a hang.
        "--timeout",
        "3",
        "-k",
        "DUP",
        "--report",
        str(tmp_path),
        "-q",
        timeout=300,
    )
    assert result.returncode == 1, result.stdout[-3000:]
    failures = [r for r in report(tmp_path)["checks"] if r["status"] == "failed"]
    assert failures
    text = failures[0]["message"]
    want = {
        "hang": "did not answer within 3 s",
        "crash": "exited with status 3",
        "garbage": "not JSON",
        "wrong-id": "carries id",
    }[mode]
    assert want in text


def test_hanging_python_backend_fails_without_hanging(tmp_path: Path) -> None:
    result = certify(
        "--backend",
        "tests.backends.wrappers:hangs_on_add",
        "--timeout",
        "0.5",
        "-k",
        "DUP",
        "--report",
        str(tmp_path),
        "-q",
        timeout=300,
    )
    assert result.returncode == 1
    assert any(
        "did not return within 0.5 s" in r["message"]
        for r in report(tmp_path)["checks"]
        if r["status"] == "failed"
    )


def test_certify_through_serve_passes(tmp_path: Path) -> None:
    # The same backend certified over JSON Lines gives the same verdicts.
    command = f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"
    # A slice of every kind of check; the whole certification through serve is in the README.
    result = certify(
        "--backend-cmd",
        command,
        "-k",
        "LOCK or DRIFT or files or protocol",
        "--report",
        str(tmp_path),
        "-q",
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert report(tmp_path)["run"]["features"]


def test_parallel_run_gives_the_same_verdicts(tmp_path: Path) -> None:
    # Checks run under pytest-xdist with results identical to a serial run.
    serial = certify(
        "--backend",
        "tests.backends.wrappers:dedup_on_read",
        "-k",
        "example",
        "--report",
        str(tmp_path / "s"),
        "-q",
    )
    parallel = certify(
        "--backend",
        "tests.backends.wrappers:dedup_on_read",
        "-k",
        "example",
        "-n",
        "2",
        "--report",
        str(tmp_path / "p"),
        "-q",
    )
    assert last_line(serial) == last_line(parallel)

    def verdicts(d: Path) -> dict[str, str]:
        return {r["id"]: r["status"] for r in report(d)["checks"]}

    assert verdicts(tmp_path / "s") == verdicts(tmp_path / "p")


def test_coverage_reports_what_certification_never_ran(tmp_path: Path) -> None:
    result = certify(
        "--backend", REFERENCE, "--coverage", "-k", "FORMAT", "--report", str(tmp_path), "-q"
    )
    assert "backend coverage:" in result.stdout
    data = report(tmp_path)["coverage"]
    store = next(v for k, v in data["files"].items() if k.endswith("store.py"))
    assert 0 < store["percent"] < 100 and store["missing_lines"]
    assert "## Backend coverage" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_coverage_of_a_command_backend_is_a_usage_error() -> None:
    result = certify("--backend-cmd", "true", "--coverage", timeout=60)
    assert result.returncode == 2 and "Python backends only" in result.stderr


def test_keep_temp_keeps_the_scratch_directory_and_says_where(
    tmp_path: Path, short_temp: Path
) -> None:
    temp = short_temp
    env = {**os.environ, "TMPDIR": str(temp), "MEMSPEC_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "memspec.conformance", "certify", "--profile", "smoke",
               "--backend", "memspec.reference_impl:open_store", "-q", "-k", "FORMAT"]  # fmt: skip
    kept = subprocess.run(
        [*command, "--keep-temp"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stdout + kept.stderr
    scratch = [line.split(" in ", 1)[1] for line in kept.stdout.splitlines()
               if line.startswith("temporary files kept in ")]  # fmt: skip
    assert scratch and Path(scratch[0]).parent == temp and Path(scratch[0]).is_dir()
    shutil.rmtree(scratch[0])
    plain = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "tmp"]  # tmp: a link


def test_hypothesis_caches_fall_back_to_scratch_when_the_cache_is_unwritable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSPEC_CACHE_DIR", str(tmp_path / "cache"))
    assert certify_module.hypothesis_home(tmp_path / "s") == cache_dir() / "hypothesis"
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("MEMSPEC_CACHE_DIR", str(blocker))
    assert certify_module.hypothesis_home(tmp_path / "s") == tmp_path / "s" / "hypothesis"


def test_run_environment_restores_what_it_changed(tmp_path: Path) -> None:
    names = ("TMPDIR", certify_module.HYPOTHESIS_HOME, INVOCATION_DIR, "PYTHONDONTWRITEBYTECODE")
    before = {name: os.environ.get(name) for name in names}
    with certify_module.run_environment(tmp_path):
        assert tempfile.gettempdir() == str(tmp_path / "tmp")
        assert os.environ["TMPDIR"] == str(tmp_path / "tmp")
        assert os.environ[INVOCATION_DIR] == os.getcwd() and sys.dont_write_bytecode
    assert {name: os.environ.get(name) for name in before} == before
    assert tempfile.gettempdir() != str(tmp_path / "tmp")


def test_certify_leaves_the_working_directory_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A command backend made after a certification runs where the user is (CONTRACT-12's
    # command line resolves against it): the certification must not leave the process in the
    # suite's folder, or anywhere else.
    import memspec

    monkeypatch.chdir(tmp_path)
    result = memspec.certify(
        "memspec.reference_impl:open_store", profile="smoke", select="read.unreadable_file"
    )
    assert result.counts["passed"] == 1, result.output
    assert Path.cwd() == tmp_path


def test_a_listed_clause_covers_a_failure_that_blames_it(tmp_path: Path) -> None:
    """An example citing SNAP-4 whose only difference is the header's wording blames SNAP-5:
    listing SNAP-5 makes that failure expected, though the example does not cite it."""
    expected = tmp_path / "expected.txt"
    expected.write_text("SNAP-5  # our own title\n", encoding="utf-8")
    args = ["--backend", "tests.backends.wrappers:other_header_wording", "-k", "snap-exact"]
    listed = certify(*args, "--expected-failures", str(expected), "-q")
    assert listed.returncode == 0 and "1 expected failure" in listed.stdout, listed.stdout
    assert certify(*args, "-q").returncode == 1


def test_coverage_measures_a_single_file_module(tmp_path: Path) -> None:
    # A backend that is one module file beside the user, not a package: its own lines count.
    shutil.copy(PROJECT / "tests" / "backends" / "first_attempt.py", tmp_path / "mystore.py")
    result = subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "certify", "--backend", "mystore:open_store",
         "--coverage", "-k", "ENTRY", "-q", "--profile", "smoke"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    found = re.search(r"backend coverage: ([\d.]+)% of lines and branches of (\S+)", result.stdout)
    assert found, result.stdout[-2000:] + result.stderr[-2000:]
    assert float(found.group(1)) > 20 and found.group(2).endswith("mystore.py")
