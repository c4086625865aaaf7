"""Fault injection at the operating-system boundary of a backend (READ-6, READ-7, ATOMIC-3,
ATOMIC-4).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass

from memspec.conformance.checks._disk import assert_written
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.waits import TRACED_SESSION_TIMEOUT
from memspec.conformance.processes.workers import Job, WorkerResult, harness_step
from memspec.conformance.tamper.calls import describe_call
from memspec.conformance.tamper.capability import run_planned
from memspec.conformance.tamper.interpose import Fault, Match, Plan
from memspec.conformance.tamper.strace import restore_root
from memspec.conformance.transport.wire import Request
from memspec.conformance.verdict.findings import HarnessError, Unverified, Violation
from memspec.spec import codes
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.drift_refusal import judge_drift_refusal, judge_rewrite_backup
from memspec.spec.root_files import NAMED_KINDS, file_kind
from memspec.spec.targets import FILENAMES

BEFORE, FAULTY, AFTER, NEXT, ENTRIES = 3, 4, 5, 6, 8
"""Indices in a scenario's operations: load, add, add, observe (BEFORE), the faulty add
(FAULTY), observe (AFTER), add (NEXT), load, entries (ENTRIES)."""


LIMIT = 1_000_000
"""The limit entries are parsed against in messages (any size is shown)."""


@dataclass(frozen=True)
class Scenario:
    """A Scenario is one injected fault, the code it must produce and whether it must fire."""

    label: str
    fault: Fault
    code: str
    clause: str
    required: bool = True


def _faulty(*calls: str, kinds: tuple[str, ...], name: str | None = None) -> Match:
    return Match.of(*calls, kinds=kinds, name=name, op=FAULTY)


READ_SCENARIOS = (
    Scenario(
        "EIO on a read of MEMORY.md",
        Fault(_faulty("read", kinds=("data",), name="MEMORY.md"), errno=errno.EIO),
        codes.E_UNREADABLE,
        "READ-7",
    ),
    Scenario(
        "EACCES on opening MEMORY.md",
        Fault(_faulty("open", kinds=("data",), name="MEMORY.md"), errno=errno.EACCES),
        codes.E_UNREADABLE,
        "READ-7",
    ),
)
WRITE_SCENARIOS = (
    Scenario(
        "ENOSPC on the first write of the new file",
        Fault(_faulty("write", "pwrite", kinds=("temp", "data")), errno=errno.ENOSPC),
        codes.E_IO,
        "ATOMIC-4",
    ),
    Scenario(
        "EIO on the first write of the new file",
        Fault(_faulty("write", "pwrite", kinds=("temp", "data")), errno=errno.EIO),
        codes.E_IO,
        "ATOMIC-4",
    ),
    Scenario(
        "EIO on the fsync of the new file",
        Fault(_faulty("fsync", "fdatasync", kinds=("temp", "data")), errno=errno.EIO),
        codes.E_IO,
        "ATOMIC-4",
        required=False,
    ),
    Scenario(
        "EIO on the rename onto MEMORY.md",
        Fault(_faulty("replace", "rename", kinds=("data",), name="MEMORY.md"), errno=errno.EIO),
        codes.E_IO,
        "ATOMIC-4",
        required=False,
    ),
)


def _add(content: str, target: str = "memory") -> Request:
    return {"op": "add", "target": target, "content": content}


def _files(result: WorkerResult, index: int) -> dict[str, str]:
    answer = result.answer(index)
    if answer is None:
        raise HarnessError(f"observe step {index} has no answer")
    return dict(answer["files"])


def _entries_read(result: WorkerResult) -> list[str] | None:
    """Returns the entries the job's ``entries`` request read (``None`` when it got no answer
    or the answer has none)."""
    answer = result.answer(ENTRIES)
    return None if answer is None else answer.get("entries")


def _run(ctx: CheckContext, ops: tuple[Request, ...], plan: Plan, name: str) -> WorkerResult:
    return _start(ctx, ops, plan, name).expect_done()


def _start(ctx: CheckContext, ops: tuple[Request, ...], plan: Plan, name: str) -> WorkerResult:
    job = Job(ctx.backend, ctx.root, ops, plan=plan, name=name)
    return run_planned(ctx.tampering, job, TRACED_SESSION_TIMEOUT, ctx.scratch)


def _judge_untouched(old: dict[str, str], new: dict[str, str], label: str, clause: str) -> None:
    """MEMORY.md is byte for byte as before (``old``: observed files, name -> hex) and no temp
    file was left (READ-6/7, ATOMIC-4)."""
    # READ-7 / ATOMIC-4: the failed mutation leaves MEMORY.md byte for byte as it was.
    if not (new.get("MEMORY.md") == old.get("MEMORY.md")):
        raise Violation(
            clause,
            f"with {label}, the refused add changed MEMORY.md from "
            f"{bytes.fromhex(old.get('MEMORY.md') or '')!r} to "
            f"{bytes.fromhex(new.get('MEMORY.md') or '')!r}",
        )
    left = sorted(name for name in set(new) - set(old) if file_kind(name) not in NAMED_KINDS)
    # ATOMIC-4: the store removes its temp file when the write fails.
    if left:
        raise Violation(clause, f"with {label}, the failed add left {', '.join(left)} in the root")


def _what_the_add_did(result: WorkerResult) -> str:
    """Returns how the faulty add changed MEMORY.md, in entries (``""`` when it did not)."""
    old, new = _files(result, BEFORE).get("MEMORY.md"), _files(result, AFTER).get("MEMORY.md")
    if old == new:
        return ""
    before, after = (
        classify_bytes(bytes.fromhex(data) if data is not None else None, LIMIT).entries
        for data in (old, new)
    )
    lost = [entry for entry in before or () if entry not in (after or ())]
    return f"; it rewrote MEMORY.md from {list(before or ())} to {list(after or ())}" + (
        f", losing {len(lost)} acknowledged entries" if lost else ""
    )


def _entries(label: str) -> tuple[str, str, str, str]:
    """The first, second, faulty and next entry of a scenario called ``label``."""
    first, second, faulty, after = (
        f"{label}: {word} entry" for word in ("first", "second", "faulty", "next")
    )
    return first, second, faulty, after


def _faulty_add_between(first: str, second: str, faulty: str, after: str) -> tuple[Request, ...]:
    """Two adds, the faulty add between two observations of the files, one more add, a load and
    the entries: the operations of every fault scenario."""
    return (
        {"op": "load"},
        _add(first),
        _add(second),
        {"op": "observe"},
        _add(faulty),
        {"op": "observe"},
        _add(after),
        {"op": "load"},
        {"op": "entries", "target": "memory"},
    )


def _fault_scenario(ctx: CheckContext, scenario: Scenario, number: int, kept: list[str]) -> None:
    """Runs one scenario; ``kept`` holds the entries acknowledged so far and is extended."""
    first, second, faulty, after = _entries(f"Fault scenario {number}")
    ops = _faulty_add_between(first, second, faulty, after)
    result = _start(ctx, ops, Plan(faults=(scenario.fault,), trace=False), f"fault{number}")
    if result.answer(BEFORE) is not None and result.answer(FAULTY) is None:
        _judge_after_a_defect(ctx, scenario, result, (first, second, after), kept)
        return
    result.expect_done()
    kept += [first, second]
    memory = _files(result, BEFORE).get(FILENAMES["memory"])
    assert_written(None if memory is None else bytes.fromhex(memory), kept, "add memory")
    fired = [call for call in result.calls if call.effect]
    if not fired:
        if scenario.required:
            raise Unverified(
                f"{scenario.label} could not be injected: the add made no interposed call it "
                "applies to, although every mutation re-reads MEMORY.md and writes a new file "
                "(the backend does its file I/O in code memspec cannot interpose?)"
            )
        kept += [faulty, after]
        return
    label = f"{scenario.label} ({describe_call(fired[0])})"
    answer = result.answer(FAULTY)
    # READ-7: unreadable is never empty; ATOMIC-4: a failed write answers E_IO.
    if not (answer is not None and answer["code"] == scenario.code):
        raise Violation(
            scenario.clause,
            f"with {label}, add memory {faulty!r} answered {answer}; expected "
            f"{scenario.code}{_what_the_add_did(result)}",
        )
    _judge_untouched(_files(result, BEFORE), _files(result, AFTER), label, scenario.clause)
    answer = result.answer(NEXT)
    # ATOMIC-4, READ-7: the fault was transient, so the next operation works.
    if not (answer is not None and answer["code"] == codes.OK):
        raise Violation(
            scenario.clause,
            f"after {label} on one add, the next add answered {answer}; expected OK",
        )
    kept.append(after)
    entries = _entries_read(result)
    # ATOMIC-4: every acknowledged entry is still there, and nothing else.
    if not (entries == kept):
        raise Violation(
            scenario.clause,
            f"after {label} on one add, a reload finds {entries}; expected "
            f"every acknowledged entry and nothing else: {kept}",
        )


def _scenarios(ctx: CheckContext, scenarios: tuple[Scenario, ...]) -> list[str]:
    """Runs each scenario, going on after one that fails (on an emptied root, since a failure
    may have lost entries); returns the entries acknowledged on the root as it is now."""
    kept: list[str] = []
    for number, scenario in enumerate(scenarios, 1):
        failed = len(ctx.failures)
        with ctx.keep_going():
            _fault_scenario(ctx, scenario, number, kept)
        if len(ctx.failures) > failed:
            restore_root(ctx.root, {})
            kept.clear()
    return kept


def _judge_after_a_defect(
    ctx: CheckContext,
    scenario: Scenario,
    result: WorkerResult,
    entries: tuple[str, str, str],
    kept: list[str],
) -> None:
    """Judges a scenario whose faulty add got no answer (the backend raised or died): that is a
    defect (CONTRACT-6) and a failure of the scenario's clause, which asks for an answer, and
    the check goes on: the files as the backend left them must still be untouched, and a new
    session must find every acknowledged entry and add again, so that what the clause protects
    is judged whatever the answer was."""
    first, second, after = entries
    with ctx.keep_going():
        result.expect_done()
    kept += [first, second]
    label = f"{scenario.label}, on which the backend gave no answer"
    said = (result.defect.message if result.defect else "") or result.message
    with ctx.keep_going():
        # READ-7: unreadable is never empty; ATOMIC-4: a failed write answers E_IO.
        raise Violation(
            scenario.clause,
            f"with {scenario.label}, add memory raised or died instead of "
            f"answering {scenario.code}: {said}",
        )
    with ctx.keep_going():
        now = harness_step(ctx.root, {"op": "observe"})["files"]
        _judge_untouched(_files(result, BEFORE), now, label, scenario.clause)
    ops: tuple[Request, ...] = (
        {"op": "load"},
        _add(after),
        {"op": "load"},
        {"op": "entries", "target": "memory"},
    )
    recovered = _run(ctx, ops, Plan(trace=False), f"{result.name}-next")
    answer = recovered.answer(1)
    # ATOMIC-4, READ-7: the fault was transient, so a new session adds again.
    if not (answer is not None and answer["code"] == codes.OK):
        raise Violation(
            scenario.clause, f"after {label}, a new session's add answered {answer}; expected OK"
        )
    kept.append(after)
    found = (recovered.answer(3) or {}).get("entries")
    # ATOMIC-4: every acknowledged entry is still there, and nothing else.
    if not (found == kept):
        raise Violation(
            scenario.clause,
            f"after {label}, a new session finds {found}; expected every "
            f"acknowledged entry and nothing else: {kept}",
        )


@check("READ-7", "READ-6", id="faults.read_errors_are_not_empty")
def read_errors_are_not_empty(ctx: CheckContext) -> None:
    """A read of MEMORY.md that fails once (EIO on the read, EACCES on the open) makes the add
    answer E_UNREADABLE and write nothing, and the next add works; a file made undecodable
    between two operations is refused the same way, its bytes untouched (READ-7, READ-6)."""
    kept = _scenarios(ctx, READ_SCENARIOS)
    data = ("\n§\n".join(kept)).encode("utf-8")
    garbled = b"\xff\xfe" + data
    ops: tuple[Request, ...] = (
        {"op": "load"},
        {"op": "put", "target": "memory", "hex": garbled.hex()},
        {"op": "observe"},
        _add("Added after the file became undecodable"),
        {"op": "observe"},
        _add("Name: Ada", target="user"),
    )
    result = _run(ctx, ops, Plan(trace=False), "undecodable")
    label = "MEMORY.md made undecodable (b'\\xff\\xfe' in front) between two operations"
    answer = result.answer(3)
    with ctx.keep_going():
        # READ-6: a file that is not valid UTF-8 refuses every mutation of its target.
        if not (answer is not None and answer["code"] == codes.E_UNREADABLE):
            raise Violation(
                "READ-6", f"with {label}, add memory answered {answer}; expected E_UNREADABLE"
            )
    with ctx.keep_going():
        # READ-6: the undecodable bytes are left exactly as they were.
        if _files(result, 4).get("MEMORY.md") != garbled.hex():
            raise Violation("READ-6", f"with {label}, the refused add changed the file's bytes")
    answer = result.answer(5)
    # READ-6: the other target is not affected.
    if not (answer is not None and answer["code"] == codes.OK):
        raise Violation(
            "READ-6", f"with {label}, add user answered {answer}; expected OK (USER.md is fine)"
        )


@check(
    "ATOMIC-3",
    "DRIFT-3",
    features=("durable",),
    id="faults.failed_dir_sync_is_acknowledged",
)
def failed_dir_sync_is_acknowledged(ctx: CheckContext) -> None:
    """When the fsync of the directory after the rename fails once (EIO), the add still answers
    OK with a message — the new file is already what every reader sees, and E_IO would promise
    an intact old file — MEMORY.md holds the new entry, and the next add works (ATOMIC-3). A
    remove that drops another writer's entry still answers OK naming its backup when the
    directory sync after that backup fails (ATOMIC-3, DRIFT-5); for ``drift-guard`` backends, an
    E_DRIFT whose backup's directory sync fails still names the backup, in place (DRIFT-3)."""
    first, second, faulty, after = _entries("Directory sync")
    ops = _faulty_add_between(first, second, faulty, after)
    fault = Fault(_faulty("fsync", "fdatasync", kinds=("dir",)), errno=errno.EIO)
    result = _run(ctx, ops, Plan(faults=(fault,), trace=False), "dirsync")
    fired = [call for call in result.calls if call.effect]
    if not fired:
        raise Unverified(
            "the add synced no directory, so no failure could be injected there; "
            "durability.write_protocol_is_durable judges the missing directory fsync (ATOMIC-3)"
        )
    label = f"EIO on the fsync of the directory ({describe_call(fired[0])})"
    answer: Mapping[str, object] = result.answer(FAULTY) or {}
    # ATOMIC-3: a failed directory fsync after the rename is still OK, with a message.
    if not (answer.get("code") == codes.OK and answer.get("message")):
        raise Violation(
            "ATOMIC-3",
            f"with {label}, add memory {faulty!r} answered {answer}; expected OK with a "
            "message that durability is not confirmed (the new file is already in place)",
        )
    data = bytes.fromhex(_files(result, AFTER).get("MEMORY.md") or "")
    # ATOMIC-3: the acknowledged entry is in the file readers see.
    if faulty.encode() not in data:
        raise Violation("ATOMIC-3", f"with {label}, add answered OK but MEMORY.md holds {data!r}")
    entries = _entries_read(result)
    # ATOMIC-3: the next add works and every acknowledged entry is kept.
    if entries != [first, second, faulty, after]:
        raise Violation(
            "ATOMIC-3",
            f"after {label} on one add, a reload finds {entries}; expected "
            f"{[first, second, faulty, after]}",
        )
    _backup_with_failed_dir_sync(ctx, fault)
    if "drift-guard" in ctx.claimed_features():
        _drift_backup_with_failed_dir_sync(ctx, fault)


def _faulted_after_put(
    ctx: CheckContext, fault: Fault, put: bytes, mutation: Request, name: str
) -> tuple[Mapping[str, object], dict[str, bytes]] | None:
    """Puts ``put`` in MEMORY.md as another writer, runs ``mutation`` with ``fault`` injected
    and returns its answer and the root's files after it (name -> bytes); ``None`` when the
    mutation made no call the fault could fail."""
    ops: tuple[Request, ...] = (
        {"op": "load"},
        _add("Directory sync: kept entry"),
        {"op": "put", "target": "memory", "hex": put.hex()},
        {"op": "observe"},
        mutation,
        {"op": "observe"},
    )
    result = _run(ctx, ops, Plan(faults=(fault,), trace=False), name)
    if not [call for call in result.calls if call.effect]:
        return None
    files = {name: bytes.fromhex(data) for name, data in _files(result, AFTER).items()}
    return result.answer(FAULTY) or {}, files


def _backup_with_failed_dir_sync(ctx: CheckContext, fault: Fault) -> None:
    """A remove that drops another writer's entry saves the external bytes first (DRIFT-5);
    when the directory fsync after that backup fails, the backup is in place all the same, so
    the remove still answers OK naming it, and MEMORY.md loses the entry (ATOMIC-3)."""
    external = encode_entries(["Directory sync: kept entry", "Directory sync: pasted by hand"])
    removal: Request = {"op": "remove", "target": "memory", "old_text": "pasted by hand"}
    faulted = _faulted_after_put(ctx, fault, external, removal, "dirsync-backup")
    if faulted is None:
        return
    answer, files = faulted
    label = "with EIO on the first directory fsync of a remove that drops another writer's entry"
    # ATOMIC-3: E_IO promises that nothing changed, but the backup (or the new file) is in place.
    if answer.get("code") != codes.OK:
        raise Violation(
            "ATOMIC-3",
            f"{label}, the remove answered {dict(answer)}; expected OK naming the backup, which "
            f"is in place; files after: {sorted(files)}",
        )
    problem = judge_rewrite_backup(answer, external, files, root=ctx.root, clause="ATOMIC-3")
    # ATOMIC-3: the OK owed without the failure names the byte-exact backup (DRIFT-5).
    if problem is not None:
        raise Violation.of(problem, label)
    left = files.get("MEMORY.md", b"")
    # ATOMIC-3: the acknowledged remove is in the file readers see.
    if b"pasted by hand" in left:
        raise Violation("ATOMIC-3", f"{label}, the remove answered OK but MEMORY.md holds {left!r}")


def _drift_backup_with_failed_dir_sync(ctx: CheckContext, fault: Fault) -> None:
    """An E_DRIFT whose backup's directory fsync fails still answers E_DRIFT, naming the backup,
    which holds the foreign bytes (DRIFT-3; the backup is in place, only not confirmed durable)."""
    foreign = ("Pasted by hand, no delimiter line. " * 70).encode()
    refused = _add("Directory sync: refused entry")
    faulted = _faulted_after_put(ctx, fault, foreign, refused, "dirsync-drift")
    if faulted is None:
        return
    answer, files = faulted
    problem = judge_drift_refusal(answer, foreign, files, root=ctx.root)
    # DRIFT-3: the refusal names its byte-exact backup even when syncing the directory failed.
    if problem is not None:
        raise Violation.of(
            problem, f"with EIO on the directory fsync of the backup; files after: {sorted(files)}"
        )


@check("ATOMIC-4", id="faults.failed_write_keeps_old_file")
def failed_write_keeps_old_file(ctx: CheckContext) -> None:
    """A write that fails once (ENOSPC or EIO on the first write, EIO on the fsync or the
    rename) makes the add answer E_IO with MEMORY.md byte for byte as before and no temp file
    left; the next add works and every acknowledged entry is kept (ATOMIC-4)."""
    _scenarios(ctx, WRITE_SCENARIOS)
