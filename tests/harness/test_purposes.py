"""Every test carries exactly one purpose marker, the name of its folder under ``tests/``, given
by ``tests/conftest.py`` (docs/architecture.md, "The harness's own tests")."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import FIRST_TO_LAST, PURPOSES, TESTS

pytest_plugins = ["pytester"]


def test_every_collected_test_has_the_purpose_of_its_folder(request: pytest.FixtureRequest) -> None:
    for item in request.session.items:
        purposes = [mark.name for mark in item.iter_markers() if mark.name in PURPOSES]
        assert purposes == [item.path.resolve().relative_to(TESTS).parts[0]], item.nodeid


def test_the_slowest_purposes_run_first(request: pytest.FixtureRequest) -> None:
    """Under ``pytest -n``, no test of minutes is started last while the other worker idles."""
    ranks = [
        FIRST_TO_LAST.index(item.path.resolve().relative_to(TESTS).parts[0])
        for item in request.session.items
    ]
    assert ranks == sorted(ranks)


def test_a_test_outside_the_purposes_or_marked_by_hand_fails(pytester: pytest.Pytester) -> None:
    tests = pytester.mkdir("tests")
    shutil.copy(TESTS / "conftest.py", tests / "conftest.py")
    sources = {
        "unit": "def test_pure():\n    pass\n",
        "power": "def test_proof():\n    pass\n",
        "misc": "def test_stray():\n    pass\n",
        "harness": "import pytest\n\n\n@pytest.mark.power\ndef test_twice():\n    pass\n",
    }
    for folder, source in sources.items():
        (tests / folder).mkdir()
        (tests / folder / f"test_{folder}.py").write_text(source, encoding="utf-8")
    # -m selects a folder by its marker.
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-m", "unit").assert_outcomes(
        passed=1, deselected=3
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*test_stray: a test belongs in one of tests/{unit,harness,power,integration}/*",
            "*test_twice: marked power by hand; its folder tests/harness/ gives it the marker*",
        ]
    )
