"""What every test of the harness's own suite shares: its purpose marker, Hypothesis profiles
and the fixtures used in more than one folder.

**Purposes.** Each test lives in the folder of its purpose under ``tests/`` and carries that
folder's marker, given here and nowhere else (``pytest -m unit``, ``-m "not integration"``):

- ``unit/``: the spec's pure code, the reference store's modules, the history checkers and the
  harness's settings, ids and verdicts, called directly in this process;
- ``harness/``: the harness driving backends as users meet it (certify, the API, the plugin,
  transports, worker processes, reports and results pages) and the project's own rules;
- ``power/``: proofs that the checks can fail, on backends broken on purpose, and the zoo;
- ``integration/``: tests that need a program from outside Python (node, strace, redis-server,
  a Hermes release or memspec itself from the package index), skipped with the reason where
  it is missing.

A test elsewhere under ``tests/``, or one that marks itself with a purpose, fails, saying so.

**Hypothesis.** With ``CI`` set, Hypothesis loads its built-in deterministic ``ci`` profile
(derandomised, no example database). ``thorough`` is for bug hunting:
``pytest --hypothesis-profile thorough``.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
PURPOSES = ("unit", "harness", "power", "integration")
"""The folders of ``tests/`` that hold tests, from the fastest to the slowest; each folder's name
is the marker of its tests."""

settings.register_profile("thorough", max_examples=2000, derandomize=False, deadline=None)
if not os.environ.get("CI"):
    # no deadline outside CI either (where Hypothesis' own ci profile has none): how fast an
    # example runs is the benchmarks' business, and a loaded machine must not fail a test
    settings.register_profile("local", deadline=None)
    settings.load_profile("local")


PROBLEM = pytest.StashKey[str]()


def purpose_of(item: pytest.Item) -> str | None:
    """Returns the purpose of a test under ``tests/``: the folder it lies in (``None`` for a
    test collected from elsewhere, such as a sandbox of the plugin tests). Raises
    ``ValueError`` for a test outside the purpose folders, or one that marks itself with a
    purpose."""
    try:
        folder = item.path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None
    if folder not in PURPOSES:
        raise ValueError(
            f"{item.nodeid}: a test belongs in one of tests/{{{','.join(PURPOSES)}}}/, the folder "
            "of its purpose (docs/architecture.md, 'The harness's own tests')"
        )
    marked = sorted({mark.name for mark in item.iter_markers() if mark.name in PURPOSES})
    if marked:
        raise ValueError(
            f"{item.nodeid}: marked {', '.join(marked)} by hand; its folder tests/{folder}/ "
            f"gives it the marker {folder}: remove the mark, or move the test"
        )
    return folder


FIRST_TO_LAST = PURPOSES[::-1]
"""The order the purposes run in: the slowest first, so that under ``pytest -n`` a test of
minutes is never started last, while the other worker has nothing left to do."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Gives each test the marker of its folder, so that ``-m PURPOSE`` selects the folder; a
    test without a purpose, or with two, fails when it is run. Runs the folders in the order of
    :data:`FIRST_TO_LAST`, each in its own order."""
    rank: dict[str, int] = {}
    for item in items:
        try:
            purpose = purpose_of(item)
        except ValueError as problem:
            item.stash[PROBLEM] = str(problem)
            continue
        if purpose is not None:
            item.add_marker(purpose)
            rank[item.nodeid] = FIRST_TO_LAST.index(purpose)
    items.sort(key=lambda item: rank.get(item.nodeid, len(FIRST_TO_LAST)))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if PROBLEM in item.stash:
        pytest.fail(item.stash[PROBLEM], pytrace=False)


@pytest.fixture
def short_temp(tmp_path: Path) -> Iterator[Path]:
    """A new, empty temp directory with a short path, linked from ``tmp_path/tmp``.

    Worker processes talk through a Unix socket under the temp directory, and a socket's path
    may not exceed 107 bytes: pytest's own ``tmp_path`` can be too long for that.
    """
    temp = Path(tempfile.mkdtemp(prefix="ms-"))
    (tmp_path / "tmp").symlink_to(temp)
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def unmeasured_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backend processes that strace traces run as users run them: not measured by coverage.

    With ``pytest --cov``, coverage measures every Python subprocess (``[tool.coverage.run]
    patch``); strace would then stop a served store at each of coverage's own imports and data
    file writes too: the socket-lock scheduling test took 376 s so, 131 s without (80 s with no
    ``--cov`` at all). The code these processes run is measured by the other tests."""
    monkeypatch.delenv("COVERAGE_PROCESS_CONFIG", raising=False)
