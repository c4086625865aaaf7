"""Spec v2, issue 15 items 2 and 3, in the spec and the harness's verdicts: no readable state
locks the model out (DRIFT-2, DRIFT-7), the scope of every clause and the data-protecting clauses
are read from SPEC.md, and the conformance level is computed from the clause verdicts.

- The lock-out is impossible in the model and in the reference store: with the limit lowered
  below an entry, removing that entry answers ``OK``, names a byte-exact backup and brings the
  target back within its limit. (The checks and the broken backends are in
  ``tests/power/test_recovery_power.py``; the Node.js backend in
  ``tests/integration/test_recovery_node.py``.)
- No example or check of a data-protecting clause needs a feature, and a malformed scope table
  is a bug in SPEC.md.
- ``conformance_level`` gives ``none``, ``safe``, ``core`` or ``full`` from check records, the
  same way for a report and for a matrix column.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.core.registry import all_checks
from memspec.conformance.hermes.matrix import (
    Column,
    Matrix,
    render_markdown,
    render_timeline_markdown,
    timeline,
)
from memspec.conformance.verdict.records import CheckRecord
from memspec.conformance.verdict.report import clause_matrix, level_of
from memspec.conformance.verdict.standing import (
    LEVELS,
    Blocker,
    Level,
    Standing,
    clause_verdict,
    conformance_level,
    scope_skip,
)
from memspec.reference_impl import open_store
from memspec.spec import codes, model
from memspec.spec.clauses import (
    ClauseSyntaxError,
    gated_core,
    gated_protections,
    parse_clauses,
    table_after,
)
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.document import installed_spec
from memspec.spec.operations import Add, Batch, Remove, Replace
from memspec.spec.rules import decide
from memspec.spec.snapshot import render_snapshot
from memspec.spec.threats import find_threats

CLAUSES = parse_clauses(installed_spec().text)
EXAMPLES = {example.id: example for example in list(installed_spec().examples)}
CHECKS = all_checks()
KEPT = "User prefers tabs"
LONG = "Project notes: the build uses Go 1.22 and a Makefile"
WRITTEN = encode_entries([KEPT, LONG])
"""What a store opened with the default limit writes; 52 code points are over a limit of 40."""

# --- item 2: the model ---------------------------------------------------------------------


def lowered() -> model.State:
    return model.initial_state(40, 30, memory=WRITTEN)


def test_the_model_removes_an_entry_over_a_lowered_limit() -> None:
    outcome, state = model.step(lowered(), Remove("memory", "Project notes"))
    # DRIFT-7: the remove goes through; DRIFT-2: the file as it was is a required backup.
    assert outcome.code == codes.OK
    assert model.disk(state, "memory") == KEPT.encode()
    assert model.backups_of(state, "memory") == {WRITTEN}
    # DRIFT-7: back within its limit.
    assert model.render_from_disk(state, "memory") == render_snapshot(
        "memory", [KEPT], 40, find_threats
    )


@pytest.mark.parametrize(
    ("op", "code", "written"),
    [
        # DRIFT-2: growth, and a change that does not apply, are refused (file state first).
        (Add("memory", "Editor: vim"), codes.E_DRIFT, None),
        (Replace("memory", "tabs", KEPT + " and spaces"), codes.E_DRIFT, None),
        (Remove("memory", "not there"), codes.E_DRIFT, None),
        (Remove("memory", "e"), codes.E_DRIFT, None),
        (Batch("memory", [{"action": "add", "content": "x"}]), codes.E_DRIFT, None),
        # DRIFT-2: a change that applies and does not grow the file goes through.
        (Replace("memory", "Project", "Notes: Go"), codes.OK, (KEPT, "Notes: Go")),
        (Replace("memory", KEPT, "Tabs"), codes.OK, ("Tabs", LONG)),
        (
            Batch(
                "memory",
                [{"action": "remove", "old_text": "Project"}, {"action": "add", "content": "x"}],
            ),
            codes.OK,
            (KEPT, "x"),
        ),
        # DUP-1: an exact duplicate adds nothing, so it is accepted and writes nothing.
        (Add("memory", KEPT), codes.OK, None),
    ],
)
def test_the_rule_on_a_foreign_file(op: Any, code: str, written: Any) -> None:
    outcome, result = decide(op, classify_bytes(WRITTEN, 40), 40)
    assert (outcome.code, result) == (code, written)
    _, state = model.step(lowered(), op)
    # DRIFT-2, DRIFT-3: a refusal or a rewrite keeps the file in a backup; a no-op needs none.
    assert model.backups_of(state, "memory") == ({WRITTEN} if result or not outcome.ok else set())


# --- item 2: the reference store -----------------------------------------------------------


def test_the_reference_names_the_backup_of_a_repair(tmp_path: Path) -> None:
    wide = open_store(tmp_path)
    for content in (KEPT, LONG):
        assert wide.add("memory", content)["code"] == codes.OK
    narrow = open_store(tmp_path, memory_char_limit=40)
    narrow.load()
    answer = narrow.remove("memory", "Project notes")
    # DRIFT-2: OK, naming a byte-exact backup of the file as it was.
    assert answer["code"] == codes.OK
    assert Path(answer["backup"]).read_bytes() == WRITTEN
    narrow.load()
    assert narrow.snapshot("memory") == render_snapshot("memory", [KEPT], 40, find_threats)
    # DRIFT-7: an undecodable file says how a person repairs it.
    (tmp_path / "MEMORY.md").write_bytes(b"\xff")
    refused = narrow.remove("memory", "x")
    assert refused["code"] == codes.E_UNREADABLE and "re-save it as UTF-8" in refused["message"]


# --- item 3: scope and data-protecting clauses -------------------------------------------------


def test_scope_and_data_protecting_clauses_come_from_spec() -> None:
    by_id = {clause.id: clause for clause in CLAUSES}
    assert by_id["BATCH-2"].feature == "batch" and by_id["CRASH-4"].feature == "crash-safe"
    assert by_id["DRIFT-2"].feature == "drift-guard" and by_id["DRIFT-7"].feature is None
    protecting = sorted(clause.id for clause in CLAUSES if clause.protects_data)
    assert protecting == sorted(
        ["ATOMIC-2", "ATOMIC-4", "ATOMIC-5", "CRASH-1", "DRIFT-1", "DRIFT-5", "LIMIT-3",
         "LOCK-2", "LOCK-3", "READ-6", "READ-7", "SNAP-9",
         "PLUGIN-7", "PLUGIN-8", "PLUGIN-19"]  # a provider's (SPEC.md, "Subjects")
    )  # fmt: skip
    assert all(by_id[cid].level == "MUST" and by_id[cid].feature is None for cid in protecting)


def test_no_check_or_example_of_a_data_protecting_clause_needs_a_feature() -> None:
    citers = [(f"example {e.id}", e.clauses, e.features) for e in EXAMPLES.values()]
    citers += [(f"check {c.id}", c.clauses, c.features) for c in CHECKS.values()]
    assert gated_protections(CLAUSES, citers) == []
    # The rule memspec spec --check applies: a gated citation is reported.
    problems = gated_protections(CLAUSES, [("check x.y", ("DRIFT-5",), ("core", "drift-guard"))])
    assert problems == [
        "check x.y cites the data-protecting clause DRIFT-5 but needs drift-guard: a backend "
        "without it would skip the clause"
    ]


def test_every_clause_that_binds_every_backend_is_verifiable_without_a_feature() -> None:
    # A backend that claims only core can verify every clause core needs: REPLACE-2's only
    # example once needed threat-scan, and no such backend could reach core.
    citers = [(f"example {e.id}", e.clauses, e.features) for e in EXAMPLES.values()]
    citers += [(f"check {c.id}", c.clauses, c.features) for c in CHECKS.values()]
    assert gated_core(CLAUSES, citers) == []
    gated = [c for c in citers if "REPLACE-2" not in c[1]]
    gated.append(("example e", ("REPLACE-2",), ("core", "threat-scan")))
    assert gated_core(CLAUSES, gated) == [
        "REPLACE-2 binds every backend, but every example and check citing it needs "
        "threat-scan: a backend without it cannot verify REPLACE-2"
    ]


SCOPE = """
**Scope.** text

| feature | clauses |
|---|---|
| `batch` | ZED-1 |
{extra}

**Data-protecting clauses.** text

| protection | clauses |
|---|---|
| kept | {protecting} |

**ZED-1** (MUST) One.

**ZED-2** (MUST) Two.

**ZED-3** (SHOULD) Three.
"""


@pytest.mark.parametrize(
    ("extra", "protecting", "message"),
    [
        ("| `fence` | ZED-1 |", "ZED-2", "ZED-1 is given two features"),
        ("", "ZED-9", "ZED-9, which is not stated"),
        ("", "ZED-1", "ZED-1 must be a MUST that binds every backend"),
        ("", "ZED-3", "ZED-3 must be a MUST that binds every backend"),
        ("| fence | ZED-2 |", "ZED-2", "a row of the Scope table is malformed"),
    ],
)
def test_a_malformed_scope_is_a_spec_bug(extra: str, protecting: str, message: str) -> None:
    with pytest.raises(ClauseSyntaxError, match=message):
        parse_clauses(SCOPE.format(extra=extra, protecting=protecting))


def test_a_well_formed_scope() -> None:
    parsed = {c.id: c for c in parse_clauses(SCOPE.format(extra="", protecting="ZED-2"))}
    assert (parsed["ZED-1"].feature, parsed["ZED-2"].protects_data) == ("batch", True)
    assert parse_clauses("**ZED-1** (MUST) Alone.")[0].feature is None
    # A table that ends the text ends there.
    last = "x\n**Scope.** t\n\n| feature | clauses |\n|---|---|\n| `batch` | ZED-1 |"
    assert table_after(last, "**Scope.**") == [["`batch`", "ZED-1"]]


# --- item 3: the conformance level -----------------------------------------------------------

EVERYTHING = ("core", "batch", "fence", "multi-process", "crash-safe", "durable", "drift-guard",
              "threat-scan")  # fmt: skip


def records(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    """One passing record per check and example, each named in ``changes`` updated."""
    found = [
        {"id": name, "clauses": list(item.clauses), "features": list(item.features)}
        for name, item in CHECKS.items()
    ] + [{"id": e.id, "clauses": list(e.clauses), "features": list(e.features)}
         for e in EXAMPLES.values()]  # fmt: skip
    for record in found:
        record.update({"status": "passed", "kind": "", "blamed": "", "missing_features": []})
        record.update(changes.get(record["id"].replace(".", "_").replace("-", "_"), {}))
    return found


def skipped_without(feature: str) -> list[dict[str, Any]]:
    """The records of a run where every check needing ``feature`` skipped for lacking it."""
    found = records()
    for record in found:
        if feature in record["features"]:
            record.update(status="skipped", kind="unsupported", missing_features=[feature])
    return found


FAILED = {"status": "failed", "kind": "violation"}


def level_over(found: list[dict[str, Any]]) -> Level:
    """The conformance level of the records ``found``, as ``report.json`` would hold them."""
    return conformance_level(CLAUSES, [CheckRecord.from_json(record) for record in found])


def test_levels_follow_the_clause_verdicts() -> None:
    assert level_over(records()) == Level("full")
    # Without batch claimed: every clause binding every backend still passes.
    level = level_over(skipped_without("batch"))
    assert level.name == "core" and "BATCH-2 needs a feature" in map(str, level.blocked_by)
    # A failed clause of a feature keeps a backend from full only.
    assert level_over(records(scan_whole_content_is_scanned=FAILED)).name == "core"
    # A failed clause binding every backend, not data-protecting: safe.
    level = level_over(records(format_writer_is_canonical=FAILED))
    assert level == Level("safe", (Blocker("FORMAT-4", Standing.FAILS),))
    # A failed data-protecting clause: none, whatever else passes.
    level = level_over(
        records(drift_external_bytes_survive_rewrite={**FAILED, "blamed": "DRIFT-5"})
    )
    assert level.name == "none" and level.blocked_by == (Blocker("DRIFT-5", Standing.FAILS),)
    assert level.headline() == "conformance level: none (safe needs: DRIFT-5 fails)"


def test_a_skip_for_the_transport_holds_no_level_back() -> None:
    skipped = {"status": "skipped", "kind": "unsupported"}
    level = level_over(records(faults_failed_write_keeps_old_file=skipped))
    assert level == Level("full", (), ("ATOMIC-4",))
    assert level.headline().endswith("(not verifiable over this transport: ATOMIC-4)")


def test_a_clause_nothing_verified_holds_its_level_back() -> None:
    stopped = {"status": "failed", "kind": "violation", "blamed": "CRASH-2"}
    others = ("crash.kill_at_each_write_step", "crashstates.crash_states_are_old_or_new")
    found = [r for r in records(crash_kill_at_random_moments=stopped) if r["id"] not in others]
    level = level_over(found)
    assert level.name == "none" and "CRASH-1 not verified" in map(str, level.blocked_by)
    assert level_over([]).name == "none"
    assert [name for name in LEVELS] == ["none", "safe", "core", "full"]
    assert Level("full").next is None and Level("none").next == "safe"


def test_a_clause_of_an_unclaimed_feature_reads_skip() -> None:
    by_id = {clause.id: clause for clause in CLAUSES}
    assert scope_skip(by_id["BATCH-2"], ["core"]) == (
        "binds only a backend that claims batch, not claimed"
    )
    assert scope_skip(by_id["BATCH-2"], EVERYTHING) is None
    assert scope_skip(by_id["DRIFT-5"], ["core"]) is None
    checks = [CheckRecord(**{**r, "message": "", "duration": 0.0}) for r in records()]
    rows = {row.clause: row for row in clause_matrix(CLAUSES, checks, ["core"])}
    assert rows["CRASH-4"].status == "skip" and rows["CRASH-1"].status == "pass"
    assert rows["CONTRACT-15"].status == "n/a"
    assert level_of(checks) == Level("full")


def report_dir(tmp_path: Path, name: str, features: tuple[str, ...], found: list[Any]) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    payload = {"run": {"backend": name, "features": list(features), "profile": "smoke"},
               "checks": found}  # fmt: skip
    (directory / "report.json").write_text(json.dumps(payload), encoding="utf-8")
    return directory


def test_the_matrix_states_each_level(tmp_path: Path) -> None:
    full = Column.load(report_dir(tmp_path, "full", EVERYTHING, records()), "1.0")
    core = Column.load(report_dir(tmp_path, "core", ("core",), skipped_without("batch")), "2.0")
    matrix = Matrix.build([full, core])
    assert [matrix.level(0).name, matrix.level(1).name] == ["full", "core"]
    assert "- **1.0**: level **full**;" in render_markdown(matrix)
    assert clause_verdict("CRASH-4", core.checks, ("core",)).reason == (
        "binds only a backend that claims crash-safe, not claimed"
    )
    sweep = render_timeline_markdown(matrix, timeline(matrix))
    assert "| 2.0 | core |" in sweep
