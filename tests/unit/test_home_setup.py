"""``memspec provider --home-setup CMD`` (``conformance/transport/provider.py``, ``HomeSetup``):
the command runs once in each new Hermes home, in it, with the provider's environment and
``{home}`` replaced; one that fails, cannot start or hangs is one line naming it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from memspec.conformance.transport.provider import (
    HomeSetup,
    HomeSetupError,
    provider_environment,
    scratch_of,
)

COUNT = (
    "import os, pathlib, sys; p = pathlib.Path('runs'); "
    "p.write_text(p.read_text() + os.environ['HERMES_HOME'] + ' ' + sys.argv[1] + '\\n' "
    "if p.exists() else os.environ['HERMES_HOME'] + ' ' + sys.argv[1] + '\\n')"
)


def _setup(code: str, *extra: str, timeout: float = 30.0) -> HomeSetup:
    return HomeSetup(shlex.join([sys.executable, "-c", code, *extra]), timeout)


def _environment(home: Path) -> dict[str, str]:
    scratch, temporary = scratch_of(home)
    return provider_environment(home, scratch, temporary)


def test_it_runs_once_in_each_new_home(tmp_path: Path) -> None:
    setup = _setup(COUNT, "{home}")
    homes = [tmp_path / "root", tmp_path / "profile-b"]
    for home in homes:
        home.mkdir()
    for home in (*homes, homes[0], homes[1]):
        setup.prepare(home, _environment(home))
    # in the home (its cwd), with HERMES_HOME the home and {home} replaced, once each
    for home in homes:
        assert (home / "runs").read_text() == f"{home} {home}\n"


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        (
            _setup("import sys; sys.exit('no manifest here')"),
            "ended with status 1 in .*: no manifest here$",
        ),
        (
            _setup("import time; time.sleep(30)", timeout=1.0),
            "did not finish within 1 s in .*nothing on stderr",
        ),
        (
            HomeSetup("memspec-no-such-installer {home}", 5.0),
            "could not start 'memspec-no-such-installer'",
        ),
    ],
)
def test_a_setup_that_fails_is_one_line_naming_it(
    setup: HomeSetup, said: str, tmp_path: Path
) -> None:
    with pytest.raises(HomeSetupError, match=said) as raised:
        setup.prepare(tmp_path, _environment(tmp_path))
    assert str(raised.value).startswith(f"--home-setup {setup.command!r} ")
    assert "\n" not in str(raised.value)
    # a home it failed in is not taken as prepared: it runs again there
    assert not setup.prepared
