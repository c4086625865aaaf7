"""The version of SPEC.md: one source (its version line), a changelog section per version, and
the number in ``spec --check`` and ``--dump-json`` (reports and the matrix:
``tests/harness/test_report_version.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import memspec.spec
from memspec.conformance.commands import cli
from memspec.spec import versions
from memspec.spec.document import installed_spec
from memspec.spec.examples import examples_json
from memspec.spec.versions import (
    SpecVersion,
    VersionSyntaxError,
    changelog_sections,
    parse_version,
    version_problems,
)

PROJECT = Path(__file__).resolve().parent.parent
SCHEMA = PROJECT / "conformance" / "verdict" / "report.schema.json"
GOOD = "# spec\n\nVersion 3 (2027-01-02). Text.\n\n## Changes\n\n### Version 3 (2027-01-02)\n\nx\n"


def test_the_installed_spec_states_one_version_with_its_changelog_section() -> None:
    text = installed_spec().text
    version = parse_version(text)
    assert tuple(map(int, version.number.split("."))) >= (2, 1)
    assert version_problems(text) == []
    assert memspec.spec.SPEC_VERSION == installed_spec().version == version.number
    assert sorted(changelog_sections(text))[:3] == ["1", "2", "2.1"]


def test_other_attributes_are_still_missing() -> None:
    with pytest.raises(AttributeError):
        memspec.spec.NO_SUCH_NAME  # noqa: B018
    with pytest.raises(AttributeError):
        versions.NO_SUCH_NAME  # noqa: B018


def test_a_good_text_has_no_problems() -> None:
    assert parse_version(GOOD) == SpecVersion("3", "2027-01-02")
    assert version_problems(GOOD) == []
    assert changelog_sections(GOOD.replace(" (2027-01-02)\n\nx", "\n\nx")) == {"3": None}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GOOD.replace("Version 3 (2027-01-02). Text.", "Text."), "found 0"),
        (GOOD + "\nVersion 4 (2027-02-02)\n", "found 2"),
        (GOOD.replace("## Changes", "## Other"), "no section '### Version 3 (2027-01-02)'"),
        (GOOD.replace("### Version 3", "### Version 2"), "no section"),
        (GOOD.replace("3 (2027-01-02)\n\nx", "3 (2027-01-09)\n\nx"), "says 2027-01-09"),
        (GOOD + "\n## After\n\n### Version 3 (2027-01-02)\n", None),
    ],
)
def test_version_problems(text: str, problem: str | None) -> None:
    found = version_problems(text)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found


def test_a_section_after_the_changelog_does_not_count() -> None:
    text = GOOD.replace("### Version 3 (2027-01-02)", "## After\n\n### Version 3 (2027-01-02)")
    assert "no section" in version_problems(text)[0]


def test_spec_check_fails_without_a_version_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unversioned = re.sub(
        r"^Version 2\.2 \(.*$", "", installed_spec().text, count=1, flags=re.MULTILINE
    )
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: unversioned)
    assert cli.main(["spec", "--check"]) == 1
    assert "exactly one line 'Version N (YYYY-MM-DD)'" in capsys.readouterr().out


def test_spec_check_fails_without_a_changelog_section(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = installed_spec().text.replace("### Version 2.2 (", "### Version 9 (", 1)
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: text)
    assert cli.main(["spec", "--check"]) == 1
    assert "has no section '### Version 2.2" in capsys.readouterr().out


def test_dump_json_keeps_its_shape_and_carries_the_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["spec", "--dump-json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert isinstance(records, list) and records
    assert {record["spec_version"] for record in records} == {memspec.spec.SPEC_VERSION}
    assert all({"id", "clauses", "features", "limits", "line", "steps"} <= set(r) for r in records)


def test_dump_json_of_an_unversioned_spec_is_a_bug_in_the_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(VersionSyntaxError):
        examples_json("no version here")
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: "no version here")
    assert cli.main(["spec", "--dump-json"]) == 1
    assert "BUG IN SPEC" in capsys.readouterr().err
