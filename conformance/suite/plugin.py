"""The pytest plugin: certify a backend with pytest (registered as the ``memspec`` pytest11 plugin).

Its options (group ``memspec``, ``--memspec-NAME``) are those of ``memspec certify``, made into the
one settings value by the same ``make_settings``; the SPEC.md certified against is
``--memspec-spec FILE``, else the ini option ``memspec_spec``, else the installed one. The suite
itself is ``memspec.conformance.suite``::

    pytest --pyargs memspec.conformance.suite --memspec-backend memspec.reference_impl:open_store

Each check carries ``@pytest.mark.memspec(clauses=[...], features=[...])``; a check whose features
the backend does not claim is skipped with the feature named (CONTRACT features).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memspec.conformance.core.locations import import_from
from memspec.conformance.core.options import SETTINGS, WHICH_BACKEND, add_options
from memspec.conformance.core.profiles import Profile
from memspec.conformance.core.settings import Settings, make_settings
from memspec.conformance.transport.backend import Backend, BackendDefect, describe
from memspec.conformance.verdict.findings import Finding, Kind, Verdict, verdict_of
from memspec.conformance.verdict.records import CheckRecord, Figure, RunInfo, summary_counts
from memspec.conformance.verdict.report import level_of, write_reports
from memspec.conformance.verdict.summary import failing_summary
from memspec.spec.errors import UsageError

if TYPE_CHECKING:
    from memspec.conformance.tamper.capability import Tampering

MARKER = "memspec"


GIVEN_SETTINGS = "memspec-given-settings"
"""The plugin name of :class:`GivenSettings`."""
WORKER_SETTINGS = "memspec_settings"
"""The key of the settings in an xdist worker's ``workerinput``."""
OPTIONS = (*WHICH_BACKEND, *SETTINGS)
"""The options the plugin takes, as ``--memspec-NAME``: each is the ``make_settings`` keyword of
its name."""
SPEC_INI = "memspec_spec"
"""The ini option naming a SPEC.md to certify against (``--memspec-spec`` overrides it)."""


@dataclass(eq=False)
class GivenSettings:
    """GivenSettings carry the settings ``memspec certify`` and ``memspec.certify()`` built into
    ``pytest.main``, as a plugin object (no other shape of them: the plugin uses them as they
    are). pytest registers a plugin object under its ``__name__``: the plugin finds it by that
    name."""

    settings: Settings
    __name__ = GIVEN_SETTINGS


settings_key = pytest.StashKey[Settings]()
recorder_key = pytest.StashKey["Recorder"]()
verdict_key = pytest.StashKey[Verdict]()
figures_key = pytest.StashKey[dict[str, Figure]]()
OUTCOME_ATTRIBUTE = "memspec_outcome"
"""The attribute of a pytest report of a memspec check that holds its :class:`Outcome`."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Registers the memspec options."""
    group = parser.getgroup(MARKER, "memspec: certify a memory backend")
    add_options(group.addoption, OPTIONS, prefix="--memspec-")
    parser.addini(
        SPEC_INI,
        "a SPEC.md to certify against instead of the installed one (relative to the ini file; "
        "--memspec-spec overrides it)",
    )


def _resolve(config: pytest.Config) -> Settings:
    """Returns the run's settings: those certify handed over (in an xdist worker, as data), or
    the plugin's own options (``--memspec-*``, and the ``memspec_spec`` ini option) made into
    settings the same way, by ``make_settings``."""
    workerinput = getattr(config, "workerinput", {})
    if WORKER_SETTINGS in workerinput:
        return Settings.from_json(workerinput[WORKER_SETTINGS])
    values = {option.dest: config.getoption("--memspec-" + option.name) for option in OPTIONS}
    given: GivenSettings | None = config.pluginmanager.get_plugin(GIVEN_SETTINGS)
    if given is not None:
        if values["backend"] or values["backend_cmd"]:
            raise UsageError("the settings were given by object: pass no --memspec-backend option")
        return given.settings
    base = config.invocation_params.dir
    if not values["spec"] and config.getini(SPEC_INI):
        ini_dir = config.inipath.parent if config.inipath else config.rootpath
        values["spec"] = ini_dir / config.getini(SPEC_INI)
    return make_settings(base=base, require_backend=False, **values)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Hands the settings to an xdist worker, as data (xdist's hook, called on the controller)."""
    node.workerinput[WORKER_SETTINGS] = memspec_settings(node.config).to_json()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Registers the marker and resolves the settings; with ``--memspec-report DIR`` and no
    ``--junitxml``, has pytest write ``DIR/junit.xml`` as certify does (first, so that pytest's
    junitxml plugin finds the path when it configures itself)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(clauses, features): the clause ids a check verifies and the "
        "backend features it needs",
    )
    if config.getoption("--memspec-backend"):
        # As memspec certify: MODULE may be a module of the directory pytest was started in.
        imports = contextlib.ExitStack()
        imports.enter_context(import_from(config.invocation_params.dir))
        config.add_cleanup(imports.close)
    try:
        config.stash[settings_key] = _resolve(config)
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[recorder_key] = Recorder(config)
    config.pluginmanager.register(config.stash[recorder_key], "memspec-recorder")
    report = config.stash[settings_key].report
    if report is not None and getattr(config.option, "xmlpath", "unset") is None:
        config.option.xmlpath = str(report / "junit.xml")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Under the user's own pytest, ends with what ``memspec certify`` prints after its checks:
    the failing clauses by the level they block, and the conformance level (certify prints
    them itself)."""
    settings = memspec_settings(config)
    certifying = config.pluginmanager.get_plugin(GIVEN_SETTINGS) is not None
    if settings.backend is None or certifying or hasattr(config, "workerinput"):
        return
    records = config.stash[recorder_key].records
    if not records:
        return
    level = level_of(records, settings.spec)
    terminalreporter.section("memspec")
    for line in failing_summary(records, level, settings.features, settings.spec):
        terminalreporter.write_line(line)
    terminalreporter.write_line(level.headline())


def memspec_settings(config: pytest.Config) -> Settings:
    """Returns the resolved settings of this run."""
    return config.stash[settings_key]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Says what is being certified, and against which SPEC.md."""
    settings = memspec_settings(config)
    if settings.backend is None:
        return []
    database = settings.hypothesis_db
    unseeded = "derandomised" if settings.profile.derandomize else "random"
    return [
        f"memspec backend: {settings.backend.label}",
        f"memspec profile: {settings.profile.name}, seed: "
        f"{settings.seed if settings.seed is not None else unseeded}, "
        f"timeout: {settings.timeout:g} s",
        f"memspec spec: version {settings.spec.version or 'unknown'}, {settings.spec.path}",
        *([f"memspec hypothesis database: {database}"] if database else []),
    ]


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
    if memspec_settings(config).backend is None and any(_marker(item)[0] for item in items):
        # The suite with no backend would skip every check and pass: a misconfigured CI job.
        raise pytest.UsageError(
            "the memspec suite needs a backend: pass --memspec-backend MODULE:FACTORY or "
            "--memspec-backend-cmd CMD"
        )
    _keep_the_subject(config, items)
    for item in items:
        if _marker(item)[0]:
            shown = _findings_without_frames(item.repr_failure)
            item.repr_failure = shown  # type: ignore[method-assign]  # one item's, on purpose
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


def _keep_the_subject(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the suite's tests of the other subject (SPEC.md, "Subjects"): a check whose
    clauses are all another subject's, and the example test of a run whose spec has no example
    (a provider's), which pytest would otherwise show as an empty parameter set."""
    spec = memspec_settings(config).spec
    dropped = [
        item
        for item in items
        if not spec.judges(_marker(item)[0])
        or (
            getattr(item, "originalname", "") == EXAMPLE_TEST
            and Path(item.path) == SUITE_TESTS
            and not _marker(item)[0]
        )
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


EXAMPLE_TEST = "test_example"
"""The suite's test of one SPEC.md example."""
SUITE_TESTS = Path(__file__).resolve().with_name("test_conformance.py")
"""The suite's tests (``suite/test_conformance.py``)."""


def _findings_without_frames(default: Any) -> Any:
    """Returns ``default``, an item's ``repr_failure``, showing a finding about the backend as
    its message alone: the frames of memspec's own code say nothing to a backend author (what
    the backend raised, with its last frames, is in the message). A harness error keeps its
    traceback, which is what a bug report about memspec needs."""

    def repr_failure(
        excinfo: pytest.ExceptionInfo[BaseException], *args: Any, **kwargs: Any
    ) -> Any:
        error = excinfo.value
        members = error.exceptions if isinstance(error, BaseExceptionGroup) else (error,)
        if all(_about_the_backend(member) for member in members):
            return "\n".join(str(member) for member in members)
        return default(excinfo, *args, **kwargs)

    return repr_failure


def _about_the_backend(error: BaseException) -> bool:
    """Whether ``error`` is a finding about the backend, which its message says in full: any
    finding but a harness error."""
    return isinstance(error, Finding) and error.kind != Kind.HARNESS_ERROR


@pytest.fixture(scope="session")
def memspec_backend(pytestconfig: pytest.Config) -> Backend:
    """The backend under certification (the check is skipped when none is configured)."""
    backend = memspec_settings(pytestconfig).backend
    if backend is None:
        pytest.skip("no backend: pass --memspec-backend or --memspec-backend-cmd")
    return backend


@pytest.fixture(scope="session")
def memspec_tampering(memspec_backend: Backend) -> Tampering:
    """What can be done to the backend's file-system calls, built once from its transport and
    handed to every check (``CheckContext.tampering``)."""
    from memspec.conformance.tamper.capability import tampering  # worker machinery: imported late

    return tampering(memspec_backend)


@pytest.fixture(scope="session")
def memspec_features(
    memspec_backend: Backend, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> frozenset[str]:
    """The features the backend claims: those the start-up probe read, else read from one
    session opened on a scratch root."""
    probed = memspec_settings(pytestconfig).features
    if probed is not None:
        return probed
    with memspec_backend.open(tmp_path_factory.mktemp("features")) as session:
        return frozenset(session.features)


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
        verdict = Verdict(Kind.UNSUPPORTED, reason=reason, missing_features=tuple(missing))
        give_verdict(request.node, verdict)
        pytest.skip(reason)


def give_verdict(item: pytest.Item, verdict: Verdict) -> None:
    """Gives ``item`` the verdict it ends with (a check that does not apply), for its record."""
    item.stash[verdict_key] = verdict


def give_figures(item: pytest.Item, figures: dict[str, Figure]) -> None:
    """Gives ``item`` the figures its check reported, for its record."""
    item.stash[figures_key] = figures


@dataclass(frozen=True)
class Outcome:
    """An Outcome is what a report of a memspec check tells its record beyond pytest's own
    fields: the clauses and features of its marker, its verdict when it did not pass, the
    figures it reported, and the reason of a listed expected failure that passed (``stale``)."""

    clauses: tuple[str, ...]
    features: tuple[str, ...]
    verdict: Verdict | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    stale: str | None = None

    def record(self, report: pytest.TestReport) -> CheckRecord:
        """Returns the record of the check ``report`` reports."""
        return CheckRecord.from_report(
            report, self.clauses, self.features, self.verdict, self.figures, self.stale
        )

    def to_json(self) -> dict[str, Any]:
        """Returns the outcome as built-in types, as pytest-xdist sends a report."""
        return {**asdict(self), "verdict": self.verdict.to_json() if self.verdict else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        """Returns the outcome :meth:`to_json` gave."""
        verdict = Verdict.from_json(data["verdict"]) if data["verdict"] else None
        clauses, features = tuple(data["clauses"]), tuple(data["features"])
        return cls(clauses, features, verdict, dict(data["figures"]), data["stale"])


def _junit_properties(outcome: Outcome, given: bool) -> list[tuple[str, str]]:
    """Returns the properties junit.xml shows for a memspec check (output only: the verdict
    reaches the record as an object): the verdict the check was given before it ended, its
    figures, its clauses and features, and the verdict of a failed teardown."""
    properties = [
        ("memspec_clauses", ",".join(outcome.clauses)),
        ("memspec_features", ",".join(outcome.features)),
    ]
    if outcome.figures:
        properties.insert(0, ("memspec_figures", json.dumps(outcome.figures, sort_keys=True)))
    if outcome.verdict is not None:
        shown = ("memspec_verdict", json.dumps(outcome.verdict.to_json(), sort_keys=True))
        properties.insert(len(properties) if not given else 0, shown)
    return properties


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attaches the :class:`Outcome` of a memspec check to each report of it, with the verdict
    of a check that failed taken from the exception itself; xdist workers send it back as data
    (:func:`pytest_report_to_serializable`). A listed expected failure that passed (pytest's
    strict XPASS: a call that failed without raising) is a stale entry of the list. A failure
    whose every blamed clause is listed is expected too, though the check does not cite the
    clause (an example citing SNAP-4 that blames a header's SNAP-6)."""
    report = yield
    clauses, features = _marker(item)
    if not clauses:
        return report
    given = item.stash.get(verdict_key, None)
    excinfo = call.excinfo
    failed = report.failed or hasattr(report, "wasxfail")
    raised = None if excinfo is None else excinfo.value
    if isinstance(raised, pytest.skip.Exception):
        raised = None  # a skip is no verdict
    verdict = verdict_of(raised) if failed and raised is not None and not given else given
    stale = None
    xfail = item.get_closest_marker("xfail")
    if call.when == "call" and report.failed and excinfo is None and xfail is not None:
        stale = str(xfail.kwargs.get("reason", "")).strip()
    expected = memspec_settings(item.config).expected_failures
    if report.failed and verdict is not None and verdict.kind == Kind.VIOLATION and expected:
        blamed = {f.clause for f in verdict.failures} or {verdict.blamed}
        if blamed <= expected:
            report.outcome = "skipped"
            report.wasxfail = f"listed in the expected-failures file as {sorted(blamed)}"
    figures = item.stash.get(figures_key, {})
    outcome = Outcome(clauses, features, verdict, dict(sorted(figures.items())), stale)
    setattr(report, OUTCOME_ATTRIBUTE, outcome)
    if call.when == "teardown":
        report.user_properties += _junit_properties(outcome, given is not None)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: pytest.TestReport) -> Any:
    """Sends the outcome of a memspec check between pytest processes (xdist) as JSON text in
    ASCII: the evidence of a failure may hold a lone surrogate (ENTRY-4's content), which JSON
    escapes and the channel between the processes cannot carry as a string."""
    data = yield
    outcome = getattr(report, OUTCOME_ATTRIBUTE, None)
    if isinstance(data, dict) and isinstance(outcome, Outcome):
        data[OUTCOME_ATTRIBUTE] = json.dumps(outcome.to_json(), ensure_ascii=True)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(data: dict[str, Any]) -> Any:
    """Rebuilds the outcome of a memspec check sent between pytest processes."""
    report = yield
    sent = data.get(OUTCOME_ATTRIBUTE)
    if report is not None and isinstance(sent, str):
        setattr(report, OUTCOME_ATTRIBUTE, Outcome.from_json(json.loads(sent)))
    return report


class Recorder:
    """The Recorder keeps one record per memspec check and writes the reports at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: list[CheckRecord] = []
        self.started = datetime.now(UTC).isoformat(timespec="seconds")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Records a check's verdict from its call phase, or a setup/teardown that decided it."""
        outcome = getattr(report, OUTCOME_ATTRIBUTE, None)
        if outcome is None:
            return
        decisive = (
            report.when == "call"
            or (report.when == "setup" and not report.passed)
            or (report.when == "teardown" and report.failed)
        )
        if decisive:
            self.records.append(outcome.record(report))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Makes the exit status 3 (pytest's internal error) when the only failures are
        memspec's own (harness errors); writes report.json, report.md and report.html when
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
            describe(settings.backend),
            settings.profile.name,
            settings.seed,
            settings.report,
            spec_version=settings.spec.version,
            started=self.started,
        )
        records = sorted(self.records, key=lambda r: r.id)
        write_reports(settings.report, info, records, settings.spec)
