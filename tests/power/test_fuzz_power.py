"""The property checks of :mod:`memspec.fuzz` can fail, and fail for the right reason.

Each check runs directly (``check.run(CheckContext(...))``, no pytest plugin) at the ``ci``
profile. The reference store passes every property and the state machine; so do stores that take
a choice the spec leaves open (BATCH-8's refusal of an emptying batch, a stricter threat scanner,
a store claiming ``core`` alone). Each backend broken on purpose (``tests/backends/wrappers.py``,
the fence's in ``naive_broken.py``) is caught with an ``AssertionError`` that opens with the
clause id its defect breaks, shows the shrunk example, and ends with a one-command reproduction.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.core.search import plan, search_seed
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.verdict.findings import HarnessError, Violation
from memspec.fuzz.machine import MemoryMachine
from memspec.fuzz.oracle import allowed_answers
from memspec.fuzz.properties import _round_trip_step
from memspec.fuzz.roots import FuzzRoot
from memspec.fuzz.strategies import AddBOM, AppendParagraph, Concatenate
from memspec.spec import model
from memspec.spec.operations import Add
from tests.budgeted import run_in_budget

REFERENCE = "memspec.reference_impl:open_store"
BROKEN = "tests.backends.wrappers"
FUZZ = ("properties", "drift_properties", "machine")
CHECKS = {name: item for name, item in all_checks().items() if name.split(".")[0] in FUZZ}

CAUGHT = [
    (f"{BROKEN}:splits_on_bare_section", "properties.delimiter_round_trip", "FORMAT-5"),
    (f"{BROKEN}:accepts_delimiter_line", "properties.delimiter_round_trip", "ENTRY-3"),
    (f"{BROKEN}:raw_bytes_drift_guard", "drift_properties.external_edits_are_kept", "DRIFT-1"),
    (f"{BROKEN}:rewrites_without_backup", "drift_properties.external_edits_are_kept", "DRIFT-2"),
    # entries lost only where the file was cosmetic: a misread cosmetic file, DRIFT-1's
    (f"{BROKEN}:cosmetic_loses_first_entry", "drift_properties.external_edits_are_kept", "DRIFT-1"),
    ("tests.backends.naive_broken:SinglePassFence", "properties.fence_escape", "FENCE-3"),
    # it strips no note, and no tag but the lower-case one: either is a clause it breaks
    ("tests.backends.naive_broken:CaseSensitiveFence", "properties.fence_escape", "FENCE-2|4"),
    (f"{BROKEN}:raw_bytes_drift_guard", "machine.memory_machine", "DRIFT-1"),
    # an acknowledged add the file does not hold yet: not a file in other bytes (FORMAT-4)
    ("tests.backends.naive_broken:LazyWriter", "machine.memory_machine", "ATOMIC-5"),
    # a session deciding on the copy it loaded, which another session has changed since, is
    # LOCK-2's, not the usage figure's (SNAP-11) or the matching rule's (MATCH-1)
    ("tests.backends.naive_broken:StaleWithoutLoad", "machine.memory_machine", "LOCK-2"),
]
ALLOWED_VARIANTS = [
    (f"{BROKEN}:refuses_emptying_batch", "machine.memory_machine"),
    (f"{BROKEN}:stricter_scanner", "machine.memory_machine"),
    (f"{BROKEN}:stricter_scanner", "drift_properties.external_edits_are_kept"),
    (f"{BROKEN}:core_only", "machine.memory_machine"),
    (f"{BROKEN}:core_only", "properties.delimiter_round_trip"),
]


def run_check(backend: str, check_id: str, tmp_path: Path) -> None:
    """Runs one fuzz check against ``backend`` at the ci profile, on a fresh root."""
    root = tmp_path / "root"
    root.mkdir()
    context = CheckContext(InProcessBackend(backend, 10.0), root, tmp_path, PROFILES["ci"])
    run_in_budget(CHECKS[check_id], context)


def test_every_fuzz_check_is_registered() -> None:
    assert sorted(CHECKS) == [
        "drift_properties.external_edits_are_kept",
        "machine.memory_machine",
        "properties.delimiter_round_trip",
        "properties.fence_escape",
        "properties.limits_hold",
        "properties.snapshot_frozen_until_load",
    ]


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_reference_passes(check_id: str, tmp_path: Path) -> None:
    run_check(REFERENCE, check_id, tmp_path)


@pytest.mark.parametrize(("backend", "check_id"), ALLOWED_VARIANTS)
def test_choices_the_spec_leaves_open_pass(backend: str, check_id: str, tmp_path: Path) -> None:
    run_check(backend, check_id, tmp_path)


@pytest.mark.parametrize(
    ("backend", "check_id", "clause"),
    CAUGHT,
    ids=[f"{backend.split(':')[1]}-{check_id}-{clause}" for backend, check_id, clause in CAUGHT],
)
def test_broken_backend_is_caught(backend: str, check_id: str, clause: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as failure:
        run_check(backend, check_id, tmp_path)
    message = str(failure.value)
    area, numbers = clause.rsplit("-", 1)
    assert message.split(":", 1)[0] in {f"{area}-{n}" for n in numbers.split("|")}, message
    # Hypothesis names the shrunk example "Falsifying example" (older) or "Failing test case",
    # and one of the property's own examples "Falsifying/Failing explicit example".
    assert re.search(r"(Falsifying|Failing) (explicit )?(example|test case):", message), message
    reproduce = f"Reproduce with: memspec certify --backend {backend} -k {check_id}"
    assert message.rstrip().endswith(reproduce), message
    if check_id.startswith("machine."):
        # The state machine prints the shrunk program as replayable calls.
        assert "state = MemoryMachine()" in message and "state.teardown()" in message, message


def _context(
    tmp_path: Path, profile: str, seed: int | None, database: str | None, check_id: str
) -> CheckContext:
    backend = InProcessBackend(REFERENCE, 10.0)
    return CheckContext(
        backend, tmp_path, tmp_path, PROFILES[profile], seed, database, check_id=check_id
    )


def test_ci_runs_derandomized_without_a_database(tmp_path: Path) -> None:
    run = plan(_context(tmp_path, "ci", None, str(tmp_path / "db"), "properties.limits_hold"))
    assert run.settings.derandomize and run.settings.database is None
    # from the seed of the spec version and the check, not from the test's source
    assert run.seed == search_seed("properties.limits_hold")
    assert run.reproduce == (
        f"Reproduce with: memspec certify --backend {REFERENCE} -k properties.limits_hold"
    )


def test_thorough_keeps_its_examples_and_names_the_database(tmp_path: Path) -> None:
    context = _context(tmp_path, "thorough", None, str(tmp_path / "db"), "machine.memory_machine")
    run = plan(context)
    assert not run.settings.derandomize and run.settings.database is not None
    assert run.reproduce.endswith(f"--profile thorough --hypothesis-db {tmp_path / 'db'}")


def test_a_seed_is_exact_and_bypasses_the_database(tmp_path: Path) -> None:
    run = plan(_context(tmp_path, "ci", 7, str(tmp_path / "db"), "properties.fence_escape"))
    assert not run.settings.derandomize and run.settings.database is None and run.seed == 7
    assert run.reproduce.endswith("-k properties.fence_escape --seed 7")
    unseeded = plan(_context(tmp_path, "thorough", None, None, "properties.fence_escape"))
    # Without a database, a randomized run draws a seed and names it.
    assert unseeded.seed is not None and unseeded.reproduce.endswith(f"--seed {unseeded.seed}")


def test_a_property_run_without_its_id_is_a_harness_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="without its id"):
        plan(_context(tmp_path, "ci", None, None, ""))


def test_the_model_round_trips_an_entry_that_begins_with_a_bom() -> None:
    bom = "\ufeff".encode()
    state = model.initial_state(memory=bom + bom + b"User prefers tabs")
    # FORMAT-5: the spec model reads back what it writes (else SpecInconsistency is raised).
    allowed_answers(state, Add("memory", "Editor: vim"), {"core"})


def test_a_patch_result_is_scanned_only_for_a_store_that_scans() -> None:
    """An outside port that claims no threat-scan was failed on PATCH-6 by the state machine: a
    patch removing the black flag of a subdivision flag leaves its tag characters, which the
    model scanned as a threat (SCAN-4) although the store stores text as given (ENTRY-5)."""
    from memspec.spec.operations import Patch

    flag = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    _, state = model.step(model.initial_state(64, 64), Add("memory", f"Flag {flag}"))
    patch = Patch("memory", "\U0001f3f4", "User prefers tabs")
    plain = [a.outcome.code for a in allowed_answers(state, patch, {"core", "patch"})]
    scans = {"core", "patch", "threat-scan"}
    scanning = [a.outcome.code for a in allowed_answers(state, patch, scans)]
    assert "OK" in plain and scanning == ["E_THREAT"]


def test_a_patch_is_not_judged_as_a_whole_entry(tmp_path: Path) -> None:
    """A patch's content replaces a span of an entry: the round trip must not look for it as a
    whole entry (an outside port at thorough was blamed on ENTRY-1 for a correct patch)."""
    from memspec.fuzz.properties import _round_trip_step
    from memspec.fuzz.roots import FuzzRoot

    root = tmp_path / "root"
    root.mkdir()
    context = CheckContext(InProcessBackend(REFERENCE, 10.0), root, tmp_path, PROFILES["ci"])
    with FuzzRoot(context) as world:
        _round_trip_step(world, {"op": "add", "target": "memory", "content": "User prefers tabs"})
        patch = {"op": "patch", "target": "memory", "old_text": "tabs", "content": "spaces"}
        _round_trip_step(world, patch)  # type: ignore[arg-type]
        assert world.entries("a", "memory") == ["User prefers spaces"]


def test_content_the_spec_refuses_is_not_blamed_on_the_limits(tmp_path: Path) -> None:
    """A store that accepts '§' (ENTRY-3's defect) and then reads it back as no entry has lost
    nothing to a limit: the limits property leaves it to ENTRY-3 (a third-party port's LIMIT-3
    was failed this way)."""
    from memspec.fuzz.properties import _limit_step
    from memspec.fuzz.roots import FuzzRoot

    root = tmp_path / "root"
    root.mkdir()
    backend = InProcessBackend(f"{BROKEN}:accepts_delimiter_line", 10.0)
    with FuzzRoot(CheckContext(backend, root, tmp_path, PROFILES["ci"]), {"memory": 40}) as world:
        _limit_step(world, {"op": "add", "target": "memory", "content": "§"}, frozenset())
        assert world.entries("a", "memory") == []  # lost, as ENTRY-3 says it would be


def test_a_difference_the_canonical_file_shows_too_is_not_drift(tmp_path: Path) -> None:
    """A store that cuts content down to fit does so on any file: on a cosmetic one its wrong
    answer is the limit clauses' (the examples judge them), not a misread cosmetic file's
    (DRIFT-1, blamed this way on five zoo members whose defect has nothing to do with drift)."""
    from memspec.fuzz.drift_properties import _drift_step
    from memspec.fuzz.ledger import DriftLedger
    from memspec.fuzz.roots import FuzzRoot

    root = tmp_path / "root"
    root.mkdir()
    backend = InProcessBackend("tests.backends.wrappers:truncates_to_fit", 10.0)
    context = CheckContext(backend, root, tmp_path, PROFILES["ci"])
    with FuzzRoot(context, {"memory": 40}) as world:
        world.put("memory", "\ufeffUser prefers tabs".encode())
        add = {"op": "add", "target": "memory", "content": "x" * 40}
        cut = _drift_step(world, DriftLedger(), add, frozenset({"core"}))  # type: ignore[arg-type]
    assert cut is not None and "the same on the canonical file of its entries" in cut, cut


def replayed_blame(backend: str, tmp_path: Path, program: Callable[[Any], None]) -> str:
    """Returns the clause the state machine blames when it runs ``program`` (steps as the
    machine's failure report prints them) against ``backend``."""
    tmp_path.mkdir()
    context = CheckContext(InProcessBackend(backend, 10.0), tmp_path, tmp_path, PROFILES["ci"])
    machine = type("MemoryMachine", (MemoryMachine,), {"ctx": context, "features": frozenset(
        {"core", "batch", "threat-scan", "drift-guard"})})()  # fmt: skip
    with pytest.raises(AssertionError) as failure:
        try:
            program(machine)
        finally:
            machine.teardown()
    return str(failure.value).split(":", 1)[0]


def test_the_machine_blames_the_rule_a_zoo_member_breaks(tmp_path: Path) -> None:
    # Programs a zoo run's state machine found, each once blamed on another clause.
    twice = Concatenate(("User prefers tabs", "User prefers tabs"), "")
    dropped = replayed_blame(f"{BROKEN}:dedup_on_read", tmp_path / "a", lambda m: (
        m.edit_file(store="memory", edit=twice), m.load(session="a")))  # fmt: skip
    assert dropped == "READ-5"  # was FORMAT-5: a load dropping duplicates
    bom = replayed_blame(f"{BROKEN}:keeps_bom_on_read", tmp_path / "d", lambda m: (
        m.add(content="User prefers tabs", session="a", store="memory"),
        m.edit_file(store="memory", edit=AddBOM()), m.load(session="a")))  # fmt: skip
    assert bom == "READ-1"  # not FORMAT-5: the reading rule the editor's byte order mark tried
    items = [{"action": "add", "content": "User prefers tabs"},
             {"action": "remove", "old_text": "tabs"}]  # fmt: skip
    per_item = replayed_blame(f"{BROKEN}:batch_limit_per_item", tmp_path / "b", lambda m: (
        m.edit_file(store="memory", edit=AppendParagraph(56)),
        m.batch(session="a", store="memory", operations=items)))  # fmt: skip
    assert per_item == "BATCH-4"  # was LIMIT-2: a batch judged item by item
    repair = replayed_blame("tests.backends.naive_broken:refuses_repair_on_foreign",
                            tmp_path / "e", lambda m: (
        m.edit_file(store="memory", edit=AppendParagraph(65)),
        m.remove(old_text="Notes pasted from a meeting", session="a", store="memory")))  # fmt: skip
    assert repair == "DRIFT-7"  # was DRIFT-1: the remove that repairs a foreign file refused
    stale = replayed_blame(
        "tests.backends.naive_broken:StaleWithoutLoad", tmp_path / "c", lambda m: (
            m.add(content="User tabs", session="b", store="memory"),
            m.remove(old_text="tabs", session="a", store="memory")))  # fmt: skip
    assert stale == "LOCK-2"  # was MATCH-1: a remove decided on the session's stale copy
    kept = replayed_blame(f"{BROKEN}:keeps_carriage_returns", tmp_path / "f", lambda m: (
        m.add(content="Shell: zsh\r\nEditor: vim", session="a", store="memory")))  # fmt: skip
    assert kept == "ENTRY-1"  # was FORMAT-5: content held as given, CR LF and all


def test_the_round_trip_blames_content_held_as_given_on_entry_one(tmp_path: Path) -> None:
    # The step Hermes failed at ci: content with CR LF inside, held as given, reported so and
    # read back from the file with a line feed. FORMAT-5 was blamed before; the one fault is
    # ENTRY-1's.
    context = CheckContext(InProcessBackend(f"{BROKEN}:keeps_carriage_returns", 10.0),
                           tmp_path, tmp_path, PROFILES["ci"])  # fmt: skip
    with FuzzRoot(context) as world, pytest.raises(Violation) as failure:
        _round_trip_step(world, {"op": "add", "target": "memory", "content": "a§b\r\na§b"})
    assert failure.value.clause == "ENTRY-1"
    reference = CheckContext(InProcessBackend(REFERENCE, 10.0), tmp_path, tmp_path, PROFILES["ci"])
    with FuzzRoot(reference) as world:
        _round_trip_step(world, {"op": "add", "target": "memory", "content": "a§b\r\na§b"})
