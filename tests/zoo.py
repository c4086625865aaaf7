"""The zoo: every backend broken on purpose, one defect each, and how certification catches it.

:data:`ZOO` is the one table of them: the factory, the area of the spec it breaks, the defect,
the clause ids a failure must name, and ``proof``, the example or named check that catches it
fastest. ``tests/power/test_zoo.py`` asserts that each member fails its proof on one of its clauses;
this module, run as a command from the project root, certifies each member with the whole
harness and prints the detection table and the catch rate::

    python -m tests.zoo                      # every member, profile ci (the default), 2 at once
    python -m tests.zoo -k limit -k snap     # members whose factory or area contains a word
    python -m tests.zoo --profile smoke --jobs 1 --out zoo-reports
    python -m tests.zoo -k stuck --checks limit      # only the checks matching a -k expression
    python -m tests.zoo --page docs/results/zoo.md   # also write the results page

A member is *caught* when certification fails a check on one of its clauses; *elsewhere* when
it fails only on other clauses. Time to detection is the sum of the check times, in run order,
up to the first failure; the wall time is the whole certification. Exit status: 0 when the
catch rate reaches :data:`TARGET`, 1 when it does not, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memspec.conformance.core.results_page import PageRun, writable_page
from memspec.conformance.verdict.records import CheckRecord
from memspec.conformance.verdict.standing import blamed_clauses

PROJECT = Path(__file__).resolve().parent.parent
TARGET = 0.95
"""The share of the zoo the default profile must catch on the members' own clauses."""
CERTIFY_TIMEOUT = 1800.0
"""Seconds one member's certification may take before it is reported as timed out."""
AREAS = (
    "format",
    "limits",
    "matching",
    "patch",
    "tool",
    "snapshot",
    "locking",
    "atomicity",
    "durability",
    "drift",
    "scanning",
    "fence",
    "agent",
    "faults",
    "files",
    "contract",
)

NAIVE = "tests.backends.naive_broken"
PROCS = "tests.backends.procs"
AGENT = "tests.backends.agent_broken"
WRAP = "tests.backends.wrappers"
TOOL = "tests.backends.tool_broken"


@dataclass(frozen=True)
class Member:
    """A Member is one backend broken on purpose: where it breaks the spec, and how it is caught.

    ``backend`` is ``MODULE:FACTORY``; ``clauses`` are the ids a failure may name; ``proof`` is
    a SPEC.md example id or a named check id that fails for it on one of those clauses.
    """

    backend: str
    area: str
    defect: str
    clauses: tuple[str, ...]
    proof: str

    @property
    def name(self) -> str:
        """The factory's name, for tables."""
        return self.backend.split(":", 1)[1]


def _m(backend: str, area: str, defect: str, clauses: str, proof: str) -> Member:
    return Member(backend, area, defect, tuple(clauses.split()), proof)


ZOO: tuple[Member, ...] = (
    # format and reading
    _m(f"{NAIVE}:trailing_newline", "format", "ends each file with a line feed",
       "FORMAT-4", "format-writer-is-canonical"),
    _m(f"{WRAP}:splits_on_bare_section", "format", "splits entries on every §",
       "FORMAT-3 FORMAT-5", "properties.delimiter_round_trip"),
    _m(f"{WRAP}:accepts_delimiter_line", "format", "stores content holding a § line (#54403)",
       "ENTRY-3 FORMAT-5", "properties.delimiter_round_trip"),
    _m(f"{WRAP}:keeps_carriage_returns", "format", "holds content's CR LF as given",
       "ENTRY-1", "entry-normalised"),
    _m(f"{WRAP}:keeps_bom_on_read", "format", "glues a BOM to the first entry (#10878)",
       "READ-1", "read-bom-dropped"),
    _m(f"{WRAP}:dedup_on_read", "format", "drops duplicates when reading",
       "READ-5 DUP-4", "read-faithful-order-and-duplicates"),
    _m(f"{WRAP}:raises_on_surrogate", "format", "raises on a lone surrogate",
       "ENTRY-4 CONTRACT-6", "entry-lone-surrogate-refused"),
    # limits and duplicates
    _m(f"{WRAP}:truncates_to_fit", "limits", "cuts content down to fit",
       "LIMIT-2 LIMIT-3", "limit-one-over-refused"),
    _m(f"{WRAP}:counts_bytes", "limits", "counts UTF-8 bytes, not code points",
       "LIMIT-1", "limit-counts-code-points"),
    _m(f"{WRAP}:refuses_exact_limit", "limits", "refuses a result of exactly the limit",
       "LIMIT-2", "limit-exact-boundary-accepted"),
    _m(f"{WRAP}:stuck_when_full", "limits", "refuses removes while over the limit",
       "LIMIT-4 LIMIT-5", "limit-over-limit-file-from-others"),
    _m(f"{WRAP}:shared_limit", "limits", "applies the memory limit to USER.md",
       "LIMIT-6", "limit-per-target"),
    _m(f"{WRAP}:duplicate_refused_when_full", "limits", "refuses a duplicate when full",
       "DUP-2", "dup-add-ok-when-full"),
    _m(f"{WRAP}:case_insensitive_duplicates", "limits", "duplicates ignore case",
       "DUP-3", "dup-whole-entry-exact"),
    # matching, replace, batch
    _m(f"{WRAP}:first_of_ambiguous", "matching", "acts on the first of distinct matches",
       "MATCH-5", "match-ambiguous-distinct"),
    _m(f"{WRAP}:no_exact_preference", "matching", "an exact entry does not win (#109177)",
       "MATCH-3", "match-exact-entry-wins"),
    # patch
    _m(f"{NAIVE}:patches_every_occurrence", "patch", "a repeated span is edited everywhere",
       "PATCH-3", "patch-span-must-be-unique-in-its-entry"),
    _m(f"{NAIVE}:patches_whole_entry", "patch", "a patch replaces the whole entry",
       "PATCH-4", "patch-keeps-the-rest-of-the-entry"),
    _m(f"{NAIVE}:patch_skips_result_scan", "patch", "the patched entry is not scanned",
       "PATCH-6", "patch-result-scanned"),
    # tool
    _m(f"{TOOL}:echoes_blocked_entries", "tool", "a tool result shows an injected entry raw",
       "TOOL-13", "tool-never-shows-threat-text"),
    _m(f"{TOOL}:stale_usage", "tool", "a tool result reports the usage before the write",
       "TOOL-7", "tool-call-is-its-store-operation"),
    _m(f"{TOOL}:replace_says_nothing", "tool", "a replace does not say what it overwrote",
       "TOOL-11", "tool-replace-says-what-it-overwrote"),
    _m(f"{TOOL}:vague_malformed_error", "tool", "a malformed call gets 'invalid arguments'",
       "TOOL-6", "tool-text-not-an-object-answered"),
    _m(f"{TOOL}:raises_on_bad_json", "tool", "argument text that is not JSON raises",
       "TOOL-6", "tool-text-not-an-object-answered"),
    _m(f"{TOOL}:missing_old_text_dead_end", "tool", "a missing old_text lists nothing (#43412)",
       "TOOL-10", "tool-full-store-lists-entries"),
    _m(f"{TOOL}:failed_batch_echoes_store", "tool", "a failed batch echoes the whole store",
       "TOOL-12", "tool-failed-batch-names-its-item"),
    _m(f"{TOOL}:ambiguity_without_matches", "tool", "an ambiguity lists no matches",
       "TOOL-9", "tool-ambiguity-carries-matches"),
    _m(f"{TOOL}:null_is_a_value", "tool", "a null member is refused, not absent",
       "TOOL-4 TOOL-5", "tool-null-is-absent"),
    _m(f"{TOOL}:schema_offers_read", "tool", "the schema lists an action it does not execute",
       "TOOL-2", "tool.schema_is_valid_and_agrees"),
    _m(f"{TOOL}:no_batch_advice", "tool", "the description never mentions operations",
       "TOOL-3", "tool.description_guides_the_model"),
    _m(f"{TOOL}:hides_replace", "tool", "the schema offers patch in place of replace (0.22)",
       "TOOL-2", "tool.schema_is_valid_and_agrees"),
    _m(f"{WRAP}:replaces_substring", "matching", "replaces old_text, not the entry",
       "REPLACE-1", "replace-whole-entry-in-place"),
    _m(f"{WRAP}:replace_moves_to_end", "matching", "replace reorders the entries",
       "REPLACE-4", "replace-keeps-other-entries"),
    _m(f"{WRAP}:batch_item_by_item", "matching", "a batch is not all-or-nothing",
       "BATCH-2", "batch-all-or-nothing"),
    _m(f"{WRAP}:batch_limit_per_item", "matching", "a batch checks the limit per item",
       "BATCH-4", "batch-final-budget"),
    # snapshot
    _m(f"{WRAP}:float_percent", "snapshot", "percent by float division (29/100 → 28%)",
       "SNAP-6", "snap-percent-integer-arithmetic"),
    _m(f"{WRAP}:live_snapshot", "snapshot", "the snapshot follows every write",
       "SNAP-1", "snap-frozen-until-load"),
    _m(f"{WRAP}:plain_numbers", "snapshot", "no thousands separators",
       "SNAP-7", "snap-thousands-separators"),
    _m(f"{WRAP}:empty_block", "snapshot", "an empty target gets a block",
       "SNAP-3", "snap-empty-target-is-null"),
    # locking
    _m(f"{PROCS}:open_no_lock", "locking", "takes no lock",
       "LOCK-1 LOCK-3", "locking.lock_spans_read_to_rename"),
    _m(f"{PROCS}:open_data_file_lock", "locking", "flock on the data file, not a lock file",
       "LOCK-1 LOCK-3", "locking.lock_spans_read_to_rename"),
    _m(f"{PROCS}:open_read_before_lock", "locking", "reads the file before locking",
       "LOCK-2 LOCK-3", "locking.lock_spans_read_to_rename"),
    # twins: deciding on the list held since the last load breaks the same three clauses
    _m(f"{PROCS}:open_loaded_list", "locking", "writes the list loaded at start",
       "LOCK-2 LOCK-3 CONTRACT-7", "lock-no-lost-update"),
    _m(f"{NAIVE}:StaleWithoutLoad", "locking", "mutates its stale view, no re-read",
       "CONTRACT-7 LOCK-2 LOCK-3", "contract.mutation_without_load"),
    _m(f"{PROCS}:open_marker_lock", "locking", "an O_EXCL marker file as the lock",
       "CRASH-3", "crash.kill_at_each_write_step"),
    # atomicity
    _m(f"{NAIVE}:InPlaceWriter", "atomicity", "truncates and writes in place",
       "ATOMIC-1 ATOMIC-2", "atomic.write_replaces_by_rename"),
    _m(f"{NAIVE}:SlowInPlaceWriter", "atomicity", "writes in place, half at a time",
       "ATOMIC-2", "atomic.readers_never_see_a_partial_file"),
    _m(f"{NAIVE}:LazyWriter", "atomicity", "acknowledges before writing",
       "ATOMIC-5", "atomic.acknowledged_is_visible"),
    _m(f"{PROCS}:open_in_place", "atomicity", "in place, entry by entry (crash-safe claimed)",
       "CRASH-1 ATOMIC-1 ATOMIC-2", "crash.kill_at_each_write_step"),
    _m(f"{PROCS}:open_keeps_temps", "atomicity", "never sweeps a crash's temps",
       "CRASH-2", "crash.kill_at_each_write_step"),
    _m(f"{PROCS}:open_fixed_temp", "atomicity", "one fixed temp name for every writer",
       "ATOMIC-1 CRASH-2", "durability.write_protocol_is_durable"),
    # durability
    _m(f"{PROCS}:open_no_temp_fsync", "durability", "renames without fsyncing the temp",
       "ATOMIC-1 CRASH-4 CRASH-5", "durability.write_protocol_is_durable"),
    _m(f"{PROCS}:open_unflushed_fsync", "durability", "fsyncs before flushing its buffer",
       "ATOMIC-1 CRASH-4 CRASH-5", "durability.write_protocol_is_durable"),
    _m(f"{PROCS}:open_no_dir_fsync", "durability", "never fsyncs the directory",
       "ATOMIC-3 CRASH-5", "durability.write_protocol_is_durable"),
    _m(f"{PROCS}:open_dir_sync_error_is_io", "durability", "E_IO when the directory sync fails",
       "ATOMIC-3", "faults.failed_dir_sync_is_acknowledged"),
    # drift
    _m(f"{WRAP}:raw_bytes_drift_guard", "drift", "cosmetic edits refused as drift (#61523)",
       "DRIFT-1", "drift_properties.external_edits_are_kept"),
    _m(f"{WRAP}:rewrites_without_backup", "drift", "cuts a foreign file, no backup (#26045)",
       "DRIFT-2 DRIFT-5", "drift_properties.external_edits_are_kept"),
    _m(f"{NAIVE}:NoRewriteBackup", "drift", "rewrites others' bytes unsaved (#56464)",
       "DRIFT-5", "drift.external_bytes_survive_rewrite"),
    _m(f"{NAIVE}:FixedNameBackup", "drift", "one backup name, overwritten",
       "DRIFT-4 DRIFT-5", "drift.external_bytes_survive_rewrite"),
    _m(f"{NAIVE}:TimestampBackup", "drift", "backups named by time, duplicated",
       "DRIFT-4 DRIFT-5", "drift.external_bytes_survive_rewrite"),
    _m(f"{NAIVE}:overwrites_taken_backup", "drift", "overwrites a taken backup name",
       "DRIFT-4", "drift.taken_backup_name_is_kept"),
    _m(f"{NAIVE}:refuses_repair_on_foreign", "drift", "a foreign file refuses even a remove",
       "DRIFT-7 DRIFT-2", "drift-limit-lowered-below-the-file"),
    _m(f"{NAIVE}:rewrites_foreign_without_backup", "drift", "repairs a foreign file unsaved",
       "DRIFT-2 DRIFT-5", "recovery.lowered_limit_is_recoverable"),
    _m(f"{NAIVE}:backup_not_named", "drift", "an OK never names its backup",
       "DRIFT-5 DRIFT-2", "drift.external_bytes_survive_rewrite"),
    _m(f"{NAIVE}:no_drift_guard", "drift", "no drift guard, none claimed (#26045)",
       "DRIFT-5", "drift.external_bytes_survive_rewrite"),
    # scanning
    _m(f"{NAIVE}:WindowedScan", "scanning", "scans the first 64 KiB only",
       "SCAN-5", "scan.whole_content_is_scanned"),
    _m(f"{NAIVE}:scans_without_nfkc", "scanning", "no NFKC: full-width text passes",
       "SCAN-3", "scan-nfkc-and-case"),
    _m(f"{NAIVE}:batch_skips_scan", "scanning", "batch items are not scanned (#117944)",
       "BATCH-7 SCAN-1", "batch-items-scanned"),
    _m(f"{NAIVE}:trusts_blocked_prefix", "scanning", "[BLOCKED: skips the scan (#79009)",
       "SCAN-8", "scan-forged-blocked-marker"),
    _m(f"{NAIVE}:no_load_scan", "scanning", "no scan at load",
       "SCAN-6", "scan-load-time-placeholder"),
    # fence
    _m(f"{NAIVE}:SinglePassFence", "fence", "one stripping pass (#108964)",
       "FENCE-3", "fence.sanitising_reaches_fixed_point"),
    _m(f"{NAIVE}:GivesUpFence", "fence", "gives up after eight passes",
       "FENCE-3", "fence.sanitising_reaches_fixed_point"),
    _m(f"{NAIVE}:NearJoinsFence", "fence", "looks again only near its first removal",
       "FENCE-3", "fence.sanitising_reaches_fixed_point"),
    _m(f"{NAIVE}:CaseSensitiveFence", "fence", "strips undisguised tags only",
       "FENCE-2", "fence.disguised_tags_are_removed"),
    _m(f"{NAIVE}:KeepsForgedNotes", "fence", "keeps forged system notes",
       "FENCE-4", "fence.forged_notes_are_removed"),
    _m(f"{NAIVE}:UnstrippedFence", "fence", "frames unstripped text",
       "FENCE-1", "fence.frame_is_exact"),
    # agent
    _m(f"{AGENT}:joined_by_one_newline", "agent", "prompt parts joined by one line feed",
       "AGENT-1", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:rebuilt_every_turn", "agent", "prompt rebuilt at every turn",
       "AGENT-2", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:live_state_in_the_prompt", "agent", "a count of turns in the prompt",
       "AGENT-2", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:frozen_forever", "agent", "rebuild points keep the first load's blocks",
       "AGENT-3", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:sends_only_the_current_message", "agent", "API call drops the earlier history",
       "AGENT-4", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:forgets_replies", "agent", "history keeps no replies",
       "AGENT-5", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:two_prefetches_per_turn", "agent", "two prefetches per turn",
       "AGENT-6", "agent.failing_providers_are_isolated"),
    _m(f"{AGENT}:refuses_what_it_claims", "agent", "claims agent, answers E_UNSUPPORTED",
       "AGENT-7", "agent.unsupported_without_the_feature"),
    _m(f"{AGENT}:stores_the_block", "agent", "recalled block stored in the history",
       "FENCE-6", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:block_in_the_system_prompt", "agent", "recalled block in the system prompt",
       "FENCE-6", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:resends_with_the_current_block", "agent", "earlier messages get this turn's block",
       "FENCE-6", "agent.prompt_is_frozen_between_rebuild_points"),
    _m(f"{AGENT}:builtin_dropped_on_failure", "agent", "built-in blocks dropped on failure",
       "PROV-1", "agent.failing_providers_are_isolated"),
    _m(f"{AGENT}:second_provider_replaces_the_first", "agent", "a second provider replaces",
       "PROV-2", "agent.one_external_provider"),
    _m(f"{AGENT}:raising_provider_breaks_the_turn", "agent", "a raising provider breaks the turn",
       "PROV-3", "agent.failing_providers_are_isolated"),
    _m(f"{AGENT}:non_string_passed_through", "agent", "non-string recall sent as text",
       "PROV-3", "agent.failing_providers_are_isolated"),
    _m(f"{AGENT}:unbounded_hang", "agent", "a hanging prefetch is waited for",
       "PROV-4", "agent.failing_providers_are_isolated"),
    _m(f"{AGENT}:shadowing_tools", "agent", "a provider tool named memory is offered",
       "PROV-5", "agent.one_external_provider"),
    # faults
    _m(f"{NAIVE}:UnreadableAsEmpty", "faults", "an unreadable file reads as empty",
       "READ-7", "read.unreadable_file_is_not_empty"),
    _m(f"{PROCS}:open_eio_as_empty", "faults", "EIO on read reads as empty",
       "READ-7", "faults.read_errors_are_not_empty"),
    _m(f"{PROCS}:open_ok_on_write_error", "faults", "answers OK when the write failed",
       "ATOMIC-4", "faults.failed_write_keeps_old_file"),
    _m(f"{PROCS}:open_keeps_failed_temp", "faults", "leaves its temp when the write fails",
       "ATOMIC-4", "faults.failed_write_keeps_old_file"),
    # files
    _m(f"{NAIVE}:UmaskModes", "files", "lets the umask decide modes",
       "FILES-1", "files.created_files_are_private"),
    _m(f"{NAIVE}:ModeReset", "files", "rewrites reset the mode (#22889)",
       "FILES-2", "files.rewrite_keeps_the_mode"),
    _m(f"{NAIVE}:FollowsLockLink", "files", "follows a symlinked lock file",
       "FILES-3", "files.symlinked_lock_is_refused"),
    _m(f"{NAIVE}:ReplacesDataLink", "files", "replaces a symlinked data file",
       "FILES-4", "files.symlinked_data_file_is_kept"),
    _m(f"{NAIVE}:LeavesTemps", "files", "a temp file left at every write",
       "FILES-5 CONTRACT-11", "files.file_count_stays_bounded"),
    _m(f"{NAIVE}:LockBesideRoot", "files", "lock files outside the root",
       "FILES-5 CONTRACT-1", "files.nothing_outside_root"),
    # the contract
    _m(f"{NAIVE}:TupleEntries", "contract", "entries answered as a tuple with None",
       "CONTRACT-2", "contract.answers_have_contract_shapes"),
    _m(f"{NAIVE}:BadOptionalFields", "contract", "usage a number, duplicate a string",
       "CONTRACT-2", "contract.answers_have_contract_shapes"),
    _m(f"{NAIVE}:UnknownFeature", "contract", "claims an unknown feature",
       "CONTRACT-19", "contract.claimed_features_are_known"),
    _m(f"{WRAP}:misnamed_core", "contract", "claims Core, not core: all core checks skip",
       "CONTRACT-19", "contract.claimed_features_are_known"),
    _m(f"{WRAP}:raises_on_add", "contract", "raises out of add",
       "CONTRACT-6", "entry-non-string-invalid"),
)  # fmt: skip
"""Every zoo member: every defect of ``tests/backends/`` but these, left out on purpose: the
stores of ``wrappers`` that misbehave for the harness's own tests (``hangs_on_add`` and
``hangs_on_close`` make every call wait for the timeout; ``thread_bound``, ``core_only`` and
``factory_raises``: the transport and plugin tests cover them) or take a choice the spec leaves
open (``refuses_emptying_batch``, ``stricter_scanner``), and the JSON Lines servers of
``jsonl_naive`` and ``protocol_faults`` (the protocol, proven in the transport and power
tests)."""


CONSEQUENCES = PROJECT / "tests" / "data" / "zoo-consequences.json"
"""Why a member fails clauses beyond its own, by member name: the consequences of its one
defect. Read when the page is rendered (:func:`consequences`)."""


def consequences() -> dict[str, str]:
    """Returns :data:`CONSEQUENCES`' explanations ({} when the file is missing)."""
    try:
        return dict(json.loads(CONSEQUENCES.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {}


# --- detection --------------------------------------------------------------------------------


@dataclass
class Detection:
    """What certification of one member found: the failed checks in run order, and times."""

    member: Member
    status: int
    failures: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    to_first_failure: float | None = None
    wall: float = 0.0
    note: str = ""

    @property
    def named(self) -> list[str]:
        """The clause ids the failures name, in run order, without repeats."""
        return list(dict.fromkeys(c for _, clauses in self.failures for c in clauses))

    @property
    def beyond(self) -> list[str]:
        """The clauses the failures name beyond the member's own, in run order."""
        return [clause for clause in self.named if clause not in self.member.clauses]

    @property
    def caught(self) -> bool:
        """Whether a failure names one of the member's clauses."""
        return bool(set(self.named) & set(self.member.clauses))

    @property
    def verdict(self) -> str:
        """``caught``, ``elsewhere`` (failed on other clauses only) or ``missed``."""
        return "caught" if self.caught else "elsewhere" if self.failures else "missed"


def read_detection(member: Member, report: Path, status: int, wall: float) -> Detection:
    """Returns the detection a finished certification wrote to ``report``."""
    detection = Detection(member, status, wall=wall)
    try:
        records = json.loads((report / "report.json").read_text(encoding="utf-8"))["checks"]
        cases = list(ElementTree.parse(report / "junit.xml").getroot().iter("testcase"))
    except (OSError, ValueError, KeyError, ElementTree.ParseError) as error:
        detection.note = f"no report: {error}"
        return detection
    by_id = {record["id"]: record for record in records}
    elapsed = 0.0
    for case in cases:
        elapsed += float(case.get("time", "0") or 0)
        check_id = case.get("name", "").split("[", 1)[-1].rstrip("]")
        record = by_id.get(check_id)
        if record is None or record["status"] != "failed" or record.get("kind") == "harness-error":
            continue
        detection.failures.append((check_id, blamed_clauses(CheckRecord.from_json(record))))
        if detection.to_first_failure is None:
            detection.to_first_failure = elapsed
    return detection


def certify_member(
    member: Member, profile: str, out: Path | None, checks: str | None = None
) -> Detection:
    """Certifies one member in its own ``memspec certify`` process and reads its report
    (``checks``: only the checks matching this ``-k`` expression)."""
    with tempfile.TemporaryDirectory(prefix="memspec-zoo-") as scratch:
        report = (out / member.name) if out else Path(scratch, "report")
        shutil.rmtree(report, ignore_errors=True)  # an earlier run's report is not this one's
        command = [sys.executable, "-m", "memspec.conformance", "certify", "--backend"]
        command += [member.backend, "--profile", profile, "--report", str(report), "-q"]
        command += ["-k", checks] if checks else []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), *_pythonpath()])}
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, cwd=PROJECT, env=env, capture_output=True, timeout=CERTIFY_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            wall = time.monotonic() - started
            detection = read_detection(member, report, -1, wall)
            detection.note = f"certification timed out after {CERTIFY_TIMEOUT:g} s"
            return detection
        detection = read_detection(member, report, done.returncode, time.monotonic() - started)
        if done.returncode not in (0, 1):
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
            detection.note = f"certify exited {done.returncode}: {' '.join(tail)}"
        return detection


def _pythonpath() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def select(members: Sequence[Member], words: Sequence[str]) -> list[Member]:
    """The members whose factory or area contains one of ``words`` (all when none)."""
    if not words:
        return list(members)
    return [m for m in members if any(w.lower() in f"{m.backend} {m.area}".lower() for w in words)]


# --- rendering --------------------------------------------------------------------------------


def catch_rate(detections: Sequence[Detection]) -> float:
    """The share of members caught on their own clauses."""
    return sum(d.caught for d in detections) / len(detections) if detections else 0.0


def render_table(detections: Sequence[Detection], profile: str) -> str:
    """Returns the detection table (Markdown) and the catch rate line."""
    lines = [
        "| backend | area | defect | verdict | failed checks | clauses named | beyond own "
        "| first failure | to detection | certify |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in detections:
        first = d.failures[0][0] if d.failures else "—"
        expected = set(d.member.clauses)
        named = ", ".join(f"**{c}**" if c in expected else c for c in d.named[:6])
        more = f" (+{len(d.named) - 6})" if len(d.named) > 6 else ""
        to_first = f"{d.to_first_failure:.1f} s" if d.to_first_failure is not None else "—"
        verdict = d.verdict + (f" ({d.note})" if d.note else "")
        lines.append(
            f"| `{d.member.name}` | {d.member.area} | {d.member.defect} | {verdict} "
            f"| {len(d.failures)} | {named or '—'}{more} | {len(d.beyond)} | `{first}` "
            f"| {to_first} | {d.wall:.0f} s |"
        )
    caught = sum(d.caught for d in detections)
    failed = sum(bool(d.failures) for d in detections)
    lines.append("")
    lines.append(
        f"caught on their own clauses: {caught}/{len(detections)} "
        f"({100 * catch_rate(detections):.1f} %); failed certification: {failed}/"
        f"{len(detections)}; profile {profile}"
    )
    return "\n".join(lines)


def render_beyond(detections: Sequence[Detection]) -> str:
    """Returns the clauses each member fails beyond its own, with why (:func:`consequences`),
    and the total: each is a consequence of the member's one defect or a false verdict."""
    beyond = [d for d in detections if d.beyond]
    total = sum(len(d.beyond) for d in detections)
    explained = consequences()
    lines = [
        f"{total} clause verdicts beyond the members' own over {len(detections)} members; "
        f"{len(detections) - len(beyond)} members fail nothing beyond their own.",
        "",
        "| backend | beyond own | why |",
        "|---|---|---|",
    ]
    for d in beyond:
        why = explained.get(d.member.name, "**not explained**")
        lines.append(f"| `{d.member.name}` | {', '.join(d.beyond)} | {why} |")
    return "\n".join(lines)


def render_areas(records: Sequence[dict[str, Any]]) -> str:
    """Returns the time to detection per area (Markdown) and its summary line, from records
    with ``area``, ``wall`` and ``to_first_failure`` (as ``--json`` writes them)."""
    times = sorted(r["to_first_failure"] for r in records if r.get("to_first_failure") is not None)
    walls = [r["wall"] for r in records]
    by_area: dict[str, list[float]] = {}
    for r in records:
        if r.get("to_first_failure") is not None:
            by_area.setdefault(r["area"], []).append(r["to_first_failure"])
    lines = ["| area | members | median time to detection | slowest |", "|---|---|---|---|"]
    for area, found in sorted(by_area.items()):
        lines.append(
            f"| {area} | {len(found)} | {statistics.median(found):.1f} s | {max(found):.1f} s |"
        )
    if times:
        lines += [
            "",
            f"time to detection over {len(times)} detected members: median "
            f"{statistics.median(times):.1f} s, slowest {times[-1]:.1f} s; certification wall "
            f"time median {statistics.median(walls):.0f} s",
        ]
    return "\n".join(lines)


def render_page(detections: Sequence[Detection], profile: str) -> str:
    """Returns the body of the zoo's results page: the catch rate, the detection table and the
    time to detection per area."""
    caught = sum(d.caught for d in detections)
    return "\n".join(
        [
            f"{len(detections)} backends broken on purpose (`tests/zoo.py`), each certified with "
            f"the whole harness at profile `{profile}`: **{caught} of {len(detections)} "
            f"({100 * catch_rate(detections):.1f} %) caught on their own clauses**.",
            "",
            "A member is *caught* when certification fails a check on one of its own clauses "
            '(bold in the table), *elsewhere* when it fails only on other clauses. "To '
            'detection" adds the check times in run order up to the first failure; "certify" '
            "is the whole certification's wall time.",
            "",
            "## Detection per member",
            "",
            render_table(detections, profile),
            "",
            "## Clauses failed beyond a member's own",
            "",
            "Each member breaks one rule on purpose; a clause it fails beyond its own is a true "
            "consequence of that one defect (explained here) or a false verdict (a bug of "
            "memspec's).",
            "",
            render_beyond(detections),
            "",
            "## Time to detection per area",
            "",
            render_areas([_as_json(d) for d in detections]),
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m tests.zoo``."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.zoo", description="certify every zoo member; print what caught it"
    )
    parser.add_argument("--profile", default="ci", choices=("smoke", "ci", "thorough"))
    parser.add_argument(
        "--jobs", type=int, default=2, metavar="N", help="members certified at once (default 2)"
    )
    parser.add_argument(
        "-k", dest="words", action="append", default=[], metavar="WORD",
        help="only members whose factory or area contains WORD (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--checks", metavar="EXPR", help="certify only the checks matching this -k expression"
    )
    parser.add_argument("--out", metavar="DIR", help="keep each member's report under DIR/NAME")
    parser.add_argument("--json", metavar="FILE", help="also write the detections as JSON")
    parser.add_argument(
        "--page", metavar="FILE", help="also write the results page (docs/results/zoo.md)"
    )
    parser.add_argument(
        "--from-json",
        metavar="FILE",
        action="append",
        help="certify nothing: read the detections an earlier --json wrote (to render the page "
        "again after tests/data/zoo-consequences.json changed); repeatable, a later file's "
        "member replacing an earlier's (a member certified again after a fix)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status."""
    args = build_parser().parse_args(argv)
    run = PageRun.start("python -m tests.zoo", argv)
    if args.jobs < 1:
        print(f"python -m tests.zoo: error: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    members = select(ZOO, args.words)
    if not members:
        print(f"python -m tests.zoo: error: no member matches {args.words}", file=sys.stderr)
        return 2
    if args.json and not Path(args.json).absolute().parent.is_dir():
        print(f"python -m tests.zoo: error: --json {args.json}: no such directory", file=sys.stderr)
        return 2
    if args.page and writable_page(args.page):
        print(f"python -m tests.zoo: error: {writable_page(args.page)}", file=sys.stderr)
        return 2
    out = Path(args.out).absolute() if args.out else None
    if args.from_json:
        try:
            detections = read_detections([Path(name) for name in args.from_json], members)
        except (OSError, ValueError, KeyError) as error:
            print(f"python -m tests.zoo: error: --from-json: {error}", file=sys.stderr)
            return 2
    else:
        detections = certify_members(members, args.profile, args.jobs, out, args.checks)
    print(render_table(detections, args.profile))
    if args.json:
        Path(args.json).write_text(
            json.dumps([_as_json(d) for d in detections], indent=1) + "\n", encoding="utf-8"
        )
    if args.page:
        title = "The zoo: backends broken on purpose"
        print(f"page: {run.write(args.page, title, render_page(detections, args.profile))}")
    return 0 if catch_rate(detections) >= TARGET else 1


def certify_members(
    members: Sequence[Member], profile: str, jobs: int, out: Path | None, checks: str | None
) -> list[Detection]:
    """Certifies ``members``, ``jobs`` at once, saying each verdict as it comes."""
    print(f"certifying {len(members)} zoo members, profile {profile}, {jobs} at once")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = [pool.submit(certify_member, m, profile, out, checks) for m in members]
        detections = []
        for job in running:
            detections.append(job.result())
            d = detections[-1]
            print(f"  {d.member.name}: {d.verdict} in {d.wall:.0f} s", flush=True)
    return detections


def read_detections(paths: Sequence[Path], members: Sequence[Member]) -> list[Detection]:
    """Returns the detections of ``members`` that earlier ``--json`` runs wrote to ``paths``, a
    later file's detection of a member replacing an earlier's (raises ValueError naming a
    member none holds)."""
    saved: dict[str, dict[str, Any]] = {}
    for path in paths:
        items = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get("backend"), str) for item in items
        ):
            raise ValueError(f"{path} is not a list of detections, as --json writes them")
        saved.update((item["backend"], item) for item in items)
    detections = []
    for member in members:
        if member.backend not in saved:
            raise ValueError(f"{', '.join(map(str, paths))} hold no detection of {member.backend}")
        item = saved[member.backend]
        detection = Detection(member, item["status"], wall=item["wall"], note=item["note"])
        detection.failures = [(check, tuple(clauses)) for check, clauses in item["failures"]]
        detection.to_first_failure = item["to_first_failure"]
        detections.append(detection)
    return detections


def _as_json(d: Detection) -> dict[str, Any]:
    return {
        "backend": d.member.backend,
        "area": d.member.area,
        "clauses": list(d.member.clauses),
        "verdict": d.verdict,
        "failures": [[check, list(clauses)] for check, clauses in d.failures],
        "to_first_failure": d.to_first_failure,
        "wall": round(d.wall, 2),
        "status": d.status,
        "note": d.note,
    }


if __name__ == "__main__":
    sys.exit(main())
