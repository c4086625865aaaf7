"""Checks of CRASH-1..5 on simulated crash states: every state a crash may leave must recover.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.checks._disk import stray_files
from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.waits import TRACED_SESSION_TIMEOUT
from memspec.conformance.crash.persistence import (
    MODELS,
    POWER_LOSS_MODELS,
    CrashState,
    Op,
    crash_states,
    explain,
)
from memspec.conformance.processes.workers import Job
from memspec.conformance.tamper.calls import CallRecord, describe_call
from memspec.conformance.tamper.fstrace import ops_from_calls
from memspec.conformance.transport.backend import BackendDefect, Runs
from memspec.conformance.transport.wire import BatchItem, Request
from memspec.conformance.verdict.findings import ClauseFailures, Unverified, Violation
from memspec.spec import codes
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.drift_refusal import refuses_worked_on_file
from memspec.spec.model import entries_on_disk, initial_state, step
from memspec.spec.problems import Problem
from memspec.spec.requests import mutation_of

LIMIT = 100_000
LIMITS = {"memory": LIMIT}
SEEDS = ("<s1> seed: user prefers tabs", "<s2> seed: project uses Go", "<s3> seed: editor vim")


def _requests(batch: bool) -> list[Request]:
    """The traced mutations: an add, a replace, a remove and, with ``batch``, a batch."""
    requests: list[Request] = [
        {"op": "add", "target": "memory", "content": "<a1> added: deploys on Fridays"},
        {
            "op": "replace",
            "target": "memory",
            "old_text": "<s2>",
            "new_content": "<r1> replaced: project uses Rust",
        },
        {"op": "remove", "target": "memory", "old_text": "<s3>"},
    ]
    if batch:
        operations: list[BatchItem] = [
            {"action": "add", "content": "<b1> batch: tests run with pytest"},
            {"action": "remove", "old_text": "<s1>"},
        ]
        requests.append({"op": "batch", "target": "memory", "operations": operations})
    return requests


def _describe(request: Request) -> str:
    if request["op"] == "add":
        return f"add {request['content'][:4]}"
    if request["op"] == "replace":
        return f"replace {request['old_text']} by {request['new_content'][:4]}"
    if request["op"] == "remove":
        return f"remove {request['old_text']}"
    return "batch"


@dataclass
class Recording:
    """A Recording is one traced session: the files before it, its operations, the mutations
    and the entries the spec model says MEMORY.md holds after each (``expected[0]``: before)."""

    initial: dict[str, tuple[int, bytes]]
    ops: list[Op]
    requests: list[Request]
    expected: list[tuple[str, ...]]
    traces: list[str]
    recorder: str

    @property
    def names(self) -> list[str]:
        """The mutations in a few words (``replace <s2> by <r1>``)."""
        return [_describe(request) for request in self.requests]


def snapshot_files(root: Path) -> dict[str, tuple[int, bytes]]:
    """Returns the regular files directly in ``root``: name -> (inode, bytes)."""
    files = {}
    with os.scandir(root) as listing:
        for entry in listing:
            if entry.is_file(follow_symlinks=False):
                files[entry.name] = (entry.inode(), Path(entry.path).read_bytes())
    return files


def _setup(ctx: CheckContext) -> frozenset[str]:
    """Writes the seed entries in a clean session; returns the features it claims."""
    with ctx.session(LIMITS) as session:
        session.request("load")
        for seed in SEEDS:
            answer = session.request("add", target="memory", content=seed)
            # CRASH-4: the seed adds on an empty store must succeed.
            if answer["code"] != "OK":
                raise Violation("CRASH-4", f"add memory {seed!r} answered {answer}")
        return frozenset(session.features)


def _check_answers(requests: Sequence[Request], answers: Sequence[Any], state: Any) -> list:
    """Steps the spec model through the answered mutations; returns the entries after each."""
    expected = [entries_on_disk(state, "memory") or ()]
    for request, answer in zip(requests, answers, strict=False):
        outcome, state = step(state, mutation_of(request["op"], request))
        code = (answer or {}).get("code")
        if code != outcome.code:
            # CRASH-4: the states a crash may leave are known only if the backend answers like
            # the spec model; the answer itself is the business of the operation's own clauses.
            raise Unverified(
                f"{_describe(request)} answered {answer}, the spec model expects "
                f"{outcome.code}; the check cannot tell which states a crash may leave"
            )
        expected.append(entries_on_disk(state, "memory") or ())
    return expected


def _render(records: Sequence[CallRecord]) -> str:
    parts = []
    for number, record in enumerate(records, 1):
        text = describe_call(record)
        if record.error:
            text += f" ({record.error})"
        parts.append(f"{number} {text}")
    return ", ".join(parts)


def record(ctx: CheckContext, batch: bool) -> Recording:
    """Seeds the store, then records a session's mutations by interposition (Python backend)
    or strace (command backend); raises NotApplicable when neither can record."""
    root = os.path.realpath(ctx.root)
    requests = _requests(batch)
    initial = snapshot_files(ctx.root)
    tamper = ctx.tampering
    job = Job(ctx.backend, ctx.root, tuple(requests), LIMITS, name="traced")
    records, answers = tamper.record(job, TRACED_SESSION_TIMEOUT, ctx.scratch)
    memory = initial.get("MEMORY.md", (0, None))[1]
    expected = _check_answers(requests, answers, initial_state(LIMIT, memory=memory))
    indices = list(range(len(requests)))
    ops = ops_from_calls(records, root, initial, indices, set(indices))
    traces = [_render([r for r in records if r.op == index]) for index in indices]
    return Recording(initial, ops, requests, expected, traces, tamper.name)


# -- judging one state ------------------------------------------------------------------------


def materialise(root: Path, files: Sequence[tuple[str, int, bytes]]) -> None:
    """Writes a crash state's files into the empty directory ``root`` (names sharing an inode
    become hard links), each 0600."""
    written: dict[int, Path] = {}
    for name, ino, data in files:
        path = root / name
        if ino in written:
            os.link(written[ino], path)
            continue
        path.write_bytes(data)
        path.chmod(0o600)
        written[ino] = path


def _where(recording: Recording, state: CrashState) -> str:
    """Says when the crash happened, e.g. ``during replace <s2> by <r1> (2 of 4), before its
    step 9``."""
    total = len(recording.requests)
    if not state.in_flight:
        done = state.acknowledged
        if done == 0:
            return "before the first mutation"
        return f"after {recording.names[done - 1]} ({done} of {total}) was acknowledged"
    op = recording.ops[state.point - 1]
    following = next(
        (later for later in recording.ops[state.point :] if later.mutation == op.mutation), None
    )
    at = f"before its step {following.step}" if following and following.kind != "ack" else ""
    at = at or "after its last file-system call, before it returned"
    return f"during {recording.names[op.mutation]} ({op.mutation + 1} of {total}), {at}"


def _show(entries: Sequence[str] | None) -> str:
    if entries is None:
        return "an unreadable file"
    return "[" + ", ".join(entry.split(" ", 1)[0] for entry in entries) + "]"


def _strange(found: Sequence[str] | None, allowed: Sequence[tuple[str, ...]]) -> str:
    """Names the entries found that no allowed state holds (a torn entry keeps its tag)."""
    known = {entry for entries in allowed for entry in entries}
    strange = [entry for entry in found or () if entry not in known]
    return f", with {', '.join(repr(entry[:40]) for entry in strange[:3])}" if strange else ""


@dataclass(frozen=True)
class Judgement:
    """How a check judges a crash state: the clause of a wrong file, the mutation states that
    are allowed (indices into ``Recording.expected``), and whether a recovery add runs instead
    of the file judgement."""

    clause: str
    allowed: Callable[[Recording, CrashState], list[int]]
    recovery: bool = False


def _old_or_new(recording: Recording, state: CrashState) -> list[int]:
    upper = state.acknowledged + (1 if state.in_flight else 0)
    if state.model == "process-crash":
        return list(range(state.acknowledged, upper + 1))
    return list(range(upper + 1))


def _acknowledged_kept(recording: Recording, state: CrashState) -> list[int]:
    upper = state.acknowledged + (1 if state.in_flight else 0)
    return list(range(state.acknowledged, upper + 1))


OLD_OR_NEW = Judgement("CRASH-4", _old_or_new)
RECOVERY = Judgement("CRASH-2", _old_or_new, recovery=True)
DURABLE = Judgement("CRASH-5", _acknowledged_kept)


def shape(state: CrashState) -> tuple[object, ...]:
    """Returns what the recovery add depends on: names, links and the bytes of MEMORY.md."""
    first: dict[int, str] = {}
    return tuple(
        (name, first.setdefault(ino, name), data if name == "MEMORY.md" else None)
        for name, ino, data in state.files
    )


def _problem(
    ctx: CheckContext, recording: Recording, state: CrashState, judgement: Judgement, number: int
) -> Problem | None:
    """Materialises ``state`` in a fresh root, opens a fresh session on it and returns what is
    wrong (``None``: nothing)."""
    root = ctx.scratch / f"state-{state.model}-{number}"
    root.mkdir()
    try:
        materialise(root, state.files)
        with ctx.session(LIMITS, root=root) as session:
            session.request("load")
            if judgement.recovery:
                return _judge_recovery(session, state, root)
            return _judge_files(session, recording, state, judgement, root)
    except BackendDefect as defect:
        if not (judgement.recovery and defect.hung):
            raise
        # CRASH-3: a fresh session that hangs on the files a crash left is held by them (a
        # lock file whose existence means locked, as a rule): nothing a crash leaves keeps the
        # next mutation from completing
        return Problem(
            "CRASH-3",
            f"after the crash a fresh session's {_short_sent(defect.sent)} did not return "
            "within its timeout: a crash must never leave the target locked",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _short_sent(sent: object) -> str:
    return str(sent.get("op", "request")) if isinstance(sent, dict) else "request"


def _data(root: Path) -> bytes | None:
    data = root / "MEMORY.md"
    return data.read_bytes() if data.exists() else None


def _batch_halves(recording: Recording, state: CrashState) -> list[tuple[str, ...]]:
    """Returns the entries after each proper, non-empty prefix of the items of the batch in flight
    in ``state`` (none when no batch is): what a batch applied item by item leaves when a crash
    cuts it, which BATCH-2 forbids."""
    index = state.acknowledged
    if not state.in_flight or index >= len(recording.requests):
        return []
    request = recording.requests[index]
    items = request.get("operations")
    if request["op"] != "batch" or not isinstance(items, list):
        return []
    model = initial_state(LIMIT, memory=encode_entries(recording.expected[index]))
    halves: list[tuple[str, ...]] = []
    for item in items[:-1]:
        fields = {key: value for key, value in item.items() if key != "action"}
        single: Request = {"op": item["action"], "target": "memory", **fields}  # type: ignore[typeddict-item]  # an item's fields are the op's
        _, model = step(model, mutation_of(single["op"], single))
        halves.append(entries_on_disk(model, "memory") or ())
    final = recording.expected[index + 1] if index + 1 < len(recording.expected) else None
    return [half for half in halves if half not in (recording.expected[index], final)]


def _judge_files(
    session: Any, recording: Recording, state: CrashState, judgement: Judgement, root: Path
) -> Problem | None:
    """The entries a fresh session finds, and those MEMORY.md's bytes parse to, are allowed."""
    allowed = [recording.expected[index] for index in judgement.allowed(recording, state)]
    choices = " or ".join(_show(entries) for entries in dict.fromkeys(allowed))
    clause = "CRASH-1" if state.model == "process-crash" else judgement.clause
    found = tuple(session.request("entries", target="memory")["entries"])
    halves = _batch_halves(recording, state)
    # BATCH-2: a batch is all or nothing; a state holding some of its items is the batch's.
    if found in halves or classify_bytes(_data(root), LIMIT).entries in halves:
        return Problem(
            "BATCH-2",
            f"a fresh session finds {_show(found)}, the batch in flight with only some of its "
            f"items applied; the spec allows only {choices}",
        )
    # CRASH-1, CRASH-4, CRASH-5: the file is as an allowed mutation left it.
    if found not in allowed:
        return Problem(
            clause,
            f"a fresh session finds {_show(found)}{_strange(found, allowed)}; the spec "
            f"allows only {choices}",
        )
    data = root / "MEMORY.md"
    raw = data.read_bytes() if data.exists() else None
    on_disk = classify_bytes(raw, LIMIT).entries
    # CRASH-1, CRASH-4: never torn, empty or mixed on disk either (a durable store may recover
    # from elsewhere, so CRASH-5 judges what a session finds).
    if on_disk not in allowed and judgement.clause != "CRASH-5":
        return Problem(
            clause,
            f"MEMORY.md holds {_show(on_disk)}{_strange(on_disk, allowed)} "
            f"({len(raw or b'')} bytes); the spec allows only {choices}",
        )
    return None


def _judge_recovery(session: Any, state: CrashState, root: Path) -> Problem | None:
    """An add succeeds, replaces MEMORY.md by a new file and removes the crash's temps."""
    left = {name for name, _, _ in state.files}
    strays = {name: key for name, key in stray_files(root).items() if name in left}
    data = root / "MEMORY.md"
    before = _ino(data)
    kind = classify_bytes(data.read_bytes() if data.exists() else None, LIMIT).kind
    answer = session.request("add", target="memory", content="<p1> probe after the crash")
    # DRIFT-1: a file the crash left whole is worked on as it is, never refused as drift.
    if refuses_worked_on_file(kind, answer):
        return Problem(
            "DRIFT-1",
            f"after the crash the next add answered {answer} for a {kind} file, which "
            "is worked on as it is",
        )
    # READ-6: a file the crash left undecodable refuses every mutation, lock or none (that
    # torn file is CRASH-1's, judged on the state itself).
    if kind == "unreadable" and answer.get("code") == codes.E_UNREADABLE:
        return None
    # CRASH-3: nothing a crash leaves keeps the next mutation from completing.
    if answer.get("code") != "OK":
        return Problem(
            "CRASH-3",
            f"after the crash the next add answered {answer}: a crash must never leave "
            "the target locked or the store unable to write",
        )
    linked = [name for name, (ino, _) in strays.items() if before is not None and ino == before]
    # CRASH-2: a temp name the crash left is removed, never written through to the live file.
    if linked and _ino(data) == before:
        return Problem(
            "CRASH-2",
            f"the add after the crash wrote MEMORY.md in place through {linked[0]}, a "
            "second name of it the crash left (the inode of MEMORY.md did not change): create "
            "each temp file under a new unique name with O_EXCL and remove stale ones under the "
            "lock, so that no name a crash leaves can point at the live file",
        )
    now = stray_files(root)
    kept = [name for name, key in strays.items() if now.get(name) == key]
    # CRASH-2: the crash's temp files are gone once a later mutation completed (a sidecar of
    # the store's own that the add rewrote is not one of them).
    if kept:
        return Problem(
            "CRASH-2",
            f"{', '.join(kept)} left by the crash {'is' if len(kept) == 1 else 'are'} "
            "still in the root after the next add completed; remove stale temp files under the "
            "lock so that they never accumulate",
        )
    return None


def _ino(path: Path) -> int | None:
    try:
        return os.lstat(path).st_ino
    except OSError:
        return None


def judge_model(
    ctx: CheckContext, recording: Recording, model: str, judgement: Judgement
) -> tuple[Problem | None, dict[str, Any]]:
    """Judges the crash states ``model`` allows; returns the first failure, explained, or
    ``None``, and the figures (states, judged, seconds, capped).

    Every state's files are judged (a command backend's once per shape and acknowledgement,
    below ``thorough``); the recovery add runs once per shape, below ``thorough``."""
    started = time.monotonic()
    profile = ctx.profile
    command = ctx.backend.runs is Runs.COMMAND  # each state costs a process start
    generated = crash_states(
        recording.initial,
        recording.ops,
        model,
        limit=profile.crash_states,
        per_point=(profile.command_states_per_point if command else profile.crash_states_per_point),
    )
    failure = None
    judged = 0
    seen: set[tuple[object, ...]] = set()
    for number, state in enumerate(generated.states):
        if judgement.recovery and not profile.every_crash_state:
            key: tuple[object, ...] = shape(state)
        elif command and not profile.every_crash_state:
            key = (shape(state), state.acknowledged, state.in_flight)
        else:
            key = (number,)
        if key in seen:
            continue
        seen.add(key)
        judged += 1
        problem = _problem(ctx, recording, state, judgement, number)
        if problem is not None:
            failure = _explained(recording, state, problem)
            break
    figures = {
        "states": len(generated.states),
        "judged": judged,
        "seconds": round(time.monotonic() - started, 3),
        "capped": generated.capped,
    }
    return failure, figures


def _explained(recording: Recording, state: CrashState, problem: Problem) -> Problem:
    """Returns ``problem`` with where the crash happened and why the state is possible."""
    loss = "a process crash" if state.model == "process-crash" else "a power loss"
    reasons = explain(state, recording.ops, recording.initial, recording.names)
    why = "; ".join(reasons) if reasons else "every operation issued before the crash persisted"
    mutation = recording.ops[state.point - 1].mutation if state.point else 0
    return Problem(
        problem.clause,
        f"under {state.model}, {loss} {_where(recording, state)}: {problem.text}. "
        f"In this crash state {why}. (Trace of {recording.names[mutation]}, recorded by "
        f"{recording.recorder}: {recording.traces[mutation]})",
    )


def _run(ctx: CheckContext, models: Sequence[str], judgement: Judgement, key: str) -> None:
    features = _setup(ctx)
    recording = record(ctx, "batch" in features)
    failures = []
    for model in models:
        failure, figures = judge_model(ctx, recording, model, judgement)
        for name, value in figures.items():
            ctx.figures[f"{key} {model} {name}"] = value
        if failure is not None:
            failures.append(failure)
    ctx.figures[f"{key} recorder"] = recording.recorder
    # CRASH-1..5: every crash state is judged (the first failure of each model is shown).
    if failures:
        raise ClauseFailures([Violation.of(failure) for failure in failures], completed=True)


@check("CRASH-1", "CRASH-4", id="crashstates.crash_states_are_old_or_new")
def crash_states_are_old_or_new(ctx: CheckContext) -> None:
    """Records an add, replace, remove (and batch) on a seeded store; in every crash state of
    the process-crash model, and for a backend claiming ``crash-safe`` of the posix-weak and
    ext4-ordered models too, a fresh session finds MEMORY.md as a mutation left it, never torn,
    empty or mixed (CRASH-1, which binds every backend; CRASH-4, which binds a backend that
    claims ``crash-safe``)."""
    confirm_plain_run(ctx, "a crash state")
    models = MODELS if "crash-safe" in ctx.claimed_features() else ("process-crash",)
    _run(ctx, models, OLD_OR_NEW, "old-or-new")


@check("CRASH-2", "CRASH-3", features=("crash-safe",), id="crashstates.every_crash_state_recovers")
def every_crash_state_recovers(ctx: CheckContext) -> None:
    """In every crash state of the three models, the next add succeeds (no lock is left held)
    and removes the temp files the crash left, never writing through them (CRASH-2, CRASH-3)."""
    _run(ctx, MODELS, RECOVERY, "recovery")


@check(
    "CRASH-5",
    "ATOMIC-3",
    features=("durable",),
    id="crashstates.acknowledged_mutations_survive_power_loss",
)
def acknowledged_mutations_survive_power_loss(ctx: CheckContext) -> None:
    """Every crash state of the posix-weak and ext4-ordered models keeps every mutation that
    was acknowledged before the power loss (CRASH-5, ATOMIC-3)."""
    confirm_plain_run(ctx, "a power loss")
    _run(ctx, POWER_LOSS_MODELS, DURABLE, "durable")
