"""The conformance suite: every SPEC.md example and every named check, against one backend.

Test ids are ``AREA/name``, so a run reads as the spec's areas in order. Each test carries the
``memspec`` marker with the clause ids it verifies and the features it needs. The examples are
those of the run's spec (``Settings.spec``: the installed SPEC.md, or the file the run was given),
parametrized when pytest collects the suite (:func:`pytest_generate_tests`), never at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest

from memspec.conformance.core.budgets import enforced, start_allowance
from memspec.conformance.core.profiles import Profile
from memspec.conformance.core.registry import (
    Check,
    CheckContext,
    all_checks,
    clauses_with_checks,
    run_within_budget,
)
from memspec.conformance.examples.failure import plain
from memspec.conformance.examples.probes import run_on_backend
from memspec.conformance.suite.plugin import give_figures, give_verdict, memspec_settings
from memspec.conformance.tamper.capability import Tampering
from memspec.conformance.transport.backend import Backend
from memspec.conformance.verdict.findings import (
    Evidence,
    HarnessError,
    Mismatch,
    NotApplicable,
    Unverified,
    verdict_of,
)
from memspec.spec.clauses import uncovered_must_clauses
from memspec.spec.examples import Example

CHECKS = all_checks()


def _area(clauses: tuple[str, ...]) -> str:
    return clauses[0].rsplit("-", 1)[0]


def _example_params(examples: Sequence[Example]) -> list[object]:
    return [
        pytest.param(
            example,
            marks=pytest.mark.memspec(
                clauses=list(example.clauses), features=list(example.features)
            ),
            id=f"{_area(example.clauses)}/{example.id}",
        )
        for example in examples
    ]


def _check_params() -> list[object]:
    return [
        pytest.param(
            check,
            marks=pytest.mark.memspec(clauses=list(check.clauses), features=list(check.features)),
            id=f"{_area(check.clauses)}/{check.id}",
        )
        for check in CHECKS.values()
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrizes :func:`test_example` with the examples of the run's spec."""
    if metafunc.definition.name == "test_example":
        examples = memspec_settings(metafunc.config).spec.examples
        metafunc.parametrize("example", _example_params(examples))


def unsupported(request: pytest.FixtureRequest, error: NotApplicable | Unverified) -> NoReturn:
    """Skips the check because it does not apply or could not judge, with its verdict as data."""
    give_verdict(request.node, verdict_of(error))
    pytest.skip(str(error))


def test_example(
    example: Example,
    memspec_backend: Backend,
    memspec_root: Path,
    memspec_profile: Profile,
    request: pytest.FixtureRequest,
) -> None:
    """Runs one SPEC.md example on a fresh root, within the profile's budget of an example."""
    allowance = start_allowance(example.id, memspec_profile, memspec_profile.example_budget)
    try:
        with enforced(allowance, {}):
            failure = run_on_backend(example, memspec_backend, memspec_root)
    except (NotApplicable, Unverified) as error:
        unsupported(request, error)
    if failure is not None:
        evidence = Evidence.of(
            failure.step, plain(failure.sent), plain(failure.received), plain(failure.expected)
        )
        raise Mismatch(
            failure.render(), failure.summary(), failure.blamed, failure.completed,
            dict(failure.clause_reasons), evidence,
        )  # fmt: skip


@pytest.mark.parametrize("check", _check_params())
def test_check(
    check: Check,
    memspec_backend: Backend,
    memspec_root: Path,
    memspec_profile: Profile,
    memspec_features: frozenset[str],
    memspec_tampering: Tampering,
    pytestconfig: pytest.Config,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Runs one named check on a fresh root, within its budget (``core/budgets.py``); the
    figures it reports go into its record."""
    settings = memspec_settings(pytestconfig)
    artifacts = settings.report / "artifacts" if settings.report else None
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    context = CheckContext(
        memspec_backend,
        memspec_root,
        scratch,
        memspec_profile,
        settings.seed,
        settings.hypothesis_db,
        artifacts,
        features=memspec_features,
        tampering=memspec_tampering,
    )
    try:
        run_within_budget(check, context)
    except (NotApplicable, Unverified) as error:
        unsupported(request, error)
    finally:
        if context.figures:
            give_figures(request.node, context.figures)


@pytest.mark.memspec(clauses=["CONTRACT-1"], features=[])
def test_every_must_clause_is_checked(pytestconfig: pytest.Config) -> None:
    """Fails the run when the run's SPEC.md states a MUST clause that no example and no check
    verifies."""
    spec = memspec_settings(pytestconfig).spec
    covered = [cid for example in spec.examples for cid in example.clauses]
    missing = uncovered_must_clauses(list(spec.clauses), [*covered, *clauses_with_checks()])
    # Every MUST clause of the spec certified against is verified by an example or a check: a
    # clause nothing verifies is a gap of that spec or of memspec, never the backend's failure.
    if missing:
        raise HarnessError(
            "MUST clauses with no example and no check: "
            + ", ".join(f"{clause.id} (SPEC.md line {clause.line})" for clause in missing)
        )
