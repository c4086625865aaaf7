"""Extraction of clauses and examples from SPEC.md, and the ``memspec spec`` command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from memspec.conformance.commands.cli import main
from memspec.spec.clauses import (
    Clause,
    ClauseSyntaxError,
    missing_tests,
    parse_clauses,
    uncovered_must_clauses,
    unknown_ids,
)
from memspec.spec.document import installed_path, installed_spec
from memspec.spec.examples import ExampleSyntaxError, parse_examples, parse_step

PROJECT = Path(__file__).resolve().parents[2]

CLAUSES = """# Title

**FOO-1** (MUST) First rule,
continued here.
Prevents: a bug.

**FOO-2** (SHOULD) Second rule.

**FOO-3** (MAY) Third rule.
Checked by: `tests/unit/test_spec_text.py::test_clause_fields`, `tests/nope.py::test_nothing`.
"""


def test_clause_fields() -> None:
    clauses = parse_clauses(CLAUSES)
    assert [(c.id, c.level, c.line) for c in clauses] == [
        ("FOO-1", "MUST", 3),
        ("FOO-2", "SHOULD", 7),
        ("FOO-3", "MAY", 9),
    ]
    assert clauses[0].text == "First rule, continued here. Prevents: a bug."
    assert clauses[0].area == "FOO" and clauses[0].checked_by == ()
    assert clauses[2].checked_by == (
        ("tests/unit/test_spec_text.py", "test_clause_fields"),
        ("tests/nope.py", "test_nothing"),
    )


def test_clause_bookkeeping() -> None:
    clauses = parse_clauses(CLAUSES)
    assert uncovered_must_clauses(clauses, []) == [clauses[0]]
    assert uncovered_must_clauses(clauses, ["FOO-1"]) == []
    assert unknown_ids(clauses, ["FOO-1", "BAR-9"]) == ["BAR-9"]
    assert missing_tests(clauses, PROJECT) == [
        "FOO-3 names tests/nope.py::test_nothing, which does not exist"
    ]


def test_a_clause_stated_twice_is_a_spec_bug() -> None:
    with pytest.raises(ClauseSyntaxError, match="FOO-1 is already stated at line 1"):
        parse_clauses("**FOO-1** (MUST) a\n\n**FOO-1** (MUST) b\n")


def test_installed_spec_is_sound() -> None:
    clauses = parse_clauses(installed_path().read_text(encoding="utf-8"))
    assert 80 <= len(clauses) <= 250
    assert isinstance(clauses[0], Clause)
    assert missing_tests(clauses, PROJECT) == []


EXAMPLE = """
```memspec id=demo-example clauses=FOO-1,FOO-2 limits=memory:40,user:30
# a comment
put memory "a\\n\\u00a7\\nb"
put user hex "ef bb bf 61"
put user absent
load
@b add memory "c" -> OK {"duplicate": false}
replace "notes" "a" "b" -> E_TARGET
batch memory [{"action": "add", "content": "x"}] -> OK
entries memory == ["a", "b", "c", "x"]
disk memory == hex "61"
disk user == absent
backups memory include ["x", {"hex": "ff"}]
snapshot user == null
@b snapshot memory:
    line one
    [BLOCKED: MEMORY.md ...]
```
"""


def test_example_steps_and_json() -> None:
    (example,) = parse_examples(EXAMPLE)
    assert example.id == "demo-example" and example.clauses == ("FOO-1", "FOO-2")
    assert example.limits == {"memory": 40, "user": 30}
    ops = [step.op for step in example.steps]
    assert ops == [
        "put",
        "put",
        "put",
        "load",
        "add",
        "replace",
        "batch",
        "entries",
        "disk",
        "disk",
        "backups",
        "snapshot",
        "snapshot",
    ]
    assert example.steps[0].args == ("memory", "a\n§\nb".encode())
    assert example.steps[1].args == ("user", b"\xef\xbb\xbfa")
    assert example.steps[4].session == "b"
    assert example.steps[4].expect == {"code": "OK", "duplicate": False}
    assert example.steps[-1].expect == {"value": "line one\n[BLOCKED: MEMORY.md ...]"}
    # A backups step needs no feature: every backend backs up what it rewrites (DRIFT-5).
    assert example.features == ("core", "batch", "threat-scan")
    record = example.to_json()
    json.dumps(record)
    assert record["steps"][1] == {
        "session": "a",
        "op": "put",
        "line": 5,
        "target": "user",
        "data": {"hex": "efbbbf61"},
    }
    assert record["steps"][3] == {"session": "a", "op": "load", "line": 7}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("frobnicate memory", "unknown step 'frobnicate'"),
        ("add memory", "expected a JSON value"),
        ('add memory "x"', "expected a word"),
        ('add memory "x" => OK', "expected '-> CODE'"),
        ('add memory "x" -> E_NOPE', "unknown code 'E_NOPE'"),
        ('add memory "x" -> OK [1]', "outcome fields must be a JSON object"),
        ('add memory "x" -> OK {"a": 1} extra', "unexpected text at the end"),
        ('add memory {"open": ', "bad JSON value"),
        ("entries memory [1]", "expected a word"),
        ("entries memory != [1]", "expected 'entries TARGET == VALUE'"),
        ('disk memory = "x"', "expected 'disk TARGET == VALUE'"),
        ('disk memory == hex "zz"', "bad hex 'zz'"),
        ("disk memory == 3", "file contents must be a string"),
        ('backups memory has ["x"]', "'include"),
        ('backups memory == "x"', "backups are a JSON list"),
        ("backups memory == [3]", 'a backup is a string or {"hex"'),
        ('backups memory == [{"hex": "q"}]', "bad hex 'q'"),
    ],
)
def test_malformed_steps_are_spec_bugs(line: str, message: str) -> None:
    with pytest.raises(
        ExampleSyntaxError,
        match=message.replace("(", r"\(").replace("[", r"\[").replace("{", r"\{"),
    ):
        parse_step(line, 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("```memspec id=Bad_Id clauses=FOO-1\n```\n", "example id must be a slug"),
        ("```memspec id=ok clauses=foo\n```\n", "clauses must be AREA-N ids"),
        ("```memspec id=ok clauses=FOO-1 limits=memory:0\n```\n", "bad limits entry"),
        ("```memspec id=ok clauses=FOO-1\nload\n", "is never closed"),
        (
            "```memspec id=ok clauses=FOO-1\n```\n```memspec id=ok clauses=FOO-1\n```\n",
            "duplicate id 'ok'",
        ),
    ],
)
def test_malformed_examples_are_spec_bugs(text: str, message: str) -> None:
    with pytest.raises(ExampleSyntaxError, match=message):
        parse_examples(text)


def test_dump_json_prints_every_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "--dump-json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == len(list(installed_spec().examples))
    assert all({"id", "clauses", "steps", "limits", "features"} <= set(r) for r in records)


def test_spec_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "--check"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.strip().endswith("spec check passed")


def test_spec_check_reports_a_disagreeing_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = installed_path().read_text(encoding="utf-8") + (
        '\n```memspec id=zz-wrong clauses=FORMAT-1\nadd memory "x" -> E_LIMIT\n```\n'
    )
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: text)
    assert main(["spec", "--check"]) == 1
    output = capsys.readouterr().out
    assert "BUG IN SPEC: the model disagrees with an example" in output
    assert "expected code E_LIMIT, got OK" in output


def test_spec_check_reports_a_malformed_spec(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: "```memspec id=x\n```\n")
    assert main(["spec", "--check"]) == 1
    assert "BUG IN SPEC" in capsys.readouterr().err


def test_main_leaves_the_callers_import_path_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command puts its working directory on the import path for its own run only: a
    # program that calls it (a test suite) would otherwise import the project folder's
    # packages instead of the installed ones for the rest of its life.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    before = list(sys.path)
    assert main(["spec", "--check"]) == 0
    capsys.readouterr()
    assert sys.path == before
    assert os.environ["PYTHONPATH"] == "/elsewhere"


def test_every_fence_clause_a_fence_check_judges_is_gated_by_fence() -> None:
    # A backend that does not claim fence must not be held back from core by a fence clause
    # (FENCE-7 states what CONTRACT-10's "made harmless" means).
    from memspec.conformance.core.registry import all_checks
    from memspec.spec.clauses import parse_clauses
    from memspec.spec.document import installed_spec

    clauses = {clause.id: clause for clause in parse_clauses(installed_spec().text)}
    judged = {
        clause
        for check in all_checks().values()
        if check.features == ("fence",)
        for clause in check.clauses
    }
    assert {c for c in judged if clauses[c].feature != "fence"} == set()
