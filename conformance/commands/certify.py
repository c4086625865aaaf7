"""A certification: the whole harness against one backend, through pytest (CONTRACT certify).

The one front door of ``memspec certify``, ``memspec hermes`` and ``memspec.certify()``: each
builds one :class:`~memspec.conformance.core.settings.Settings` with :func:`settings_for` and
calls :func:`run_certification`, which returns a :class:`CertifyResult` and prints nothing of its
own (the commands print it: ``conformance/commands/terminal.py``). Certification is a pytest run
of :mod:`memspec.conformance.suite` with the memspec plugin, so a
check behaves the same under certify or a user's own pytest. It writes only where the user said:
reports where ``--report`` points, temporary files under one scratch directory removed at exit
(unless ``keep_temp``), Hypothesis's caches under the user cache directory; nothing under the
installed package. Relative paths are resolved against the directory certify was called from.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memspec.conformance.core.locations import cache_dir, scratch_root, writable_dir
from memspec.conformance.core.settings import ONE_BACKEND, Settings, make_settings
from memspec.conformance.suite.plugin import GivenSettings, recorder_key
from memspec.conformance.transport.backend import (
    Backend,
    BackendDefect,
    InProcessBackend,
    factory_name,
)
from memspec.conformance.transport.jsonlines import INVOCATION_DIR
from memspec.conformance.verdict.records import CheckRecord, summary_counts
from memspec.conformance.verdict.report import level_of
from memspec.conformance.verdict.standing import Level
from memspec.spec.document import Spec, installed_spec
from memspec.spec.errors import UsageError

PYTEST_INTERNAL_ERROR = 3
PYTEST_USAGE_ERROR = 4
PYTEST_INTERRUPTED = 2
PYTEST_NO_TESTS = 5
HARNESS_BUG_STATUS = PYTEST_INTERNAL_ERROR
"""certify's exit status when memspec failed and the backend did not: pytest's own status for
an internal error, which a harness error is."""


@dataclass
class CertifyResult:
    """The outcome of a certification: ``status`` is the CLI's exit status (0 nothing failed
    unexpectedly, 1 something did, 2 a usage error or a backend that could not be started, 3 only
    memspec failed); ``output`` what pytest printed when quiet; ``spec`` the SPEC.md the records
    are judged against."""

    status: int
    counts: dict[str, int]
    records: list[CheckRecord]
    notes: list[str] = field(default_factory=list)
    output: str = ""
    claimed: frozenset[str] | None = None
    """The features the backend claimed (``None``: not read)."""
    spec: Spec = field(default_factory=installed_spec, repr=False)
    started: bool = True
    """False when the backend could not be started: nothing ran, and the note says why."""

    @property
    def ok(self) -> bool:
        """Whether the certification passed (nothing failed unexpectedly)."""
        return self.status == 0

    @property
    def level(self) -> Level:
        """The conformance level the records reach, computed from the clause verdicts of the
        run's spec (SPEC.md, "Conformance levels")."""
        return level_of(self.records, self.spec)

    @property
    def summary(self) -> str:
        """The CLI's last line, ``N passed, N failed, N skipped``, and the failed check ids."""
        counts = self.counts
        line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
        failed = [record.id for record in self.records if record.status == "failed"]
        return line + (f" (failed: {', '.join(failed)})" if failed else "")


Factory = Callable[..., Any]
"""A backend factory: ``FACTORY(root, *, memory_char_limit, user_char_limit) -> Store``."""


def settings_for(
    *,
    base: Path,
    backend: str | Factory | None = None,
    hermes_class: str | None = None,
    hermes_rules: str | PathLike[str] | None = None,
    hermes_between: str | None = None,
    hermes_snapshot: str | None = None,
    **options: Any,
) -> Settings:
    """Returns the settings of a certification started in ``base``: ``backend`` is a
    ``MODULE:FACTORY`` name or the factory itself; ``hermes_class`` a class with Hermes'
    ``MemoryStore`` shape, served as a command backend (with ``hermes_rules``, ``hermes_between``
    and ``hermes_snapshot`` as its options); ``options`` are the other keywords of
    :func:`~memspec.conformance.core.settings.make_settings`, one per option of certify (raises
    UsageError, naming what was given and what is expected)."""
    hermes = (hermes_rules, hermes_between, hermes_snapshot)
    if hermes_class is not None:
        if backend is not None or options.get("backend_cmd") is not None:
            raise UsageError("give one backend: backend, backend_cmd or hermes_class")
        from memspec.conformance.hermes.store_class import command

        options["backend_cmd"], shape = command(
            hermes_class,
            rules=None if hermes_rules is None else str(hermes_rules),
            between=hermes_between,
            snapshot=hermes_snapshot,
            base=base,
        )
        options["backend_shape"] = shape.describe()
    elif any(value is not None for value in hermes):
        raise UsageError("hermes_rules, hermes_between and hermes_snapshot need hermes_class")
    name, given = _backend_name(backend, options.get("timeout"))
    return make_settings(base=base, backend=name, given=given, **options)


def _backend_name(
    backend: str | Factory | None, timeout: float | None
) -> tuple[str | None, InProcessBackend | None]:
    """Returns the ``MODULE:FACTORY`` name of ``backend`` (a factory defined at module level is
    named, so that every process can import it), or the backend object of a factory that has
    no importable name."""
    if backend is None or isinstance(backend, str):
        return backend, None
    if not callable(backend):
        raise UsageError(
            f"backend must be 'MODULE:FACTORY' or a factory callable, got {type(backend).__name__}"
        )
    name = factory_name(backend)
    return (name, None) if name else (None, InProcessBackend.of_factory(backend, timeout))


def probe_backend(settings: Settings) -> Settings:
    """Opens and closes one session on a scratch root, and returns the settings with the
    features the backend claims, read there: the checks open it no more before they run
    (raises BackendDefect; make_settings has already made the report directory)."""
    return _probe(settings)[0]


def _probe(settings: Settings) -> tuple[Settings, tuple[str, ...]]:
    """Returns :func:`probe_backend`'s settings and the backend's reasons for the features it
    declined (:func:`claims`)."""
    if settings.backend is None:
        raise UsageError(ONE_BACKEND)
    features, declined = claims(settings.backend)
    return settings.with_features(features), declined


def claimed_features(backend: Backend) -> frozenset[str]:
    """Returns the features ``backend`` claims, read from one session opened and closed on a
    scratch root (raises BackendDefect when it cannot be started)."""
    return claims(backend)[0]


def claims(backend: Backend) -> tuple[frozenset[str], tuple[str, ...]]:
    """Returns the features ``backend`` claims and, for a command backend, the lines in which
    it said why it does not claim others (``agent feature not claimed: ...``, read from its
    stderr), both from one session opened and closed on a scratch root (raises BackendDefect
    when it cannot be started)."""
    with scratch_root("memspec-probe-") as root:
        session = backend.open(root)
        try:
            features = frozenset(session.features)
        finally:
            session.close()
    # Only a process has a stderr to say it on; an in-process session has no such lines.
    return features, tuple(getattr(session, "declined", ()))


SUITE = Path(__file__).resolve().parents[1] / "suite"
"""The folder of the suite certify runs (``memspec.conformance.suite``), pytest's root."""


NodeIdT = TypeVar("NodeIdT")
"""A pytest node id, whatever its type in the pytest that runs."""


class _Tally:
    """Keeps hold of the pytest config so the records can be read after the run, and has pytest
    show each check by its id (``test_conformance.py::test_check[AREA/id]``) rather than by
    the suite's path from the user's directory. No directory is changed: every path of the
    run's settings is absolute already, and pytest goes back to where it started."""

    def __init__(self) -> None:
        self.config: pytest.Config | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config
        # pytest has no hook for how it shows a node id: this config's method is replaced
        config.cwd_relative_nodeid = _suite_relative  # type: ignore[method-assign]  # no hook


def _suite_relative(nodeid: NodeIdT) -> NodeIdT:
    """A node id as pytest shows it: relative to the suite's folder, its root (a ``str``, or a
    ``NodeId`` in newer pytest)."""
    return nodeid


def pytest_arguments(settings: Settings, ini: Path, basetemp: Path) -> list[str]:
    """Returns the pytest command line that certifies the backend of ``settings``."""
    args = ["-c", str(ini), "--rootdir", str(SUITE), "-p", "no:cacheprovider"]
    args += ["--basetemp", str(basetemp)]
    for plugin in PLUGINS:
        args += ["-p", plugin]
    # The memspec command imported the plugin before pytest could rewrite its asserts: it has none.
    args += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    args += ["--pyargs", "memspec.conformance.suite"]
    # By default the progress alone: the failing clauses follow, grouped by level
    # (core/summary.py); -v adds pytest's line per check and every failure's message.
    args += ["-v", "--tb=short", "-rfE"] if settings.verbose else ["-q", "--tb=no", "-rN"]
    if settings.report is not None:
        args += ["--junitxml", str(settings.report / "junit.xml")]
    if settings.select:
        args += ["-k", settings.select]
    if settings.workers and not settings.coverage:
        # worksteal: a worker that runs out of checks takes pending ones from the others,
        # instead of idling while another still has a queue (the checks differ a hundredfold).
        args += ["-n", settings.workers, "--dist", "worksteal"]
    return args


def start_coverage(settings: Settings) -> Any:
    """Starts measuring the backend for ``--coverage`` (before any check runs it)."""
    from memspec.conformance.commands.coverage import BackendCoverage

    address = settings.backend.address() if settings.backend else None
    if address is None or not address.factory:
        raise UsageError("--coverage measures Python backends only (--backend)")
    report = settings.report
    return BackendCoverage(address.factory, str(report) if report else None)


PLUGINS = ("memspec", "xdist.plugin", "_hypothesis_pytestplugin")
"""The pytest plugins a certification loads; the others installed beside memspec are not, so
that none of them changes the verdicts or writes files of its own (pytest-benchmark, say)."""
HYPOTHESIS_HOME = "HYPOTHESIS_STORAGE_DIRECTORY"
"""The variable Hypothesis reads for the directory of its caches (default ``./.hypothesis``)."""


def hypothesis_home(scratch: Path) -> Path:
    """Returns where Hypothesis keeps its caches during a certification: the user cache
    directory, or ``scratch`` when that cannot be written (a read-only home)."""
    wanted = cache_dir() / "hypothesis"
    return wanted if writable_dir(wanted) else scratch / "hypothesis"


@contextlib.contextmanager
def run_environment(scratch: Path) -> Iterator[None]:
    """Points every temporary file and Hypothesis's caches away from the working and package
    directories for the duration of a run, in this process and the processes it starts, and
    restores what was there before."""
    temp = scratch / "tmp"
    temp.mkdir()
    # Worker processes outlive a run (their server and its socket directory are made once per
    # process): start them in the real environment, so that a later run does not find their
    # temp directory removed.
    from memspec.conformance.processes.workers import start_process_server

    start_process_server()
    import hypothesis.configuration  # here: pytest warns about plugins imported before it starts

    variables = {
        "TMPDIR": str(temp),
        HYPOTHESIS_HOME: str(hypothesis_home(scratch)),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        # Command backends start in the directory certify was called from (pytest's is not).
        INVOCATION_DIR: os.environ.get(INVOCATION_DIR) or os.getcwd(),
        # pytest would cache the modules it rewrites in __pycache__ beside them.
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    saved = {name: os.environ.get(name) for name in variables}
    saved_tempdir, saved_bytecode = tempfile.tempdir, sys.dont_write_bytecode
    saved_home = vars(hypothesis.configuration).get("__hypothesis_home_directory")
    os.environ.update(variables)
    tempfile.tempdir, sys.dont_write_bytecode = None, True
    hypothesis.configuration.set_hypothesis_home_dir(variables[HYPOTHESIS_HOME])
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir, sys.dont_write_bytecode = saved_tempdir, saved_bytecode
        hypothesis.configuration.set_hypothesis_home_dir(saved_home)


def run_certification(settings: Settings) -> CertifyResult:
    """Returns the result of certifying the backend of ``settings`` with the whole harness: the
    library function behind ``memspec certify``, ``memspec hermes`` and ``memspec.certify()``.
    Measures the backend first with ``coverage``, then opens one session to read what it claims
    (a backend that cannot be started is a result with status 2, ``started`` false and the
    reason in its notes), then runs pytest on the suite; a quiet run's pytest output is in the
    result."""
    measured = start_coverage(settings) if settings.coverage else None
    try:
        settings, declined = _probe(settings)
    except BackendDefect as defect:
        if measured is not None:
            measured.cov.stop()
        counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
        reason = f"the backend could not be started: {defect}"
        return CertifyResult(2, counts, [], [reason], spec=settings.spec, started=False)
    tally = _Tally()
    plugins: list[Any] = [tally]
    notes: list[str] = list(declined)
    if measured is not None:
        plugins.append(measured)
        if settings.workers:
            notes.append("--coverage runs the checks in one process: -n was ignored")
    plugins.append(GivenSettings(settings))
    scratch = Path(tempfile.mkdtemp(prefix="memspec-certify-"))
    output = io.StringIO()
    try:
        ini = scratch / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        shown = settings.verbose or not settings.quiet
        quiet = contextlib.nullcontext() if shown else contextlib.redirect_stdout(output)
        with run_environment(scratch), quiet:
            code = int(pytest.main(pytest_arguments(settings, ini, scratch / "pytest"), plugins))
    finally:
        if settings.keep_temp:
            notes.append(f"temporary files kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    recorder = tally.config.stash.get(recorder_key, None) if tally.config else None
    records = recorder.records if recorder is not None else []
    counts = summary_counts(records)
    if counts["errors"]:
        notes.append(
            f"{counts['errors']} check(s) stopped on a harness error: a bug in memspec, not a "
            "failure of the backend (their clauses read not verified; see the report)"
        )
    if counts["xfailed"]:
        notes.append(
            f"{counts['xfailed']} expected failure(s) as listed in "
            f"{settings.expected_failures_file}"
        )
    if measured is not None:
        notes.extend(measured.notes)
    if settings.report is not None:
        notes.append(
            f"reports: {settings.report / 'report.md'}, report.html, report.json, junit.xml"
        )
    status = _status(code, counts, records)
    if code == PYTEST_NO_TESTS:
        notes.append(
            f"no check matched -k {settings.select!r}: nothing was certified (-k matches check "
            "ids such as DRIFT/drift-backup-byte-exact or LIMIT/properties.limits_hold)"
        )
    if code == PYTEST_INTERNAL_ERROR:
        notes.append("INTERNAL ERROR in memspec: this is a harness bug, not a backend failure")
    return CertifyResult(
        status, counts, records, notes, output.getvalue(), settings.features, settings.spec
    )


def _status(code: int, counts: dict[str, int], records: list[CheckRecord]) -> int:
    """Returns certify's exit status for pytest's exit ``code`` and the records: 2 for a usage
    error, 1 when the backend failed a check, 3 when only memspec failed (harness errors, an
    internal error), 0 otherwise."""
    if code in (PYTEST_USAGE_ERROR, PYTEST_NO_TESTS) or (
        code == PYTEST_INTERRUPTED and not records
    ):
        return 2
    if counts["failed"] > 0:
        return 1
    if counts["errors"] > 0 or code == PYTEST_INTERNAL_ERROR:
        return HARNESS_BUG_STATUS
    return 1 if code != 0 else 0
