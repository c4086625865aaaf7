"""The reference store: bounded, file-backed memory that keeps every clause of SPEC.md.

One :class:`Store` is one session; many, in one process or many, may open the same root. Every
mutation takes the target's lock, re-reads the file, decides with the spec's rule functions and
writes atomically (LOCK-1, LOCK-2, LOCK-3, ATOMIC-1); snapshot reads take no lock (ATOMIC-2).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memspec.reference_impl import files, tool
from memspec.spec import codes
from memspec.spec.codec import FileState, classify_bytes, encode_entries
from memspec.spec.operations import Add, Batch, Mutation, Patch, Remove, Replace
from memspec.spec.rules import Outcome, argument_error, decide
from memspec.spec.snapshot import render_snapshot, render_unreadable
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS, is_target
from memspec.spec.threats import find_threats

if TYPE_CHECKING:
    from memspec.reference_impl.agent import AgentSession

FEATURES = (
    "core",
    "batch",
    "fence",
    "multi-process",
    "crash-safe",
    "durable",
    "drift-guard",
    "threat-scan",
    "patch",
    "agent",
    "tool",
)

_MESSAGES: dict[str, Callable[[str], str]] = {
    codes.E_TARGET: lambda name: "target must be 'memory' or 'user'",
    codes.E_INVALID: lambda name: (
        "malformed request: arguments must be strings; batch items "
        "need an action of add/replace/remove with their string fields"
    ),
    codes.E_EMPTY: lambda name: (
        "nothing to do: the text (or the entry a patch would leave) is empty after stripping"
        " whitespace; remove deletes an entry"
    ),
    codes.E_DELIMITER: lambda name: (
        "content has a line that is '§' alone (or cannot be encoded"
        " as UTF-8); it would come back as several entries"
    ),
    codes.E_THREAT: lambda name: "content matches a threat pattern and was not stored",
    codes.E_NOMATCH: lambda name: f"no entry of {name} contains that text",
    codes.E_AMBIGUOUS: lambda name: (
        "that text matches several different entries, or several places of one entry;"
        " use a longer, unique substring"
    ),
    codes.E_LIMIT: lambda name: f"{name} would exceed its limit; remove or shorten entries first",
}


def _answer(outcome: Outcome, name: str, **extra: Any) -> dict[str, Any]:
    """Returns the contract Outcome mapping for a model outcome: ``ok``, ``code`` and the
    optional ``message``, ``matches``, ``usage`` and ``duplicate`` (CONTRACT-3)."""
    answer: dict[str, Any] = {"ok": outcome.ok, "code": outcome.code}
    message = _MESSAGES.get(outcome.code)
    if message is not None:
        answer["message"] = message(name)
    if outcome.threats:
        answer["message"] += ": " + ", ".join(outcome.threats)
    if outcome.item is not None:
        answer["message"] = f"batch item {outcome.item}: {answer.get('message', outcome.code)}"
    if outcome.matches:
        answer["matches"] = list(outcome.matches)
    if outcome.usage is not None:
        answer["usage"] = outcome.usage
    if outcome.duplicate:
        answer["duplicate"] = True
        answer["message"] = "that exact entry is already stored; nothing changed"
    answer.update(extra)
    return answer


def _failure(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "code": code, "message": message, **extra}


def _save_backup(path: Path, data: bytes) -> tuple[Path, str | None]:
    """Saves the byte-exact backup of ``data``, the bytes of ``path`` (DRIFT-3), and returns its
    path, with a note when the directory could not be synced after it: the backup is in place
    all the same, so the answer stays the one owed without the failure (ATOMIC-3)."""
    try:
        return files.write_backup(path, data), None
    except files.NotDurableError as error:
        return Path(error.filename), f"backed up, but not confirmed durable: {error.strerror}"


class Store:
    """A Store is one session on a memory root, with the methods of CONTRACT-2: ``entries`` reflects
    the disk as of its last load or mutation (CONTRACT-8), ``snapshot`` the blocks frozen by the
    last :meth:`load` (SNAP-1); a mutation needs no load first (CONTRACT-7)."""

    features = FEATURES

    def __init__(self, root: Path, *, memory_char_limit: int, user_char_limit: int) -> None:
        self.root = root
        self.limits = {"memory": memory_char_limit, "user": user_char_limit}
        self._live: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
        self._snapshots: dict[str, str | None] = {target: None for target in TARGETS}
        self.last_decision: tuple[Outcome, tuple[str, ...]] = (Outcome(codes.OK), ())
        """The outcome of the last mutation and the entries it was applied to (the entries read
        under the lock, or the session's own for a refusal of the arguments): what the tool's
        result reports (TOOL-9, TOOL-11)."""

    def _path(self, target: str) -> Path:
        return self.root / FILENAMES[target]

    def _read(self, target: str) -> FileState:
        """Returns the state of ``target``'s file; one that cannot be read at all is unreadable,
        never empty (READ-7)."""
        try:
            data = files.read_file(self._path(target))
        except OSError:
            return FileState("unreadable", None)
        return classify_bytes(data, self.limits[target])

    def load(self) -> None:
        """Reads both files and freezes the snapshot until the next load (SNAP-1, SNAP-2), this
        session's only (SNAP-10): the spec's :func:`render_snapshot` (SNAP-3, SNAP-4, SNAP-5,
        SNAP-6, SNAP-7, SNAP-8, SCAN-6, SCAN-7), the unreadable block for an unreadable file
        (SNAP-9)."""
        for target in TARGETS:
            state = self._read(target)
            if state.entries is None:
                self._snapshots[target] = render_unreadable(target)
                continue
            self._live[target] = state.entries
            self._snapshots[target] = render_snapshot(
                target, state.entries, self.limits[target], find_threats
            )

    def entries(self, target: str) -> list[str]:
        """Returns the live entries of ``target`` as this session last saw them (CONTRACT-8): a
        load or mutation that finds the file unreadable leaves them as they were (READ-8)."""
        self._check_target(target)
        return list(self._live[target])

    def snapshot(self, target: str) -> str | None:
        """Returns the block frozen by the last load, ``None`` for an empty target (SNAP-1,
        SNAP-3)."""
        self._check_target(target)
        return self._snapshots[target]

    def fence(self, raw: str) -> str:
        """Returns the ``<memory-context>`` block for recalled text (CONTRACT-10, FENCE-1). The
        fence's finders are imported here, by the sessions that fence: building them is about 4 ms
        of each ``memspec serve`` process's start."""
        from memspec.reference_impl.fence import build_fence

        return build_fence(raw)

    def add(self, target: str, content: str) -> dict[str, Any]:
        """Appends one entry; an exact duplicate is an accepted no-op (DUP-1, decided by the spec's
        ``decide``)."""
        return self.mutate(Add(target, content))

    def replace(self, target: str, old_text: str, new_content: str) -> dict[str, Any]:
        """Replaces the whole entry ``old_text`` identifies (REPLACE-1, decided by the spec's
        ``choose_entry`` and ``decide``)."""
        return self.mutate(Replace(target, old_text, new_content))

    def remove(self, target: str, old_text: str) -> dict[str, Any]:
        """Removes the entry ``old_text`` identifies (REMOVE-1, decided by the spec's
        ``choose_entry`` and ``decide``)."""
        return self.mutate(Remove(target, old_text))

    def patch(self, target: str, old_text: str, content: str) -> dict[str, Any]:
        """Replaces exactly the span ``old_text`` inside the one entry that holds it and keeps the
        rest of the entry; offered, with the feature ``patch`` claimed (PATCH-1), decided by the
        spec's ``choose_entry``, ``patch_entry`` and ``decide`` (PATCH-2 to PATCH-10)."""
        return self.mutate(Patch(target, old_text, content))

    def batch(self, target: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """Applies add/replace/remove items all-or-nothing against the final budget; offered, with
        the feature ``batch`` claimed (BATCH-1), decided by the spec's ``decide`` (BATCH-2)."""
        return self.mutate(Batch(target, operations))

    def agent_start(self, base: str, providers: list[Any]) -> dict[str, Any]:
        """Starts the agent over this session with the scripted providers; offered, with the
        feature ``agent`` claimed (AGENT-1, PROV-2, PROV-5)."""
        return self._agent.start(base, providers)

    def agent_turn(self, user: str, reply: str) -> dict[str, Any]:
        """Runs one turn of the agent (AGENT-2, AGENT-4, AGENT-5, AGENT-6, FENCE-6)."""
        return self._agent.turn(user, reply)

    def agent_rebuild(self, point: str) -> dict[str, Any]:
        """Rebuilds the agent's prompt at a rebuild point (AGENT-3)."""
        return self._agent.rebuild(point)

    @functools.cached_property
    def _agent(self) -> AgentSession:
        # Made at a session's first agent op: most sessions never start one, and a served
        # session that imports no agent starts about 13 ms sooner (of 90).
        from memspec.reference_impl.agent import AgentSession

        return AgentSession(self)

    def tool_schema(self) -> dict[str, Any]:
        """Returns the function-calling schema of the memory tool for the claimed features;
        offered, with the feature ``tool`` claimed (TOOL-1, TOOL-2)."""
        return tool.schema(self.features)

    def tool_call(self, arguments: str) -> str:
        """Returns the JSON result the model reads for one call of the memory tool, given the
        argument text as the model sent it; never raises (TOOL-4 to TOOL-13)."""
        return tool.call(self, arguments)

    def close(self) -> None:
        """Releases nothing: the store holds no descriptor between operations."""

    @staticmethod
    def _check_target(target: str) -> None:
        if not is_target(target):
            raise ValueError(f"target must be 'memory' or 'user', got {target!r}")

    def mutate(self, op: Mutation) -> dict[str, Any]:
        """Returns the Outcome of a mutation, never raising for a condition of the code table
        (CONTRACT-6): argument refusals come before the disk is touched (CONTRACT-5), and a lock
        or write that fails is ``E_IO`` with the old file intact (ATOMIC-4, FILES-3). The one
        door of every change: the five operations and the tool's call (TOOL-5) all come here,
        and each path through it sets :attr:`last_decision`."""
        refusal = argument_error(op)
        if refusal is not None:
            live = self._live[op.target] if is_target(op.target) else ()
            self.last_decision = (refusal, live)
            return _answer(refusal, FILENAMES[op.target] if is_target(op.target) else "the store")
        path = self._path(op.target)
        try:
            with files.locked(path) as lock_fd:
                return self._mutate_locked(op, path, lock_fd)
        except OSError as error:
            self.last_decision = (Outcome(codes.E_IO), self._live[op.target])
            return _failure(
                codes.E_IO,
                f"could not write {path.name}: {error.strerror or error}; "
                "the previous file is intact",
            )

    def _mutate_locked(self, op: Mutation, path: Path, lock_fd: int) -> dict[str, Any]:
        """The read-modify-write under the lock.

        Sweeps a crash's temps (CRASH-2) and decides on the file as just read (LOCK-2). Unreadable:
        ``E_UNREADABLE``, nothing written (READ-6, READ-7, DRIFT-7). Foreign: ``E_DRIFT`` after a
        byte-exact backup for a mutation that would grow it or does not apply (DRIFT-2, DRIFT-3,
        DRIFT-6), else it goes through (DRIFT-7). A symlinked data file is never replaced (FILES-4);
        foreign or external bytes are backed up before the rewrite and named in the ``OK``
        (DRIFT-5); the write is atomic and durable before the answer (ATOMIC-1, ATOMIC-3, ATOMIC-5),
        and a failed directory sync still answers ``OK`` with a message.
        """
        files.remove_stale_temps(path)
        limit = self.limits[op.target]
        self.last_decision = (Outcome(codes.E_UNREADABLE), self._live[op.target])
        try:
            data = files.read_file(path)
        except OSError as error:
            return _failure(
                codes.E_UNREADABLE,
                f"could not read {path.name} ({error.strerror or error}); nothing was written",
            )
        state = classify_bytes(data, limit)
        if state.entries is None:
            return _failure(
                codes.E_UNREADABLE,
                f"{path.name} is not valid UTF-8; nothing was written. The memory tool cannot "
                "address entries in bytes it cannot decode, so a person must repair the file: "
                "re-save it as UTF-8, or move it aside (the store then starts a new file).",
            )
        self._live[op.target] = state.entries
        outcome, result = decide(op, state, limit)
        self.last_decision = (outcome, state.entries)
        if outcome.code == codes.E_DRIFT:
            assert data is not None
            backup, _ = _save_backup(path, data)
            return _failure(
                codes.E_DRIFT,
                f"{path.name} holds text written outside the store: an entry longer than the "
                f"{limit:,}-char limit, e.g. text appended without a '§' line. A byte-exact copy "
                f"is in {backup.name}. Nothing can be added until the entry is shortened: "
                "remove it, or replace it with a shorter text (a change that does not make the "
                "file larger goes through, after a backup), or split it into entries separated "
                "by a line holding only '§'.",
                backup=str(backup),
            )
        if result is None:
            return _answer(outcome, path.name)
        if path.is_symlink():
            self.last_decision = (Outcome(codes.E_IO), state.entries)
            return _failure(
                codes.E_IO,
                f"{path.name} is a symbolic link; the store never replaces a link by a regular "
                "file (FILES-4). Write to the link's target yourself, or replace the link.",
            )
        extra: dict[str, Any] = {}
        notes: list[str] = []
        if data and (state.kind == "foreign" or self._is_external(state, lock_fd)):
            backup, note = _save_backup(path, data)
            extra["backup"] = str(backup)
            if note:
                notes.append(note)
        new = encode_entries(result)
        try:
            files.atomic_write(path, new)
        except files.NotDurableError as error:
            notes.append(f"written, but not confirmed durable: {error.strerror}")
        if notes:
            extra["message"] = "; ".join(notes)
        # The write is done; losing the record costs at most one extra backup later (DRIFT-5).
        with contextlib.suppress(OSError):
            files.record_digest(lock_fd, files.digest(new))
        self._live[op.target] = result
        return _answer(outcome, path.name, **extra)

    @staticmethod
    def _is_external(state: FileState, lock_fd: int) -> bool:
        """Whether the file holds entries this store family did not write (DRIFT-5): its canonical
        form's digest is not the one the lock file records."""
        assert state.entries is not None
        if not state.entries:
            return False
        recorded = files.read_recorded_digest(lock_fd)
        return recorded != files.digest(encode_entries(state.entries))


def open_store(
    root: os.PathLike[str] | str,
    *,
    memory_char_limit: int = DEFAULT_LIMITS["memory"],
    user_char_limit: int = DEFAULT_LIMITS["user"],
) -> Store:
    """Returns a new session on ``root``, an existing directory the store owns (CONTRACT-1), with
    the default limits of FORMAT-1 and one limit per target (LIMIT-6); raises ``TypeError`` or
    ``ValueError`` naming the bad argument."""
    if not isinstance(root, str | os.PathLike):
        raise TypeError(f"root must be a path, got {type(root).__name__} {root!r}")
    path = Path(root).absolute()
    if not path.is_dir():
        raise ValueError(f"root must be an existing directory, got {str(path)!r}")
    for name, value in (
        ("memory_char_limit", memory_char_limit),
        ("user_char_limit", user_char_limit),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return Store(path, memory_char_limit=memory_char_limit, user_char_limit=user_char_limit)
