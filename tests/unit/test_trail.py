"""Following a clause id: ``memspec spec --clause ID`` and the citation rule of ``spec --check``."""

from __future__ import annotations

import json
import re

import pytest

from memspec.conformance.commands.cli import main
from memspec.conformance.commands.trail import (
    NOT_DECIDED_BY_THE_MODEL,
    Citation,
    check_sites,
    clause_trail,
    find_citations,
    model_citation_problems,
    prevents,
    unknown_citations,
)
from memspec.conformance.core.registry import all_checks
from memspec.spec.clauses import parse_clauses
from memspec.spec.document import installed_path

SYNTHETIC_SPEC = """# A spec

**ZED-1** (MUST) Zeds are decided by the model. Prevents: bug #1.

```memspec id=zed-one clauses=ZED-1
add memory "x" -> OK
```

**ZED-2** (MUST) Zeds are files on disk.

**ZED-3** (SHOULD) Zeds are nice.
"""


def _trail_output(clause: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["spec", "--clause", clause]) == 0
    return capsys.readouterr().out


def _assert_checks_listed(clause: str, output: str) -> None:
    sites = check_sites(all_checks())[clause]
    assert sites, f"no check cites {clause}"
    for site in sites:
        # Each check is named with the file and function that implement it.
        assert site.id in output, site
        assert site.where in output, site
        assert site.where.startswith(("conformance/checks/", "fuzz/")), site
        assert ".py:" in site.where, site


def test_clause_drift_3_prints_the_whole_trail(capsys: pytest.CaptureFixture[str]) -> None:
    output = _trail_output("DRIFT-3", capsys)
    assert output.startswith("DRIFT-3 (MUST), SPEC.md line ")
    assert "saves a byte-exact copy of the file" in output
    assert "Prevents: " in output
    assert "drift-backup-byte-exact" in output
    assert "spec/model.py:_mutate" in output
    assert "reference_impl/files.py:write_backup" in output
    assert "reference_impl/store.py:Store._mutate_locked" in output
    _assert_checks_listed("DRIFT-3", output)


def test_clause_snap_6_prints_the_whole_trail(capsys: pytest.CaptureFixture[str]) -> None:
    output = _trail_output("SNAP-6", capsys)
    assert output.startswith("SNAP-6 (MUST), SPEC.md line ")
    assert "exact integer arithmetic" in output
    assert "snap-percent-integer-arithmetic" in output and "snap-percent-capped" in output
    assert "spec/snapshot.py:usage_label" in output
    assert "reference_impl/store.py:Store.load" in output
    _assert_checks_listed("SNAP-6", output)


def test_example_lines_are_those_of_spec_md(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "--clause", "SNAP-6", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    lines = installed_path().read_text(encoding="utf-8").split("\n")
    assert record["id"] == "SNAP-6" and record["level"] == "MUST"
    assert lines[record["line"] - 1].startswith("**SNAP-6** (MUST)")
    for example in record["examples"]:
        assert f"id={example['id']} " in lines[example["line"] - 1]
    assert {"model", "reference", "checks", "prevents", "text"} <= set(record)


@pytest.mark.parametrize(
    ("clause", "message"),
    [
        ("DRIFT-99", "SPEC.md states no clause DRIFT-99; DRIFT has DRIFT-1 to DRIFT-7"),
        ("NOPE-1", "SPEC.md states no clause NOPE-1; SPEC.md has no area NOPE"),
        ("drift3", "'drift3' is not a clause id"),
    ],
)
def test_an_unknown_clause_is_a_one_line_usage_error(
    clause: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["spec", "--clause", clause]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("memspec: error: " + message)
    assert captured.err.count("\n") == 1, captured.err


def test_json_needs_a_clause(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spec", "--check", "--json"]) == 2
    assert capsys.readouterr().err.startswith("memspec: error: --json goes with --clause")


def test_citations_belong_to_the_innermost_def() -> None:
    source = '''"""Module (ZED-1)."""

X = 1
"""An attribute docstring (ZED-2)."""


# Right above the def (ZED-3).
@decorated
def outer():
    """Outer (ZED-4). UTF-8 is found by shape too."""

    def inner():
        # ZED-5: a comment inside the inner function.
        return 1

    return inner  # ZED-6


class Holder:
    def method(self):
        """Method (ZED-7, ZED-8)."""
'''
    found = {(c.clause, c.where, c.line) for c in find_citations(source, "spec/zed.py")}
    assert found == {
        ("ZED-1", "spec/zed.py", 1),
        ("ZED-2", "spec/zed.py", 4),
        ("ZED-3", "spec/zed.py:outer", 7),
        ("ZED-4", "spec/zed.py:outer", 10),
        ("UTF-8", "spec/zed.py:outer", 10),
        ("ZED-5", "spec/zed.py:outer.inner", 13),
        ("ZED-6", "spec/zed.py:outer", 16),
        ("ZED-7", "spec/zed.py:Holder.method", 21),
        ("ZED-8", "spec/zed.py:Holder.method", 21),
    }


def test_the_trail_of_a_synthetic_spec() -> None:
    model = find_citations('def decide():\n    """Decides (ZED-1)."""\n', "spec/zed.py")
    reference = [Citation("ZED-1", "reference_impl/zed.py:store", 3)]
    trail = clause_trail("zed-1", SYNTHETIC_SPEC, model, reference, {})
    assert trail.clause.id == "ZED-1" and trail.prevents == "bug #1."
    assert trail.examples == (("zed-one", 5),)
    # the steps themselves, for an author who has only the command (a quick-start reader)
    assert trail.texts() == ('add memory "x" -> OK',)
    assert trail.to_json()["examples"][0]["text"] == 'add memory "x" -> OK'
    assert [c.where for c in trail.model] == ["spec/zed.py:decide"]
    assert [c.where for c in trail.reference] == ["reference_impl/zed.py:store"]
    assert trail.checks == ()


def test_prevents_stops_at_checked_by() -> None:
    (clause,) = parse_clauses(
        "**ZED-1** (MUST) Text. Prevents: bug #2. Checked by: `tests/test_x.py::test_y`.\n"
    )
    assert prevents(clause) == "bug #2."


def test_a_must_clause_no_model_function_cites_is_a_problem() -> None:
    clauses = parse_clauses(SYNTHETIC_SPEC)
    model = [Citation("ZED-1", "spec/zed.py:decide", 2)]
    problems = model_citation_problems(clauses, model, allowed={})
    assert len(problems) == 1 and problems[0].startswith("ZED-2 (MUST, SPEC.md line 9)")
    # A clause the model cannot decide is excused by a line saying why; SHOULD needs nothing.
    assert model_citation_problems(clauses, model, allowed={"ZED-2": "files on disk"}) == []


def test_a_stale_excuse_is_a_problem() -> None:
    clauses = parse_clauses(SYNTHETIC_SPEC)
    model = [Citation("ZED-1", "spec/zed.py:decide", 2), Citation("ZED-2", "spec/zed.py:f", 5)]
    problems = model_citation_problems(
        clauses, model, allowed={"ZED-2": "files on disk", "ZED-3": "not MUST", "ZED-9": "gone"}
    )
    assert problems == [
        "NOT_DECIDED_BY_THE_MODEL lists ZED-2, but spec/zed.py:f cites it: drop one of them",
        "NOT_DECIDED_BY_THE_MODEL lists ZED-3, which SPEC.md does not state as MUST",
        "NOT_DECIDED_BY_THE_MODEL lists ZED-9, which SPEC.md does not state as MUST",
    ]


def test_a_cited_id_spec_md_does_not_state_is_a_problem() -> None:
    clauses = parse_clauses(SYNTHETIC_SPEC)
    citations = [Citation("ZED-7", "spec/zed.py:f", 5), Citation("UTF-8", "spec/zed.py:g", 9)]
    assert unknown_citations(clauses, citations) == [
        "spec/zed.py:f (line 5) cites ZED-7, which SPEC.md does not state"
    ]


def test_every_excuse_has_a_reason() -> None:
    assert all(reason.strip() for reason in NOT_DECIDED_BY_THE_MODEL.values())


def test_spec_check_fails_on_an_uncited_must_clause(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = installed_path().read_text(encoding="utf-8") + (
        "\n**ZED-1** (MUST) A rule nothing in spec/ decides.\n\n"
        '```memspec id=zz-zed clauses=ZED-1\nadd memory "x" -> OK\n```\n'
    )
    monkeypatch.setattr("memspec.spec.document.installed_text", lambda: text)
    assert main(["spec", "--check"]) == 1
    output = capsys.readouterr().out
    assert "ZED-1 (MUST, SPEC.md line" in output
    assert "is cited by no function of spec/" in output
    assert output.strip().endswith("spec check failed: 1 problem(s)")


def test_no_area_wildcards_are_left_in_the_model_or_the_reference() -> None:
    root = installed_path().resolve().parent.parent
    offenders = [
        f"{path.relative_to(root)}: {match.group()}"
        for folder in ("spec", "reference_impl")
        for path in sorted((root / folder).glob("*.py"))
        for match in re.finditer(r"\b[A-Z]{3,}-\*", path.read_text(encoding="utf-8"))
    ]
    assert not offenders, offenders
