"""The environment of hermes-agent 0.19.0 for the tests that run a provider plugin in it: built
from the package index (or reused from memspec's cache) once per test process, as
``memspec provider`` builds it; the test is skipped, with the reason, where it cannot be built."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes.providers import DEFAULT_HERMES, DRIVER
from memspec.conformance.hermes.releases import Release, ensure_venv
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
