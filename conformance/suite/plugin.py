"""The pytest plugin: certify a backend with pytest (registered as the ``memspec`` pytest11 plugin).

Options (group ``memspec``): ``--memspec-backend MODULE:FACTORY`` or ``--memspec-backend-cmd
CMD`` choose the backend; ``--memspec-profile`` sizes the checks; ``--memspec-timeout`` bounds
every backend call; ``--memspec-report DIR`` writes report.json and report.md;
``--memspec-expected-failures FILE`` lists check or clause ids known to fail (strictly: one
that passes fails the run); ``--memspec-hypothesis-db URL`` keeps the property checks' failing
examples in a directory or a Redis database that every machine of a campaign shares. The suite
itself is ``memspec.conformance.suite``::

    pytest --pyargs memspec.conformance.suite --memspec-backend memspec.reference_impl:open_store

Each check carries ``@pytest.mark.memspec(clauses=[...], features=[...])``; a check whose
features the backend does not claim is skipped with the feature named (CONTRACT features).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.core.findings import VERDICT_PROPERTY, Verdict, verdict_of
from memspec.conformance.core.options import SETTINGS, WHICH_BACKEND, add_options
from memspec.conformance.core.profiles import Profile, resolve_profile
from memspec.conformance.core.records import CheckRecord, RunInfo, summary_counts, write_reports
from memspec.conformance.transport.backend import (
    Backend,
    BackendDefect,
    InProcessBackend,
    UsageError,
)
from memspec.conformance.transport.jsonlines import DEFAULT_TIMEOUT, CommandBackend

MARKER = "memspec"


@dataclass(frozen=True)
class Settings:
    """Settings are the plugin's options, resolved once (command line over ini)."""

    backend: Backend | None
    profile: Profile
    timeout: float
    seed: int | None
    report: Path | None
    expected_failures: frozenset[str]
    spec_path: Path | None
    features: frozenset[str] = field(default_factory=frozenset)
    hypothesis_db: str | None = None


GIVEN_BACKEND = "memspec-given-backend"
"""The plugin name of a :class:`GivenBackend`."""


@dataclass(eq=False)
class GivenBackend:
    """A GivenBackend, passed to ``pytest.main`` as a plugin, names the backend to certify by
    object instead of by option (``memspec.certify`` given a factory with no importable name).
    pytest registers a plugin object under its ``__name__``: the plugin finds it by that name."""

    backend: Backend
    __name__ = GIVEN_BACKEND


settings_key = pytest.StashKey[Settings]()
recorder_key = pytest.StashKey["Recorder"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Registers the memspec options."""
    group = parser.getgroup(MARKER, "memspec: certify a memory backend")
    add_options(group.addoption, (*WHICH_BACKEND, *SETTINGS), prefix="--memspec-")
    parser.addini("memspec_spec", "a SPEC.md to certify against instead of the installed one")


def read_expected_failures(path: str | None) -> frozenset[str]:
    """Returns the ids listed in an expected-failures file (``#`` starts a comment)."""
    if not path:
        return frozenset()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the expected-failures file {path!r}: {error}") from None
    return frozenset(
        line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()
    )


def hypothesis_database(location: str | None, base: Path) -> str | None:
    """Returns the example database location to use: a ``redis://`` URL as given (the ``redis``
    package must be installed), or a directory made absolute against ``base``."""
    if not location:
        return None
    if location.startswith(("redis://", "rediss://", "unix://")):
        if importlib.util.find_spec("redis") is None:
            raise UsageError(
                f"--memspec-hypothesis-db {location} needs the redis package: "
                "pip install 'memspec[campaign]'"
            )
        return location
    return str((base / location).absolute())


def _resolve(config: pytest.Config) -> Settings:
    option = config.getoption
    module, command = option("--memspec-backend"), option("--memspec-backend-cmd")
    if module and command:
        raise UsageError("give --memspec-backend or --memspec-backend-cmd, not both")
    timeout = option("--memspec-timeout") or DEFAULT_TIMEOUT
    if timeout <= 0:
        raise UsageError(f"--memspec-timeout must be positive seconds, got {timeout!r}")
    given: GivenBackend | None = config.pluginmanager.get_plugin(GIVEN_BACKEND)
    if given and (module or command):
        raise UsageError("a backend was given by object: pass no --memspec-backend option")
    backend: Backend | None = given.backend if given else None
    if module:
        backend = InProcessBackend(module, timeout)
    elif command:
        backend = CommandBackend(command, timeout)
    spec = config.getini("memspec_spec")
    report = option("--memspec-report")
    profile = resolve_profile(option("--memspec-profile"))
    database = option("--memspec-hypothesis-db")
    if not database and report and not profile.derandomize:
        database = str(Path(report) / "hypothesis")
    return Settings(
        backend=backend,
        profile=profile,
        timeout=timeout,
        seed=option("--memspec-seed"),
        report=Path(report) if report else None,
        expected_failures=read_expected_failures(option("--memspec-expected-failures")),
        spec_path=Path(spec) if spec else None,
        hypothesis_db=hypothesis_database(database, config.invocation_params.dir),
    )


def pytest_configure(config: pytest.Config) -> None:
    """Registers the marker and resolves the settings."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(clauses, features): the clause ids a check verifies and the "
        "backend features it needs",
    )
    try:
        config.stash[settings_key] = _resolve(config)
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[recorder_key] = Recorder(config)
    config.pluginmanager.register(config.stash[recorder_key], "memspec-recorder")


def memspec_settings(config: pytest.Config) -> Settings:
    """Returns the resolved settings of this run."""
    return config.stash[settings_key]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Says what is being certified."""
    settings = memspec_settings(config)
    if settings.backend is None:
        return []
    from memspec.spec.examples import spec_path

    database = settings.hypothesis_db
    unseeded = "derandomised" if settings.profile.derandomize else "random"
    return [
        f"memspec backend: {settings.backend.label}",
        f"memspec profile: {settings.profile.name}, seed: "
        f"{settings.seed if settings.seed is not None else unseeded}, "
        f"timeout: {settings.timeout:g} s",
        f"memspec spec: version {_spec_version(settings.spec_path) or 'unknown'}, "
        f"{settings.spec_path or spec_path()}",
        *([f"memspec hypothesis database: {database}"] if database else []),
    ]


def _spec_version(path: Path | None) -> str | None:
    """Returns the version the run's SPEC.md states (the installed one, or the ``memspec_spec``
    file ``path``), or ``None`` when it states none."""
    from memspec.spec.versions import VersionSyntaxError, installed_version, parse_version

    try:
        if path is None:
            return installed_version().number
        return parse_version(path.read_text(encoding="utf-8")).number
    except (OSError, VersionSyntaxError):
        return None


def _marker(item: pytest.Item) -> tuple[tuple[str, ...], tuple[str, ...]]:
    mark = item.get_closest_marker(MARKER)
    if mark is None:
        return (), ()
    return tuple(mark.kwargs.get("clauses", ())), tuple(mark.kwargs.get("features", ("core",)))


def budget_of(item: pytest.Item, profile: Profile) -> float:
    """Returns the seconds ``item`` may run under ``profile``: its check's budget, or that of a
    SPEC.md example (``conformance/core/budgets.py``)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    check = params.get("check")
    return profile.budget(check.id) if check is not None else profile.example_budget


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Starts the checks with the largest budgets first when they run in several processes
    (``-n``), so that a long one does not end the run alone on one worker while the others
    idle; and turns listed expected failures into strict xfails (a stale entry fails the run)."""
    if config.getoption("dist", "no") != "no" and memspec_settings(config).backend is not None:
        profile = memspec_settings(config).profile
        items.sort(key=lambda item: -budget_of(item, profile))
    expected = memspec_settings(config).expected_failures
    if not expected:
        return
    for item in items:
        clauses, _ = _marker(item)
        check_id = item.callspec.id if hasattr(item, "callspec") else item.name
        hits = expected & {check_id, check_id.split("/", 1)[-1], *clauses}
        if hits:
            item.add_marker(
                pytest.mark.xfail(
                    strict=True, reason=f"listed in the expected-failures file as {sorted(hits)}"
                )
            )


@pytest.fixture(scope="session")
def memspec_backend(pytestconfig: pytest.Config) -> Backend:
    """The backend under certification (the check is skipped when none is configured)."""
    backend = memspec_settings(pytestconfig).backend
    if backend is None:
        pytest.skip("no backend: pass --memspec-backend or --memspec-backend-cmd")
    return backend


@pytest.fixture(scope="session")
def memspec_features(
    memspec_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> frozenset[str]:
    """The features the backend claims (read from one session opened on a scratch root)."""
    session = memspec_backend.open(tmp_path_factory.mktemp("features"))
    try:
        return frozenset(session.features)
    finally:
        session.close()


@pytest.fixture
def memspec_profile(pytestconfig: pytest.Config) -> Profile:
    """The resolved profile."""
    return memspec_settings(pytestconfig).profile


@pytest.fixture
def memspec_root(tmp_path: Path) -> Path:
    """A fresh, empty root directory owned by the backend for one check."""
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def memspec_sessions(memspec_backend: Backend, memspec_root: Path) -> Iterator[Any]:
    """Opens as many sessions on the check's root as it asks for: ``memspec_sessions(2)``."""
    opened: list[Any] = []

    def open_sessions(count: int = 1, **limits: int) -> list[Any]:
        new = [memspec_backend.open(memspec_root, limits or None) for _ in range(count)]
        opened.extend(new)
        return new

    yield open_sessions
    for session in opened:
        with contextlib.suppress(OSError, BackendDefect):
            session.close()


@pytest.fixture(autouse=True)
def _memspec_feature_gate(request: pytest.FixtureRequest) -> None:
    """Skips a check whose features the backend does not claim, naming them."""
    _, needed = _marker(request.node)
    if not needed or memspec_settings(request.config).backend is None:
        return
    claimed: frozenset[str] = request.getfixturevalue("memspec_features")
    missing = [feature for feature in needed if feature not in claimed]
    if missing:
        reason = f"needs feature {', '.join(missing)}, which the backend does not claim"
        verdict = Verdict("unsupported", reason=reason, missing_features=tuple(missing))
        request.node.user_properties.append(verdict.to_property())
        pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attaches the clause ids to the report, and the verdict of a check that failed, taken
    from the exception itself, so that xdist workers hand them back as data."""
    report = yield
    clauses, features = _marker(item)
    if clauses:
        report.user_properties.append(("memspec_clauses", ",".join(clauses)))
        report.user_properties.append(("memspec_features", ",".join(features)))
        given = any(name == VERDICT_PROPERTY for name, _ in report.user_properties)
        raised = call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception)
        if raised and (report.failed or hasattr(report, "wasxfail")) and not given:
            report.user_properties.append(verdict_of(call.excinfo.value).to_property())
    return report


class Recorder:
    """The Recorder keeps one record per memspec check and writes the reports at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: list[CheckRecord] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Records a check's verdict from its call phase, or a setup/teardown that decided it."""
        properties = dict(report.user_properties)
        if "memspec_clauses" not in properties:
            return
        decisive = (
            report.when == "call"
            or (report.when == "setup" and not report.passed)
            or (report.when == "teardown" and report.failed)
        )
        if decisive:
            self.records.append(CheckRecord.from_report(report, properties))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Makes the exit status 3 (pytest's internal error) when the only failures are
        memspec's own (harness errors); writes report.json and report.md when
        ``--memspec-report`` is given."""
        counts = summary_counts(self.records)
        failed = session.exitstatus == pytest.ExitCode.TESTS_FAILED
        if failed and counts["errors"] and not counts["failed"]:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        settings = memspec_settings(self.config)
        if settings.report is None or settings.backend is None:
            return
        if hasattr(self.config, "workerinput"):
            return
        info = RunInfo.collect(
            settings.backend,
            settings.profile.name,
            settings.seed,
            settings.report,
            spec_version=_spec_version(settings.spec_path),
        )
        write_reports(settings.report, info, sorted(self.records, key=lambda r: r.id))
