"""The environment of hermes-agent 0.19.0 for the tests that run a provider plugin in it: built
from the package index (or reused from memspec's cache) once per test process, as
``memspec provider`` builds it; the test is skipped, with the reason, where it cannot be built."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes.providers import DEFAULT_HERMES, DRIVER
from memspec.conformance.hermes.releases import Release, ensure_venv, index_versions
from memspec.conformance.transport.provider import driver_command
from memspec.spec.errors import UsageError

PROJECT = Path(__file__).resolve().parent.parent


@functools.cache
def _built() -> Path | str:
    try:
        return ensure_venv(Release("hermes-agent", DEFAULT_HERMES), cache_dir())
    except UsageError as error:
        return f"no hermes-agent {DEFAULT_HERMES} environment here: {error}"


def hermes_python() -> Path:
    """Returns the interpreter of the hermes-agent 0.19.0 environment (skips the test when it
    cannot be built)."""
    built = _built()
    if isinstance(built, str):
        pytest.skip(built)
    return built


def provider_cmd(target: str) -> str:
    """Returns the command that drives ``target`` (relative to the project) in that
    environment."""
    return driver_command(hermes_python(), DRIVER, target)


@functools.cache
def _index_problem() -> str | None:
    try:
        index_versions("hermes-agent")
    except UsageError as error:
        return f"the package index cannot be reached: {error}"
    return None


def needs_index() -> None:
    """Skips the test, with the reason, when the package index cannot be reached."""
    problem = _index_problem()
    if problem is not None:
        pytest.skip(problem)


def package_python(package: str, version: str) -> Path:
    """Returns the interpreter of the environment ``memspec provider --package
    PACKAGE==VERSION`` builds (hermes-agent 0.19.0 with the package beside it), building it
    first if needed (skips the test when it cannot be built)."""
    needs_index()
    try:
        return ensure_venv(
            Release("hermes-agent", DEFAULT_HERMES), cache_dir(), beside=Release(package, version)
        )
    except UsageError as error:
        pytest.skip(f"no environment of {package} {version} here: {error}")
