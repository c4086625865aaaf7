"""``memspec certify --hermes-class``: a class with Hermes' ``MemoryStore`` shape, certified with
no adapter written by its author (``tests/backends/hermes_shaped.py``): the parts found by
inspection, refusal texts mapped by Hermes' table and a rules file, an unmapped one an adapter
gap naming it, and one line with status 2 for a class or file that will not do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memspec
from memspec.conformance.hermes.adapter import store_features
from memspec.conformance.hermes.store_class import AdapterGap, classify, parse_rules
from memspec.spec.errors import UsageError
from tests.backends.hermes_shaped import ShapedStore
from tests.harness.test_certify import certify

SHAPED = "tests.backends.hermes_shaped"
TWO_FILES = "tests.backends.hermes_two_files"
RULES = "tests/data/hermes-shaped.rules"
GERMAN_RULES = "tests/data/hermes-shaped-german.rules"
MATCHING = "match-no-candidate or match-ambiguous-distinct or entry-delimiter-line-refused"


def run(tmp_path: Path, target: str, *options: str, select: str = MATCHING) -> dict:
    """Certifies ``target`` at smoke on ``select``; returns the report, with the output."""
    directory = tmp_path / "report"
    result = certify("--hermes-class", f"{SHAPED}:{target}", *options, "--profile", "smoke",
                     "-k", select, "--report", str(directory), "-q")  # fmt: skip
    assert result.returncode in (0, 1), result.stdout[-2000:] + result.stderr[-2000:]
    found = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    found["stdout"], found["returncode"] = result.stdout, result.returncode
    return found


def statuses(found: dict) -> dict[str, str]:
    return {check["id"].split("/")[-1]: check["status"] for check in found["checks"]}


def test_a_hermes_shaped_class_certifies_with_a_rules_file(tmp_path: Path) -> None:
    found = run(tmp_path, "ShapedStore", "--hermes-rules", RULES)
    assert found["returncode"] == 0, found["stdout"][-2000:]
    assert set(statuses(found).values()) == {"passed"}, statuses(found)
    assert "directory from constructor argument 'memory_dir'" in found["stdout"]
    assert found["run"]["name"].endswith("ShapedStore (--hermes-class)")
    assert found["run"]["features"] == ["batch", "core"]


def test_an_unmapped_refusal_is_an_adapter_gap_that_names_it(tmp_path: Path) -> None:
    # GermanStore says "no match" in German: without a rule for it, the example that needs it
    # is not verified, with the text, and nothing is failed or guessed.
    found = run(tmp_path / "without", "GermanStore", "--hermes-rules", RULES)
    assert found["returncode"] == 0, found["stdout"][-2000:]
    check = next(c for c in found["checks"] if c["id"].endswith("match-no-candidate"))
    assert check["status"] == "skipped" and check["kind"] == "unverified", check
    assert "ADAPTER GAP" in check["message"] and "Kein Eintrag passt" in check["message"]
    assert "Kein Eintrag passt" in found["stdout"]
    mapped = run(tmp_path / "with", "GermanStore", "--hermes-rules", GERMAN_RULES)
    assert set(statuses(mapped).values()) == {"passed"}, statuses(mapped)


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("ProfileStore", "directory from module function get_memory_dir()"),
        ("AttributeStore", "directory from attribute 'base_path'"),
    ],
)
def test_the_directory_is_found_where_the_class_takes_it(
    tmp_path: Path, target: str, said: str
) -> None:
    found = run(
        tmp_path,
        target,
        "--hermes-rules",
        RULES,
        select="remove-deletes-one-entry or match-no-candidate",
    )
    assert said in found["stdout"]
    assert set(statuses(found).values()) == {"passed"}, statuses(found)


def test_the_per_port_hooks(tmp_path: Path) -> None:
    # A snapshot method of the port's own name, and a method its agent calls at each turn.
    snapshot = run(tmp_path / "block", "BlockStore", "--hermes-snapshot", "render_block",
                   select="snap-exact-rendering or snap-headers")  # fmt: skip
    assert set(statuses(snapshot).values()) == {"passed"}, statuses(snapshot)
    turns = run(tmp_path / "turns", "TurnStore", "--hermes-between", "start_turn",
                "--hermes-rules", RULES)  # fmt: skip
    assert set(statuses(turns).values()) == {"passed"}, statuses(turns)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([f"{SHAPED}:ReadOnlyStore"], "is not Hermes-shaped: it has no add()"),
        (["no_such_module_here:Store"], "cannot import 'no_such_module_here'"),
        (["missing/store.py:Store"], "missing/store.py"),
        ([f"{SHAPED}:NoSuchClass"], "has no class 'NoSuchClass'"),
        (["ShapedStore"], "takes MODULE:CLASS or PATH.py:CLASS"),
        ([f"{SHAPED}:ShapedStore", "--hermes-rules", "tests/data/zoo-consequences.json"],
         "expected 'PATTERN -> CODE'"),
        ([f"{SHAPED}:ShapedStore", "--hermes-snapshot", "render_block"],
         "has no snapshot method render_block()"),
        ([f"{SHAPED}:ShapedStore", "--hermes-between", "start_turn"],
         "has no method start_turn()"),
        ([f"{TWO_FILES}:NeedsClientStore"],
         "its constructor needs 'client', which memspec cannot fill"),
    ],
)  # fmt: skip
def test_a_class_or_file_that_will_not_do_gets_one_line(args: list[str], said: str) -> None:
    result = certify("--hermes-class", *args, timeout=120)
    assert result.returncode == 2, result.stdout[-1000:] + result.stderr[-1000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_class_of_another_shape_certifies_with_no_glue(tmp_path: Path) -> None:
    """agent-kai's shape: two file paths, typed result objects, a target-less snapshot."""
    directory = tmp_path / "report"
    select = f"{MATCHING} or snap-exact-rendering or snap-headers or remove-deletes-one-entry"
    result = certify("--hermes-class", f"{TWO_FILES}:TwoFileStore", "--hermes-rules", RULES,
                     "--profile", "smoke", "-k", select, "--report", str(directory),
                     "-q")  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "constructor arguments 'memory_path' (MEMORY.md) and 'user_path' (USER.md)" in (
        result.stdout
    )
    assert "snapshot snapshot_for_prompt();" in result.stdout
    found = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    assert len(statuses(found)) >= 6 and set(statuses(found).values()) == {"passed"}, found


def test_a_typed_result_reads_as_hermes_result_dict() -> None:
    from tests.backends.hermes_two_files import MemoryResult

    refused = MemoryResult(False, error="No entry matched 'x'.", usage="1% — 9/2,200")
    assert classify(refused, ()) == {
        "ok": False, "code": "E_NOMATCH", "message": "No entry matched 'x'.",
        "usage": "1% — 9/2,200",
    }  # fmt: skip
    assert classify(MemoryResult(True, message="Done."), ())["code"] == "OK"
    with pytest.raises(AdapterGap, match="answered a str, not a result dict"):
        classify("Done.", ())


def test_hermes_options_need_the_class() -> None:
    result = certify("--backend", f"{SHAPED}:ShapedStore", "--hermes-rules", RULES, timeout=120)
    assert result.returncode == 2
    assert "need --hermes-class" in result.stderr


def test_rules_file_lines(tmp_path: Path) -> None:
    rules = tmp_path / "port.rules"
    rules.write_text("# comment\n\n^Nope: -> E_NOMATCH\n^Zu viel\\b ->  E_LIMIT \n", "utf-8")
    assert parse_rules(rules) == (("^Nope:", "E_NOMATCH"), ("^Zu viel\\b", "E_LIMIT"))
    for text, said in [
        ("^x -> OK\n", "OK is not a refusal code"),
        ("^x -> E_NOPE\n", "E_NOPE is not a refusal code"),
        ("(unclosed -> E_NOMATCH\n", "not a regular expression"),
        ("E_NOMATCH\n", "expected 'PATTERN -> CODE'"),
    ]:
        rules.write_text(text, "utf-8")
        with pytest.raises(UsageError, match=said):
            parse_rules(rules)
    with pytest.raises(UsageError, match="cannot read the rules file"):
        parse_rules(tmp_path / "missing.rules")


def test_answers_are_read_rules_first_then_hermes_table() -> None:
    rules = (("^Kein Eintrag", "E_NOMATCH"),)
    assert classify({"success": False, "error": "Kein Eintrag passt"}, rules)["code"] == "E_NOMATCH"
    assert classify({"success": False, "error": "No entry matched 'x'."}, ())["code"] == "E_NOMATCH"
    ok = classify({"success": True, "message": "Done.", "drift_backup": "/r/MEMORY.md.bak"}, ())
    assert ok == {"ok": True, "code": "OK", "message": "Done.", "backup": "/r/MEMORY.md.bak"}
    with pytest.raises(AdapterGap, match="Kein Eintrag passt"):
        classify({"success": False, "error": "Kein Eintrag passt"}, ())
    with pytest.raises(AdapterGap, match="not a result dict"):
        classify("OK", ())


def test_only_observed_features_are_claimed() -> None:
    # No _file_lock, no _write_file, no scan in add: core and batch alone.
    assert store_features(ShapedStore) == ["core", "batch"]


def test_the_same_from_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parents[2])
    result = memspec.certify(
        hermes_class=f"{SHAPED}:GermanStore",
        hermes_rules=GERMAN_RULES,
        profile="smoke",
        select="match-no-candidate",
        report=tmp_path / "report",
    )
    assert result.ok and result.counts["passed"] == 1, result.summary
    with pytest.raises(UsageError, match="give one backend"):
        memspec.certify("tests.backends.first_attempt:open_store", hermes_class=f"{SHAPED}:X")


HEADER_CLAUSES = {"SNAP-4", "SNAP-5", "SNAP-6", "SNAP-7"}
"""The clauses of a block's header: its shape (SNAP-4), its title and figures (SNAP-5 to
SNAP-7)."""

BODY_EXAMPLES = (
    "limit-counts-code-points or limit-per-target or remove-last-entry-empties-file or "
    "snap-frozen-until-load or snap-empty-target-is-null or snap-per-session or "
    "scan-placeholder-advice-followed or scan-blocked-entry-does-not-block-writes"
)
"""Examples whose snapshots a header in the port's own words used to misjudge as their body's
(LIMIT-1, LIMIT-6, REMOVE-2, SNAP-1, SNAP-3, SNAP-10, SCAN-7, SCAN-9)."""


def test_a_header_in_the_ports_own_words_fails_the_header_clauses_alone(tmp_path: Path) -> None:
    # ChineseHeaderStore heads its block with one line of its own, in Chinese, without bars:
    # its entries are judged as entries, and only the header's clauses fail
    found = run(tmp_path, "ChineseHeaderStore", "--hermes-rules", RULES, select=BODY_EXAMPLES)
    checks = found["checks"]
    assert len(checks) == 8, [check["id"] for check in checks]
    blamed = {
        failure["clause"] or check["blamed"]
        for check in checks
        if check["status"] == "failed"
        for failure in check["failures"] or [{"clause": check["blamed"]}]
    }
    assert blamed and blamed <= HEADER_CLAUSES, blamed
    failing = {row["clause"] for row in found["clauses"] if row["status"] == "fail"}
    assert failing <= HEADER_CLAUSES, failing
