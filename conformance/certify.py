"""``memspec certify``: the whole harness against one backend, through pytest (CONTRACT certify).

Certification is a pytest run of :mod:`memspec.conformance.suite` with the memspec plugin, so
that pytest-xdist parallelism (``-n``), junit.xml and the plugin's reports come for free and a
check behaves the same whether certify or a user's own pytest runs it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.backend import Backend, InProcessBackend, UsageError
from memspec.conformance.jsonlines import DEFAULT_TIMEOUT, INVOCATION_DIR, CommandBackend
from memspec.conformance.plugin import read_expected_failures, recorder_key
from memspec.conformance.records import CheckRecord, summary_counts

PYTEST_INTERNAL_ERROR = 3
PYTEST_USAGE_ERROR = 4
PYTEST_INTERRUPTED = 2


@dataclass(frozen=True)
class CertifyRequest:
    """A CertifyRequest is everything ``memspec certify`` was asked to do."""

    backend: str | None = None
    backend_cmd: str | None = None
    profile: str = "ci"
    report: str | None = None
    expected_failures: str | None = None
    workers: str | None = None
    timeout: float | None = None
    seed: int | None = None
    coverage: bool = False
    verbose: bool = True
    select: str | None = None
    hypothesis_db: str | None = None


@dataclass
class CertifyResult:
    """The outcome of a certification: exit status, counts, records and notes for the user."""

    status: int
    counts: dict[str, int]
    records: list[CheckRecord]
    notes: list[str] = field(default_factory=list)


def make_backend(request: CertifyRequest) -> Backend:
    """Returns the backend the request names (raises UsageError)."""
    timeout = request.timeout or DEFAULT_TIMEOUT
    if request.backend and not request.backend_cmd:
        return InProcessBackend(request.backend, timeout)
    if request.backend_cmd and not request.backend:
        return CommandBackend(request.backend_cmd, timeout)
    raise UsageError("give exactly one of --backend MODULE:FACTORY and --backend-cmd CMD")


def probe_backend(request: CertifyRequest) -> None:
    """Opens and closes one session on a scratch root (raises BackendDefect or UsageError)."""
    backend = make_backend(request)
    if request.expected_failures:
        read_expected_failures(request.expected_failures)
    if request.report:
        try:
            Path(request.report).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the report directory {request.report!r}: {error.strerror or error}"
            ) from None
    with tempfile.TemporaryDirectory(prefix="memspec-probe-") as scratch:
        backend.open(Path(scratch)).close()


class _Tally:
    """Keeps hold of the pytest config so the records can be read after the run."""

    config: pytest.Config | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config


def pytest_arguments(request: CertifyRequest, ini: Path) -> list[str]:
    """Returns the pytest command line that certifies the request's backend."""
    autoload_off = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    suite = Path(__file__).resolve().parent / "suite"
    args = ["-c", str(ini), "--rootdir", str(suite), "-p", "no:cacheprovider"]
    args += ["-p", "memspec"] if autoload_off else []
    args += [
        "--pyargs",
        "memspec.conformance.suite",
        "--memspec-profile",
        request.profile,
        "--tb=short",
        "-rfE",
    ]
    args += (
        ["--memspec-backend", request.backend]
        if request.backend
        else ["--memspec-backend-cmd", str(request.backend_cmd)]
    )
    args.append("-v" if request.verbose else "-q")
    if request.timeout is not None:
        args += ["--memspec-timeout", str(request.timeout)]
    if request.seed is not None:
        args += ["--memspec-seed", str(request.seed)]
    if request.expected_failures:
        args += ["--memspec-expected-failures", request.expected_failures]
    if request.report:
        report = Path(request.report)
        args += ["--memspec-report", str(report), "--junitxml", str(report / "junit.xml")]
    if request.select:
        args += ["-k", request.select]
    if request.hypothesis_db:
        args += ["--memspec-hypothesis-db", request.hypothesis_db]
    if request.workers and not request.coverage:
        args += ["-n", request.workers]
    return args


def _absolute_paths(request: CertifyRequest) -> CertifyRequest:
    """Returns the request with its file arguments made absolute (certify changes directory)."""
    return replace(
        request,
        report=str(Path(request.report).absolute()) if request.report else None,
        expected_failures=(
            str(Path(request.expected_failures).absolute()) if request.expected_failures else None
        ),
        hypothesis_db=(
            request.hypothesis_db
            if not request.hypothesis_db or "://" in request.hypothesis_db
            else str(Path(request.hypothesis_db).absolute())
        ),
    )


def start_coverage(request: CertifyRequest) -> Any:
    """Starts measuring the backend for ``--coverage`` (before anything imports it)."""
    from memspec.conformance.coverage import BackendCoverage

    if not request.backend:
        raise UsageError("--coverage measures Python backends only (--backend)")
    request = _absolute_paths(request)
    return BackendCoverage(str(request.backend), request.report)


def certify(request: CertifyRequest, measured: Any = None) -> CertifyResult:
    """Runs the certification and returns its result (pytest prints the progress).

    ``measured`` is the :func:`start_coverage` of a ``--coverage`` run.
    """
    tally = _Tally()
    plugins: list[Any] = [tally]
    notes: list[str] = []
    if measured is not None:
        plugins.append(measured)
        if request.workers:
            notes.append("--coverage runs the checks in one process: -n was ignored")
    request = _absolute_paths(request)
    here = os.getcwd()
    os.environ.setdefault(INVOCATION_DIR, here)
    with tempfile.TemporaryDirectory(prefix="memspec-certify-") as scratch:
        ini = Path(scratch) / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        # Run from the suite's folder so that pytest names checks by their ids, not by paths.
        os.chdir(Path(__file__).resolve().parent / "suite")
        try:
            code = int(pytest.main(pytest_arguments(request, ini), plugins=plugins))
        finally:
            os.chdir(here)
    records = tally.config.stash[recorder_key].records if tally.config else []
    counts = summary_counts(records)
    if counts["xfailed"]:
        notes.append(
            f"{counts['xfailed']} expected failure(s) as listed in {request.expected_failures}"
        )
    if measured is not None:
        notes.extend(measured.notes)
    if request.report:
        notes.append(f"reports: {Path(request.report) / 'report.md'}, report.json, junit.xml")
    if code == PYTEST_USAGE_ERROR:
        return CertifyResult(2, counts, records, notes)
    if code == PYTEST_INTERRUPTED and not records:
        return CertifyResult(2, counts, records, notes)
    if code == PYTEST_INTERNAL_ERROR:
        notes.append("INTERNAL ERROR in memspec: this is a harness bug, not a backend failure")
        return CertifyResult(1, counts, records, notes)
    failed = counts["failed"] > 0 or code not in (0, 5)
    return CertifyResult(1 if failed else 0, counts, records, notes)
