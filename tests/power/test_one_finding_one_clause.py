"""One finding, one clause: a backend broken in one way fails the clause of that way, not every
clause the check that caught it cites (a fence tag left in the recalled text is FENCE-2's, not
also FENCE-5's; a wrong frame FENCE-1's, not also CONTRACT-10's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.core.waits import CALL_TIMEOUT
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.verdict.findings import Finding, verdict_of
from tests.budgeted import run_in_budget

CHECKS = all_checks()


def blamed(backend: str, check: str, tmp_path: Path) -> set[str]:
    """Runs ``check`` on ``backend`` at ``ci``, each call given certify's default timeout;
    returns every clause its failure blames."""
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    ctx = CheckContext(InProcessBackend(backend, CALL_TIMEOUT), root, scratch, PROFILES["ci"])
    with pytest.raises(Finding) as failed:
        run_in_budget(CHECKS[check], ctx)
    verdict = verdict_of(failed.value)
    return {failure.clause for failure in verdict.failures} or {verdict.blamed}


@pytest.mark.parametrize(
    ("backend", "check", "clause"),
    [
        # a disguised tag left in the text: FENCE-2, though the check also cites FENCE-5
        ("tests.backends.naive_broken:CaseSensitiveFence", "fence.disguised_tags_are_removed",
         "FENCE-2"),
        # a frame of unstripped text: FENCE-1, though the check also cites CONTRACT-10
        ("tests.backends.naive_broken:UnstrippedFence", "fence.frame_is_exact", "FENCE-1"),
        # a forged note kept: FENCE-4, not FENCE-5
        ("tests.backends.naive_broken:KeepsForgedNotes", "fence.forged_notes_are_removed",
         "FENCE-4"),
        # a marker lock a crash left holds the next session until it times out: CRASH-3, not
        # CONTRACT-6 (the hang is what the crash left, not the backend's at large)
        ("tests.backends.procs:open_marker_lock", "crashstates.every_crash_state_recovers",
         "CRASH-3"),
        ("tests.backends.procs:open_marker_lock", "files.symlinked_lock_is_refused", "CRASH-3"),
        # a tool that raises on text that is not JSON: TOOL-6 (it never raises), not CONTRACT-6
        ("tests.backends.tool_broken:raises_on_bad_json", "tool.malformed_calls_answered",
         "TOOL-6"),
        # a batch's limit judged item by item refuses where an item's old_text matches nothing:
        # BATCH-4, not LIMIT-2
        ("tests.backends.wrappers:batch_limit_per_item", "properties.limits_hold", "BATCH-4"),
        # the memory limit on USER.md shows in USER.md's header as that limit, with its percent:
        # LIMIT-6, not SNAP-5 and SNAP-6
        ("tests.backends.wrappers:shared_limit", "properties.snapshot_frozen_until_load",
         "LIMIT-6"),
    ],
)  # fmt: skip
def test_a_backend_broken_one_way_fails_one_clause(
    backend: str, check: str, clause: str, tmp_path: Path
) -> None:
    assert blamed(backend, check, tmp_path) == {clause}


def passes(backend: str, check: str, tmp_path: Path) -> bool:
    """Runs ``check`` on ``backend`` at ``ci``; returns whether it passed (a failure is
    re-raised, so that its clauses show)."""
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    run_in_budget(CHECKS[check], CheckContext(InProcessBackend(backend), root, scratch,
                                              PROFILES["ci"]))  # fmt: skip
    return True


TOOL = "tests.backends.tool_broken"


@pytest.mark.parametrize(
    "check", ["tool.malformed_calls_answered", "tool.results_never_show_threat_text"]
)
def test_a_missing_old_text_that_lists_nothing_fails_tool_10_alone(
    check: str, tmp_path: Path
) -> None:
    # the error names old_text and the action, and the live usage is there: only the listing
    # of the entries is missing (TOOL-10), not also TOOL-6's words or TOOL-7's usage
    assert blamed(f"{TOOL}:missing_old_text_dead_end", check, tmp_path) == {"TOOL-10"}


@pytest.mark.parametrize(
    "check",
    [
        "tool.malformed_calls_answered",
        "tool.results_never_show_threat_text",
        "tool.generated_calls_are_judged",
    ],
)
def test_a_tool_that_hides_replace_fails_only_its_schema(check: str, tmp_path: Path) -> None:
    # its refusal of replace is what its own schema owes an action it does not offer: the error
    # names 'action' and the actions offered (TOOL-6), no entries listed (TOOL-12); the defect
    # is the schema's alone (TOOL-2, tool.schema_is_valid_and_agrees)
    # (tests/power/test_zoo.py proves its schema fails TOOL-2)
    assert passes(f"{TOOL}:hides_replace", check, tmp_path)


@pytest.mark.parametrize(
    "backend",
    [
        # splits entries on every §: the direct add leaves the same entries (FORMAT-3, FORMAT-5)
        "tests.backends.wrappers:splits_on_bare_section",
        # the memory limit on USER.md: the direct add reports the same usage (LIMIT-6)
        "tests.backends.wrappers:shared_limit",
    ],
)
def test_a_store_defect_the_direct_operation_shows_is_not_the_tools(
    backend: str, tmp_path: Path
) -> None:
    # a tool call is its store operation (TOOL-5): where the same request sent as the direct
    # operation on a root in the same state deviates from the model the same way, the deviation
    # is the store's, which its own examples and the state machine judge, not TOOL-5's or TOOL-7's
    assert passes(backend, "tool.generated_calls_are_judged", tmp_path)


def test_a_tool_defect_is_still_the_tools(tmp_path: Path) -> None:
    # a usage from before the write differs from what the direct operation reports: TOOL-7
    assert blamed(f"{TOOL}:stale_usage", "tool.generated_calls_are_judged", tmp_path) == {"TOOL-7"}


@pytest.mark.parametrize(
    ("backend", "clause"),
    [
        # its write-time scan misses full-width text, its load-time scan blocks it: SCAN-3 only
        ("tests.backends.naive_broken:ScansWithoutNfkc", "SCAN-3"),
        # no load-time scan at all: SCAN-6 still
        ("tests.backends.naive_broken:NoLoadScan", "SCAN-6"),
    ],
)
def test_an_attack_accepted_at_write_time_and_blocked_at_load_is_not_scan_6s(
    backend: str, clause: str, tmp_path: Path
) -> None:
    assert blamed(backend, "scan.attack_corpus", tmp_path) == {clause}


@pytest.mark.parametrize(
    "check", ["atomic.write_replaces_by_rename", "contract.mutation_without_load"]
)
@pytest.mark.parametrize(
    "backend",
    ["tests.backends.wrappers:replaces_substring", "tests.backends.wrappers:replace_moves_to_end"],
)
def test_how_a_mutation_is_made_is_not_judged_on_what_it_makes(
    backend: str, check: str, tmp_path: Path
) -> None:
    # a replace that edits a substring, or moves the entry, does the same after a load: the
    # rename check (ATOMIC-1) and the check of a mutation without a load (CONTRACT-7) compare
    # against what the store does after a load, and leave the replace to its examples
    assert passes(backend, check, tmp_path)


def test_a_mutation_without_a_load_that_ignores_the_file_is_still_contract_7s(
    tmp_path: Path,
) -> None:
    stale = "tests.backends.naive_broken:StaleWithoutLoad"
    assert blamed(stale, "contract.mutation_without_load", tmp_path) == {"CONTRACT-7"}
