"""The settings of a certification are declared once (``conformance/core/options.py``): every
command offers each it takes as declared, and values are checked when parsed. That the pytest
plugin offers the same is checked in a sandbox, in ``tests/harness/test_plugin.py``."""

from __future__ import annotations

import argparse

import pytest

from memspec.conformance.commands.cli import build_parser
from memspec.conformance.core.options import (
    PROFILE,
    QUIET,
    SELECT,
    SETTINGS,
    TIMEOUT,
    WHICH_BACKEND,
    WORKERS,
    positive_seconds,
    profile_name,
)
from memspec.conformance.hermes.cli import MATRIX_TIMEOUT, RELEASE_TIMEOUT

OPTIONS = (*WHICH_BACKEND, *SETTINGS)


def _actions(command: str = "certify") -> dict[str, argparse.Action]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen = commands.choices[command]
    return {flag: action for action in chosen._actions for flag in action.option_strings}


def test_memspec_certify_offers_every_setting_as_declared() -> None:
    actions = _actions()
    for option in OPTIONS:
        action = actions[f"--{option.name}"]
        assert (action.help, action.metavar, action.type) == (
            option.help, option.metavar, option.type
        )  # fmt: skip


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("certify", (WORKERS, SELECT, QUIET)),
        # a release's calls wait longer: hermes and sweep say so, matrix for its --hermes
        ("hermes", (PROFILE, WORKERS, RELEASE_TIMEOUT, SELECT, QUIET)),
        ("matrix", (PROFILE, WORKERS, MATRIX_TIMEOUT)),
        ("sweep", (PROFILE, WORKERS, RELEASE_TIMEOUT)),
        ("repro", (TIMEOUT,)),
    ],
)
def test_every_command_takes_a_shared_setting_as_declared(command: str, options: tuple) -> None:
    actions = _actions(command)
    for option in options:
        action = actions[f"--{option.name}"]
        assert action.type is (None if option.switch else option.type)
        assert action.help.split("; default ")[0] == option.help.split("; default ")[0]
        if option.short:
            assert actions[option.short] is action
    if command == "sweep":
        profile = actions["--profile"]
        assert profile.default == "smoke" and "default smoke" in str(profile.help)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_timeouts_must_be_positive_seconds(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="must be positive seconds"):
        positive_seconds(value)


def test_profiles_are_named() -> None:
    assert profile_name("smoke") == "smoke"
    with pytest.raises(argparse.ArgumentTypeError, match="unknown profile 'huge'"):
        profile_name("huge")
