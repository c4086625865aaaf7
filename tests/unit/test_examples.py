"""Every SPEC.md example holds for the spec's own model and for the reference store."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.examples.probes import run_on_backend, run_on_model
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.verdict.findings import Refusal, Unverified
from memspec.reference_impl import open_store
from memspec.spec import codes, rules, threats
from memspec.spec.codec import FileState
from memspec.spec.document import installed_spec
from memspec.spec.examples import Example, ExampleSyntaxError, parse_examples, parse_step
from memspec.spec.operations import Mutation
from memspec.spec.rules import Outcome, argument_error
from tests.backends import factory_of, naive, wrappers

EXAMPLES = list(installed_spec().examples)
REFERENCE = InProcessBackend("memspec.reference_impl:open_store")


def test_spec_has_examples() -> None:
    assert len(EXAMPLES) >= 60


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_on_model(example: Example) -> None:
    # A disagreement here is a bug in SPEC.md or the model, never in a backend.
    failure = run_on_model(example)
    assert failure is None, failure.render()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_on_reference(example: Example, tmp_path: Path) -> None:
    failure = run_on_backend(example, REFERENCE, tmp_path)
    assert failure is None, failure.render()


BY_ID = {example.id: example for example in EXAMPLES}


@pytest.mark.parametrize(
    "example", ["remove-deletes-one-entry", "lock-no-lost-update", "snap-headers"]
)
def test_an_acknowledged_write_missing_from_the_file_blames_atomic_5(
    example: str, tmp_path: Path
) -> None:
    # LazyWriter puts each write on disk at the next one: whatever the example was to show,
    # what failed is that an OK's result was not in the file
    lazy = InProcessBackend("tests.backends.naive_broken:LazyWriter")
    failure = run_on_backend(BY_ID[example], lazy, tmp_path)
    assert failure is not None and failure.blamed == ("ATOMIC-5",), failure
    assert not failure.completed and "still held what it held before" in failure.reason


def test_an_answer_unlike_the_models_is_not_a_missing_write(tmp_path: Path) -> None:
    # a case-insensitive duplicate is answered OK, duplicate, and leaves the file as it was:
    # the store's own idea of the add, DUP-3's, not an unwritten OK
    store = InProcessBackend("tests.backends.wrappers:case_insensitive_duplicates")
    failure = run_on_backend(BY_ID["dup-whole-entry-exact"], store, tmp_path)
    assert failure is not None and failure.blamed == (), failure
    assert "DUP-3" in failure.clauses


@pytest.mark.parametrize("example", ["format-writer-is-canonical", "read-bom-dropped"])
def test_a_drift_refusal_of_a_cosmetic_file_blames_drift_1(example: str, tmp_path: Path) -> None:
    store = InProcessBackend("tests.backends.wrappers:raw_bytes_drift_guard")
    failure = run_on_backend(BY_ID[example], store, tmp_path)
    assert failure is not None and failure.blamed == ("DRIFT-1",), failure
    assert failure.stops and failure.received["code"] == "E_DRIFT"


@pytest.mark.parametrize(
    ("factory", "example"),
    [
        ("naive_broken:StaleWithoutLoad", "drift-file-states"),
        ("procs:open_loaded_list", "lock-no-lost-update"),
        ("procs:open_loaded_list", "drift-foreign-shrinking-replace-goes-through"),
    ],
)
def test_a_change_made_of_an_earlier_read_blames_lock_2(
    factory: str, example: str, tmp_path: Path
) -> None:
    # both stores decide on the entries the session held, not on the file it should re-read:
    # whatever the example was to show (a drift rule, an answer), LOCK-2 is what failed
    store = InProcessBackend(f"tests.backends.{factory}")
    failure = run_on_backend(BY_ID[example], store, tmp_path)
    assert failure is not None and failure.blamed == ("LOCK-2",), failure
    assert "entries this session last read" in failure.reason


def test_an_unreadable_file_read_as_empty_is_not_a_stale_view(tmp_path: Path) -> None:
    # a session that read nothing before the file became undecodable cannot be told from one
    # that reads it as empty: READ-6's failure stays the example's, even for a store whose
    # defect is its stale view
    store = InProcessBackend("tests.backends.procs:open_loaded_list")
    failure = run_on_backend(BY_ID["read-undecodable-is-not-empty"], store, tmp_path)
    assert failure is not None and failure.blamed in ((), ("READ-6",)), failure


def test_a_refusal_is_never_blamed_on_a_stale_view(tmp_path: Path) -> None:
    # the stale store refuses the remove as drift, as it would on the entries it read earlier,
    # but a refusal writes nothing: so does a store that parses the paste its own way (Hermes);
    # a remove of a foreign file refused for the file's state is DRIFT-7's, never LOCK-2's
    store = InProcessBackend("tests.backends.naive_broken:StaleWithoutLoad")
    failure = run_on_backend(BY_ID["drift-pasted-entry-removed-with-a-backup"], store, tmp_path)
    assert failure is not None and failure.blamed == ("DRIFT-7",), failure


def _example(steps: str, limits: str = "") -> Example:
    """Returns the one example a block of step lines makes (``limits``: its info string's)."""
    info = f"memspec id=sketch clauses=LIMIT-3 {limits}".strip()
    return parse_examples(f"```{info}\n{steps}\n```\n")[0]


def test_a_raise_at_every_call_of_its_kind_blames_contract_6_alone(tmp_path: Path) -> None:
    # the store raises at every add, a plain one on a fresh root too: the raise hides whatever
    # the step would have answered, so ENTRY-2 reads not verified rather than failed
    store = InProcessBackend("tests.backends.wrappers:raises_on_add")
    failure = run_on_backend(BY_ID["entry-empty-refused"], store, tmp_path)
    assert failure is not None and failure.blamed == ("CONTRACT-6",), failure
    assert not failure.completed


def test_a_raise_on_malformed_tool_arguments_is_the_steps_own(tmp_path: Path) -> None:
    # a plain tool call goes through: raising on text that is not JSON is that step's own, and
    # a raise out of the tool is TOOL-6's alone (the tool never raises), not CONTRACT-6's too
    store = InProcessBackend("tests.backends.tool_broken:raises_on_bad_json")
    failure = run_on_backend(BY_ID["tool-text-not-an-object-answered"], store, tmp_path)
    assert failure is not None and failure.blamed == ("TOOL-6",), failure
    # calls that are JSON objects it answers as the spec does: TOOL-4 holds
    (tmp_path / "b").mkdir()
    assert run_on_backend(BY_ID["tool-malformed-calls-answered"], store, tmp_path / "b") is None


def test_a_raise_of_the_steps_own_also_fails_the_examples_clause(tmp_path: Path) -> None:
    # the store raises only on a lone surrogate (a plain add goes through): the raise is the
    # step's own, so the refusal ENTRY-4 asks for is missing too
    store = InProcessBackend("tests.backends.wrappers:raises_on_surrogate")
    failure = run_on_backend(BY_ID["entry-lone-surrogate-refused"], store, tmp_path)
    assert failure is not None and failure.blamed == ("CONTRACT-6", "ENTRY-4"), failure


FILL_40 = (
    'add memory "User prefers tabs" -> OK\n'
    'add memory "Project uses Go 1.22" -> OK\n'
    'add memory "Editor: vim" -> E_LIMIT\n'
    'disk memory == "User prefers tabs\\n§\\nProject uses Go 1.22"'
)


def test_a_block_without_the_files_duplicates_blames_read_5(tmp_path: Path) -> None:
    # the block differs from the one the example expects only by the duplicates its load
    # dropped: the read's clause, not the example's (LIMIT-3 here)
    header = "MEMORY (your personal notes) [0% — 15/2,200 chars]"
    block = "\n    ".join(["═" * 46, header, "═" * 46, "Note A", "§", "Note A"])
    example = _example(f'put memory "Note A\\n§\\nNote A"\nload\nsnapshot memory:\n    {block}')
    store = InProcessBackend("tests.backends.wrappers:dedup_block")
    failure = run_on_backend(example, store, tmp_path)
    assert failure is not None and failure.blamed == ("READ-5",), failure


def test_a_given_step_answered_otherwise_leaves_the_example_not_verified(tmp_path: Path) -> None:
    # the store counts bytes, so filling it to 40 code points around a "§" is refused: what
    # LIMIT-3 judges (a refusal writes nothing) was never set up
    sketch = _example(FILL_40.replace("add", "given add", 2), "limits=memory:40,user:30")
    assert run_on_model(sketch) is None
    store = InProcessBackend("tests.backends.wrappers:counts_bytes")
    with pytest.raises(Unverified, match=r"given step at line 3 .*expected code OK, got E_LIMIT"):
        run_on_backend(sketch, store, tmp_path)
    # the same steps not given: a refusal where the spec accepts is the condition the store
    # misread (LIMIT-2), not what the example is about (LIMIT-3), which it never reached
    judged = _example(FILL_40, "limits=memory:40,user:30")
    (tmp_path / "judged").mkdir()
    failure = run_on_backend(judged, store, tmp_path / "judged")
    assert failure is not None and failure.blamed == ("LIMIT-2",) and failure.stops


def test_a_given_step_whose_entries_differ_leaves_the_example_not_verified(
    tmp_path: Path,
) -> None:
    # the replace answers OK but moves the entry to the end: the order a later step judges
    # was never set up, read with the store's own entries()
    sketch = _example(
        'add memory "User prefers tabs" -> OK\n'
        'add memory "Editor: vim" -> OK\n'
        'given replace memory "tabs" "User prefers spaces" -> OK\n'
        'remove memory "Editor" -> OK\n'
        'entries memory == ["User prefers spaces"]'
    )
    assert run_on_model(sketch) is None
    store = InProcessBackend("tests.backends.wrappers:replace_moves_to_end")
    with pytest.raises(Unverified, match=r"line 4 .*entries then read"):
        run_on_backend(sketch, store, tmp_path)


def test_a_raise_at_a_given_step_still_fails_contract_6(tmp_path: Path) -> None:
    sketch = _example('given add memory "User prefers tabs" -> OK\nadd memory "x" -> OK')
    store = InProcessBackend("tests.backends.wrappers:raises_on_add")
    failure = run_on_backend(sketch, store, tmp_path)
    assert failure is not None and failure.blamed == ("CONTRACT-6",), failure


@pytest.mark.parametrize(
    "line", ["given entries memory == []", "given load", 'given given add memory "x" -> OK']
)
def test_only_a_mutation_or_a_tool_call_can_be_given(line: str) -> None:
    with pytest.raises(ExampleSyntaxError, match="only a mutation or a tool call"):
        parse_step(line, 7)


def test_a_given_step_is_marked_in_the_json_dump() -> None:
    step = parse_step('given @b add memory "x" -> OK', 3)
    assert step.session == "b" and step.given
    assert step.to_json()["given"] is True
    assert "given" not in parse_step('add memory "x" -> OK', 3).to_json()


@pytest.mark.parametrize(
    ("factory", "example", "blamed"),
    [
        # a refusal the step expected and did not get is the clause that decides it, whatever
        # the example is about: a delimiter line ENTRY-3's, an ambiguity MATCH-5's
        ("wrappers:accepts_delimiter_line", "contract-every-code", ("ENTRY-3",)),
        ("wrappers:first_of_ambiguous", "match-preview-80-code-points", ("MATCH-5",)),
        # a refusal that the other target's limit would not make is LIMIT-6's (each target has
        # its own limit), not the limit rule's in general
        ("wrappers:shared_limit", "limit-per-target", ("LIMIT-6",)),
        # a batch's limit judged per item, before a later item's match, is the batch's limit
        # clause (BATCH-4: the final result's), which the example of the order cites too
        ("wrappers:batch_limit_per_item", "precedence-batch-match-before-limit", ("BATCH-4",)),
        # external bytes in no backup and no longer in the file are lost (DRIFT-5); the same
        # content backed up twice is DRIFT-4's
        ("naive_broken:NoRewriteBackup", "drift-pasted-entry-removed-with-a-backup", ("DRIFT-5",)),
        ("naive_broken:TimestampBackup", "drift-foreign-shrinking-replace-goes-through",
         ("DRIFT-4",)),
        # a threat shown as it is where a placeholder belongs: nothing scanned at load (SCAN-6)
        ("naive_broken:no_load_scan", "scan-load-time-placeholder", ("SCAN-6",)),
        ("naive_broken:no_load_scan", "scan-forged-blocked-marker", ("SCAN-6",)),
        # only the forged marker shown as it is: the example's SCAN-8
        ("naive_broken:trusts_blocked_prefix", "scan-forged-blocked-marker", ()),
        # an accepted replace or patch that chose the spec's entry and wrote it wrong fails the
        # action's clause, not the matching rule the example is about
        ("wrappers:replaces_substring", "match-substring-selects-entry", ("REPLACE-1",)),
        ("wrappers:replace_moves_to_end", "match-identical-duplicates-first", ("REPLACE-4",)),
        ("naive_broken:patches_whole_entry", "patch-identical-duplicates-first", ("PATCH-4",)),
        # its usage differs because what it wrote does
        ("naive_broken:patches_whole_entry", "patch-limit-on-result", ("PATCH-4",)),
        # a refused batch that kept its first items
        ("wrappers:batch_item_by_item", "batch-items-see-earlier-items", ("BATCH-2",)),
        # on a foreign file, which other entries a rewrite keeps is the drift guard's
        ("wrappers:rewrites_without_backup", "drift-foreign-shrinking-replace-goes-through", ()),
        # entries read without the duplicates the file keeps: the read's (READ-5)
        ("wrappers:dedup_on_read", "replace-keeps-other-entries", ("READ-5",)),
        # a block of the file as it is now, where the one frozen at load belongs (SNAP-1); a
        # block with no entries where none belongs (SNAP-3)
        ("wrappers:live_snapshot", "snap-empty-target-is-null", ("SNAP-1",)),
        # the block of the session's own entries, after another session wrote the file: SNAP-1,
        # not the TOOL-7 of the example whose snapshot step it is
        ("wrappers:live_snapshot", "tool-result-shows-live-state", ("SNAP-1",)),
        ("wrappers:empty_block", "remove-last-entry-empties-file", ("SNAP-3",)),
        # a tool result's field fails the clause the spec's judge finds wrong with it
        ("tool_broken:stale_usage", "tool-replace-says-what-it-overwrote", ("TOOL-7",)),
        ("tool_broken:replace_says_nothing", "tool-never-shows-threat-text", ("TOOL-11",)),
        ("tool_broken:echoes_blocked_entries", "tool-never-shows-threat-text", ("TOOL-13",)),
        ("tool_broken:vague_malformed_error", "tool-text-not-an-object-answered", ("TOOL-6",)),
        # ordinary text the scan refused: the scan's clause, not ENTRY-5's storing as given
        ("naive_broken:RefusesEveryInvisible", "scan-invisible-content-is-text", ("SCAN-4",)),
    ],
)  # fmt: skip
def test_a_difference_blames_the_clause_of_its_part(
    factory: str, example: str, blamed: tuple[str, ...], tmp_path: Path
) -> None:
    store = InProcessBackend(f"tests.backends.{factory}")
    failure = run_on_backend(BY_ID[example], store, tmp_path)
    assert failure is not None and failure.blamed == blamed, failure


class WordedNoReplace(wrappers.OtherHeaderWording, wrappers.RefusesReplace):
    """Titles its block otherwise (SNAP-5) and refuses ``replace`` (E_UNSUPPORTED)."""


worded_no_replace = factory_of(WordedNoReplace)


def test_a_refused_core_action_keeps_what_was_found_before(tmp_path: Path) -> None:
    # the header's wording differs first (SNAP-5), then the replace is refused as unsupported:
    # the refusal stops the example, and SNAP-5's failure stands beside it
    (tmp_path / "seed").mkdir()
    seeded = open_store(tmp_path / "seed")
    seeded.load()
    seeded.add("memory", "User prefers tabs")
    reader = open_store(tmp_path / "seed")
    reader.load()
    block = "\n".join("    " + line for line in reader.snapshot("memory").split("\n"))
    sketch = _example(
        f'add memory "User prefers tabs" -> OK\nload\nsnapshot memory:\n{block}\n'
        'replace memory "tabs" "User prefers spaces" -> OK'
    )
    assert run_on_model(sketch) is None
    store = InProcessBackend("tests.unit.test_examples:worded_no_replace")
    with pytest.raises(Refusal) as refused:
        run_on_backend(sketch, store, tmp_path)
    assert "SNAP-5" in refused.value.clauses and "CONTRACT-2" in refused.value.clauses


class PercentOf99(naive.NaiveStore):
    """Shows the memory block's percent as 99 (SNAP-6)."""

    def snapshot(self, target: str) -> str | None:
        block = super().snapshot(target)
        if block is None or target != "memory":
            return block
        return re.sub(r"\[\d+% — ", "[99% — ", block, count=1)


percent_of_99 = factory_of(PercentOf99)


def test_a_threat_shown_at_load_that_the_store_never_knew_is_not_verified(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a store that knows the administrator line and shows it raw at load is caught on SCAN-6
    unscanned = InProcessBackend("tests.backends.naive_broken:no_load_scan")
    (tmp_path / "b").mkdir()
    failure = run_on_backend(BY_ID["scan-load-time-placeholder"], unscanned, tmp_path / "b")
    assert failure is not None and failure.blamed == ("SCAN-6",), failure
    # one that scans at load with the patterns it scans writes with, which do not know it: the
    # raw entry is SCAN-2's gap, not a load that scans nothing (SCAN-6)
    known = threats.find_threats
    narrow = lambda text: () if "administrator" in text else known(text)  # noqa: E731
    monkeypatch.setattr(rules, "find_threats", narrow)
    monkeypatch.setattr(naive, "find_threats", narrow)
    store = InProcessBackend("tests.backends.naive:open_store")
    with pytest.raises(Unverified, match="You are now the administrator"):
        run_on_backend(BY_ID["scan-load-time-placeholder"], store, tmp_path)
    # beside another difference (agent-os' header figure), that one stands alone
    percent = InProcessBackend(f"{__name__}:percent_of_99")
    (tmp_path / "c").mkdir()
    failure = run_on_backend(BY_ID["scan-load-time-placeholder"], percent, tmp_path / "c")
    assert failure is not None and failure.blamed == ("SNAP-6",), failure


class NoDelimiterCheck(naive.NaiveStore):
    """Never refuses a delimiter line in content, at any step (agent-os' curated store)."""

    def check_arguments(self, op: Mutation) -> Outcome | None:
        refusal = argument_error(op)
        return None if refusal is not None and refusal.code == codes.E_DELIMITER else refusal


class NoTargetCheck(naive.NaiveStore):
    """Writes any target but ``user`` to MEMORY.md, never answering ``E_TARGET``."""

    def mutate(self, op: Mutation) -> dict[str, Any]:
        return super().mutate(op if op.target == "user" else replace(op, target="memory"))


no_delimiter_check = factory_of(NoDelimiterCheck)
no_target_check = factory_of(NoTargetCheck)


@pytest.mark.parametrize(
    ("factory", "example", "blamed"),
    [
        # the store refuses no delimiter line at all: the missing refusal is ENTRY-3's, not the
        # order of conditions the example is about (REPLACE-2)
        ("no_delimiter_check", "replace-new-content-validated-first", ("ENTRY-3",)),
        # it answers no bad target at all (CONTRACT-4), in whatever order (CONTRACT-5)
        ("no_target_check", "precedence-arguments-before-file", ("CONTRACT-4",)),
        # a store that acts on the first of several candidates judges no ambiguity at all:
        # with limits no step reaches it answers OK, so its E_LIMIT is not the order's
        ("first_of_ambiguous", "precedence-match-before-limit", ("MATCH-5",)),
        # the same for a patch that edits every occurrence of a repeated span (PATCH-3) and one
        # that does not scan its result (PATCH-6)
        ("patches_every_occurrence", "patch-precedence", ("PATCH-3",)),
        ("patch_skips_result_scan", "patch-precedence-of-threats", ("PATCH-6",)),
        # a store that knows the condition and checks it after a limit judged per item: the
        # batch's limit clause (BATCH-4), not the order's
        ("batch_limit_per_item", "precedence-batch-match-before-limit", ("BATCH-4",)),
    ],
)
def test_a_condition_missing_altogether_is_not_blamed_on_the_order(
    factory: str, example: str, blamed: tuple[str, ...], tmp_path: Path
) -> None:
    module = (
        __name__ if factory.startswith("no_")
        else "tests.backends.naive_broken" if factory.startswith("patch")
        else "tests.backends.wrappers"
    )  # fmt: skip
    store = InProcessBackend(f"{module}:{factory}")
    failure = run_on_backend(BY_ID[example], store, tmp_path)
    assert failure is not None and failure.blamed == blamed, failure


class DedupsItsWrites(naive.NaiveStore):
    """Drops the file's duplicates from every file it writes (agent-os' curated store)."""

    def decide(
        self, op: Mutation, state: FileState, limit: int
    ) -> tuple[Outcome, tuple[str, ...] | None]:
        outcome, result = super().decide(op, state, limit)
        return outcome, None if result is None else tuple(dict.fromkeys(result))


dedups_its_writes = factory_of(DedupsItsWrites)


def test_a_write_that_dropped_the_duplicates_stops_the_example(tmp_path: Path) -> None:
    # the file it wrote holds the entries once each: the bytes a later step reads differ for
    # that reason alone, DUP-4's, not the round trip the example is about (FORMAT-5)
    store = InProcessBackend(f"{__name__}:dedups_its_writes")
    failure = run_on_backend(BY_ID["format-delimiter-law"], store, tmp_path)
    assert failure is not None and failure.blamed == ("DUP-4",), failure


class LoadBreaksOnFile(naive.NaiveStore):
    """Raises at a load that finds MEMORY.md: a first load on a fresh root works."""

    def load(self) -> None:
        if (self.root / "MEMORY.md").exists():
            raise RuntimeError("cannot parse MEMORY.md")
        super().load()


load_breaks_on_file = factory_of(LoadBreaksOnFile)


def test_a_crash_in_the_implicit_load_is_the_loads(tmp_path: Path) -> None:
    # session b first appears at the add: its opening load raises on the file session a wrote,
    # so the failure is that load's, not the add's that needed the session (CONTRACT-5 here)
    sketch = parse_examples(
        "```memspec id=sketch clauses=CONTRACT-5\n"
        'add memory "User prefers tabs" -> OK\n'
        '@b add memory "" -> E_EMPTY\n'
        "```\n"
    )[0]
    assert run_on_model(sketch) is None
    store = InProcessBackend("tests.unit.test_examples:load_breaks_on_file")
    failure = run_on_backend(sketch, store, tmp_path)
    assert failure is not None and failure.step.startswith("load (opening session b"), failure
    # the raise is the load's own (a load on a fresh root works): CONTRACT-6 and what the
    # example asks of that load, never the add it did not reach
    assert failure.sent == {"op": "load"} and failure.blamed[0] == "CONTRACT-6", failure


class ExactDelimiterReader(wrappers.Wrapper):
    """Reads entries by splitting the file on the exact delimiter ``"\n§\n"``, as Hermes does:
    a delimiter line with spaces around its ``§`` is content (READ-3)."""

    def entries(self, target: str) -> list[str]:
        text = (self.read(target) or b"").decode("utf-8")
        return [piece.strip() for piece in text.split("\n§\n") if piece.strip()]


exact_delimiter_reader = factory_of(ExactDelimiterReader)


def test_one_reading_difference_is_the_reading_clauses_alone(tmp_path: Path) -> None:
    # a store that splits only on the exact delimiter reads the spaced delimiter lines as
    # content: the file holds the spec's entries, so the read is wrong (READ-3), not the write
    # rules the example also cites (FORMAT-5, ENTRY-3)
    example = BY_ID["read-unicode-space-around-delimiter"]
    store = InProcessBackend("tests.unit.test_examples:exact_delimiter_reader")
    failure = run_on_backend(example, store, tmp_path)
    assert failure is not None and failure.blamed == ("READ-3",), failure


def test_a_crash_loading_the_state_a_read_judges_is_the_reads(tmp_path: Path) -> None:
    # the example's first session step is a load of the file put before it: a crash there is
    # what the example judges (reading that file), and the raise is that state's own (a load on
    # a fresh root works), so the example's clause fails beside CONTRACT-6
    sketch = parse_examples(
        "```memspec id=sketch clauses=READ-2\n"
        'put memory "User prefers tabs"\n'
        "load\n"
        'entries memory == ["User prefers tabs"]\n'
        "```\n"
    )[0]
    assert run_on_model(sketch) is None
    store = InProcessBackend("tests.unit.test_examples:load_breaks_on_file")
    failure = run_on_backend(sketch, store, tmp_path)
    assert failure is not None and failure.step == "load", failure
    assert set(failure.blamed) == {"CONTRACT-6", "READ-2"}, failure


def test_a_block_of_the_sessions_entries_is_not_snap_1s_when_nothing_was_written_since() -> None:
    """A block that shows the session's entries is SNAP-1's only when the file changed since
    the load: with the file's block still the frozen one, it shows how the entries were read
    (hermes-agent's block of a "§" piece of a blank file is READ-4's), and the session is not
    even asked."""
    from memspec.conformance.examples.steps import _shows_the_session

    class Unasked:
        def request(self, *args: object) -> dict[str, object]:
            raise AssertionError("the session was asked for its entries")

    step = parse_step("snapshot memory == null")
    assert _shows_the_session(None, "a block", None, step, Unasked(), 2200) == ()  # type: ignore[arg-type]


def test_a_null_block_stops_the_example_whose_clause_is_in_the_block(tmp_path: Path) -> None:
    # null where the block of an unreadable file belongs fails SNAP-9 and CONTRACT-9, and no
    # part of the block was compared: SNAP-12's line was never judged, so the example stopped
    store = InProcessBackend("tests.backends.naive_broken:NullUnreadableBlock")
    example = BY_ID["snap-unreadable-line-is-matched-by-its-prefix"]
    failure = run_on_backend(example, store, tmp_path)
    assert failure is not None and failure.blamed == ("SNAP-9", "CONTRACT-9"), failure
    assert not failure.completed
