"""The pure model of a memory root: the oracle for examples, fuzzers and the linearizability
checker. No file system, no clock.

Two functions over immutable, hashable states, like Porcupine's ``Init`` and ``Step``: ``outcome,
state = step(initial_state(), Add("memory", "User prefers tabs"))``. A state holds each file's bytes
as on disk, the backups the spec requires and each session's frozen snapshot; an
:class:`ExternalWrite` models another writer, so drift and undecodable bytes are states too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memspec.spec import codes
from memspec.spec.codec import FileState, classify_bytes, encode_entries
from memspec.spec.operations import ExternalWrite, Load, Mutation, Operation
from memspec.spec.rules import Outcome, argument_error, decide
from memspec.spec.snapshot import render_snapshot, render_unreadable
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS
from memspec.spec.threats import find_threats

Snapshots = tuple[str | None, str | None]


@dataclass(frozen=True)
class State:
    """A State is the disk of one root plus what each session captured at its last load: ``files``
    and ``limits`` indexed like :data:`TARGETS`, ``backups`` the set of ``(target, bytes)`` a
    conforming store must keep (DRIFT-4), ``snapshots`` the sessions' frozen blocks as sorted pairs.
    """

    limits: tuple[int, int]
    files: tuple[bytes | None, bytes | None]
    backups: frozenset[tuple[str, bytes]] = frozenset()
    snapshots: tuple[tuple[str, Snapshots], ...] = ()


def initial_state(
    memory_char_limit: int = DEFAULT_LIMITS["memory"],
    user_char_limit: int = DEFAULT_LIMITS["user"],
    memory: bytes | None = None,
    user: bytes | None = None,
) -> State:
    """Returns the state of a root holding the given files (``None``: no file), never loaded,
    with the default limits 2,200 and 1,375 (FORMAT-1) or one limit per target (LIMIT-6)."""
    for name, limit in (
        ("memory_char_limit", memory_char_limit),
        ("user_char_limit", user_char_limit),
    ):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{name} must be a positive int, got {limit!r}")
    return State((memory_char_limit, user_char_limit), (memory, user))


def _index(target: str) -> int:
    return TARGETS.index(target)


def disk(state: State, target: str) -> bytes | None:
    """Returns the bytes of ``target``'s file (``None`` when absent)."""
    return state.files[_index(target)]


def limit_of(state: State, target: str) -> int:
    """Returns ``target``'s char limit, its own and never the other's (LIMIT-6)."""
    return state.limits[_index(target)]


def entries_on_disk(state: State, target: str) -> tuple[str, ...] | None:
    """Returns the entries a fresh reader finds in ``target``'s file; ``None`` if unreadable."""
    return classify_bytes(disk(state, target), limit_of(state, target)).entries


def session_entries(state: State, target: str, last_read: tuple[str, ...]) -> tuple[str, ...]:
    """Returns the entries a session reports for ``target`` now, given ``last_read``, the entries it
    last read while the file was readable (``()`` if it never did): the file's own while it is
    readable, else ``last_read`` (READ-8)."""
    on_disk = entries_on_disk(state, target)
    return last_read if on_disk is None else on_disk


def render_from_disk(state: State, target: str) -> str | None:
    """Returns the block a load captures for ``target`` now: the file as it is on disk at that
    moment (SNAP-2), rendered with its threats blocked (SCAN-6), or the unreadable block when it
    cannot be decoded (SNAP-9)."""
    entries = entries_on_disk(state, target)
    if entries is None:
        return render_unreadable(target)
    return render_snapshot(target, entries, limit_of(state, target), find_threats)


def snapshot_of(state: State, session: str, target: str) -> str | None:
    """Returns the block ``session`` captured at its last load (``None`` before any load), unchanged
    by any write until its next load (SNAP-1, SNAP-3)."""
    for name, blocks in state.snapshots:
        if name == session:
            return blocks[_index(target)]
    return None


def backups_of(state: State, target: str) -> frozenset[bytes]:
    """Returns the contents that must exist as byte-exact backups of ``target`` (DRIFT-3,
    DRIFT-4)."""
    return frozenset(data for name, data in state.backups if name == target)


def _with_file(state: State, target: str, data: bytes | None) -> State:
    files = list(state.files)
    files[_index(target)] = data
    return replace(state, files=(files[0], files[1]))


def _load(state: State, session: str) -> State:
    """Returns the state after ``session`` loads: its blocks captured from the disk now (SNAP-1,
    SNAP-2), every other session's blocks untouched (SNAP-10)."""
    blocks = (render_from_disk(state, "memory"), render_from_disk(state, "user"))
    others = tuple(pair for pair in state.snapshots if pair[0] != session)
    return replace(state, snapshots=tuple(sorted((*others, (session, blocks)))))


def _mutate(state: State, op: Mutation) -> tuple[Outcome, State]:
    """Returns the outcome of a mutation and the state after it: decided on the file's bytes at this
    step (LOCK-2, CONTRACT-7), a byte-exact backup before an ``E_DRIFT`` (DRIFT-3) or a rewrite of a
    foreign file (DRIFT-2), an accepted change in canonical form in the same step (ATOMIC-5,
    FORMAT-4, FORMAT-5)."""
    refusal = argument_error(op)
    if refusal is not None:
        return refusal, state
    target = op.target
    data = disk(state, target)
    file = classify_bytes(data, limit_of(state, target))
    other = limit_of(state, "user" if target == "memory" else "memory")
    outcome, result = decide(op, file, limit_of(state, target), other)
    if data is not None and needs_backup(file, outcome, result):
        state = replace(state, backups=state.backups | {(target, data)})
    if result is not None:
        state = _with_file(state, target, encode_entries(result))
    return outcome, state


def needs_backup(file: FileState, outcome: Outcome, result: tuple[str, ...] | None) -> bool:
    """Returns whether a store must hold a byte-exact backup of the file it met after answering
    ``outcome``: the refusal of a foreign file (DRIFT-3), or a rewrite of one (DRIFT-2)."""
    return file.kind == "foreign" and (outcome.code == codes.E_DRIFT or result is not None)


def step(state: State, op: Operation) -> tuple[Outcome, State]:
    """Returns the outcome of ``op`` in ``state`` and the state after it."""
    if isinstance(op, Load):
        return Outcome(codes.OK), _load(state, op.session)
    if isinstance(op, ExternalWrite):
        return Outcome(codes.OK), _with_file(state, op.target, op.data)
    return _mutate(state, op)
