"""The two drivers an example runs in: the spec model (:class:`ModelDriver`; a disagreement is a
bug in SPEC.md) and a backend on a fresh root through the contract (:class:`BackendDriver`,
reading the files from the disk, with the model stepped beside it)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

from memspec.conformance.examples.failure import model_entries
from memspec.conformance.transport.backend import Backend, Session
from memspec.conformance.transport.wire import Answer, Fields
from memspec.spec import codes, model
from memspec.spec.codec import (
    FileState,
    classify_bytes,
    encode_entries,
)
from memspec.spec.examples import Example
from memspec.spec.operations import (
    ExternalWrite,
    Load,
    Mutation,
)
from memspec.spec.requests import MUTATIONS, operation_of
from memspec.spec.root_files import file_kind
from memspec.spec.rules import Outcome, argument_error, decide
from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS
from memspec.spec.tool import (
    ToolCall,
    normative_result,
    offered_actions,
    parse_call,
    schema_parameters,
    watched_target,
)

MODEL_ACTIONS = offered_actions({"patch"})


def answer_of(outcome: Outcome) -> Answer:
    """Returns the answer a backend gives for the model's ``outcome``."""
    answer: Answer = {"ok": outcome.ok, "code": outcome.code}
    if outcome.matches:
        answer["matches"] = list(outcome.matches)
    if outcome.duplicate:
        answer["duplicate"] = True
    if outcome.usage is not None:
        answer["usage"] = outcome.usage
    return answer


@dataclass
class ModelDriver:
    """The spec model as a driver. ``last_read`` holds, per session and target, the entries the
    session last read while the file was readable, which it reports once it is not (READ-8)."""

    state: model.State
    last_read: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    last: Outcome | None = None
    """The model's outcome of the last mutation, with the clause that decided a refusal."""

    @classmethod
    def for_example(cls, example: Example) -> ModelDriver:
        """Returns a driver on an empty root with the example's limits."""
        limits = {**DEFAULT_LIMITS, **example.limits}
        return cls(model.initial_state(limits["memory"], limits["user"]))

    def put(self, target: str, data: bytes | None) -> None:
        """Steps an external write."""
        _, self.state = model.step(self.state, ExternalWrite(target, data))

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Steps the model and answers like a backend would."""
        if op == "entries":
            target = fields["target"]
            last = self.last_read.get((session, target), ())
            return {
                "ok": True,
                "code": "OK",
                "entries": list(model.session_entries(self.state, target, last)),
            }
        if op == "snapshot":
            return {
                "ok": True,
                "code": "OK",
                "snapshot": model.snapshot_of(self.state, session, fields["target"]),
            }
        if op == "tool_schema":
            parameters = schema_parameters(MODEL_ACTIONS, batch=True)
            schema = {"name": "memory", "description": "the model's tool", "parameters": parameters}
            return {"ok": True, "code": "OK", "schema": schema}
        if op == "tool_call":
            return {"ok": True, "code": "OK", "result": self._tool_call(session, fields)}
        operation = operation_of(op, fields, session)
        outcome, self.state = model.step(self.state, operation)
        self.last = outcome
        self._remember_reads(session, operation)
        return answer_of(outcome)

    def _tool_call(self, session: str, fields: Fields) -> str:
        """Answers a tool call with the spec's normative result (TOOL-5 to TOOL-13): the model
        claims every feature, so it offers every action, the batch shape and the scan."""
        arguments = fields["arguments"]
        parsed = parse_call(arguments, MODEL_ACTIONS, batch=True)
        target = parsed.target if isinstance(parsed, ToolCall) else watched_target(arguments)
        limit = model.limit_of(self.state, target)
        outcome = None
        before = self._entries(session, target)
        if isinstance(parsed, ToolCall):
            operation = replace(parsed.operation, session=session)
            if argument_error(operation) is None:
                before = model.entries_on_disk(self.state, target) or before
            outcome, self.state = model.step(self.state, operation)
            self._remember_reads(session, operation)
        after = self._entries(session, target)
        result = normative_result(
            parsed, outcome, before, after, limit, target=target, actions=MODEL_ACTIONS, scan=True
        )
        return json.dumps(result, ensure_ascii=False)

    def _entries(self, session: str, target: str) -> tuple[str, ...]:
        last = self.last_read.get((session, target), ())
        return tuple(model.session_entries(self.state, target, last))

    def _remember_reads(self, session: str, operation: Load | Mutation) -> None:
        """Records what ``session`` read from readable files in the step just taken: both files
        at a load, the mutated one when the arguments passed and the store read it."""
        if isinstance(operation, Load):
            targets: tuple[str, ...] = TARGETS
        elif argument_error(operation) is None:
            targets = (operation.target,)
        else:
            targets = ()
        for target in targets:
            entries = model.entries_on_disk(self.state, target)
            if entries is not None:
                self.last_read[(session, target)] = entries

    def disk(self, target: str) -> bytes | None:
        """Returns the model's file bytes."""
        return model.disk(self.state, target)

    def backups(self, target: str) -> list[bytes]:
        """Returns the backups the model requires."""
        return sorted(model.backups_of(self.state, target))

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the session's entries in the model."""
        return list(self._entries(session, target))

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the model's file bytes."""
        return self.disk(target)

    def spec_outcome(self) -> Outcome | None:
        """Returns the model's outcome of the last mutation."""
        return self.last


@dataclass
class BackendDriver:
    """A backend as a driver: sessions opened lazily on one fresh root."""

    backend: Backend
    root: Path
    limits: Mapping[str, int]
    sessions: dict[str, Session] = field(default_factory=dict)
    model: ModelDriver | None = None
    """The spec model stepped beside the backend, to tell an acknowledged write that is not in
    the file (ATOMIC-5)."""
    unwritten: list[str] = field(default_factory=list)
    """Each acknowledged change after which the file still held the model's state from before."""
    stale: list[str] = field(default_factory=list)
    """Each acknowledged change written from the session's earlier read, not from the file."""

    def put(self, target: str, data: bytes | None) -> None:
        """Writes (or deletes) the file directly, as an editor would."""
        path = self.root / FILENAMES[target]
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)
        if self.model is not None:
            self.model.put(target, data)

    def request(self, session: str, op: str, fields: Fields) -> Answer:
        """Sends ``op`` in ``session``, opening the session first if needed."""
        if session not in self.sessions:
            self.sessions[session] = self.backend.open(self.root, self.limits)
        answer = self.sessions[session].request(op, **fields)
        if self.model is not None:
            self._follow(self.model, session, op, fields, answer)
        return answer

    def _follow(
        self, shadow: ModelDriver, session: str, op: str, fields: Fields, answer: Answer
    ) -> None:
        """Steps the model too, and notes an acknowledged change whose file is not the model's:
        one answered as the model answers it whose file holds what it held before (ATOMIC-5:
        the result of an ``OK`` is already in the file), or a change answered and written as the
        model makes it of the entries the session last read, not of the file (LOCK-2). Any other
        difference is the store's own idea of the change, the example's clauses' business."""
        target = str(fields.get("target"))
        if op not in MUTATIONS or target not in TARGETS:
            shadow.request(session, op, fields)
            return
        limit = model.limit_of(shadow.state, target)
        data = shadow.disk(target)
        file, before = classify_bytes(data, limit), model_entries(data)
        seen = shadow.last_read.get((session, target), ())
        expected = shadow.request(session, op, fields)
        written = model_entries(self.disk(target))
        modelled = model_entries(shadow.disk(target))
        if same_outcome(answer, expected) and written == modelled:
            return
        if answer.get("code") == codes.OK and same_outcome(answer, expected) and written == before:
            self.unwritten.append(
                f"{op} {target} answered OK, but {FILENAMES[target]} then still held what it "
                "held before (ATOMIC-5)"
            )
            return
        operation = cast(Mutation, operation_of(op, fields, session))
        # a refusal writes nothing, so it cannot show which entries it was decided on
        changed = answer.get("code") == codes.OK and written != before
        # nor can a session that read nothing be told from one that reads a file as empty
        stale = list(seen) != before and bool(before or seen)
        if not changed or not stale or argument_error(operation) is not None:
            return
        # the file's kind with the entries read earlier, or the earlier entries as they were
        for view in (FileState(file.kind, seen), classify_bytes(encode_entries(seen), limit)):
            outcome, result = decide(operation, view, limit)
            kept = before if result is None else list(result)
            if same_outcome(answer, answer_of(outcome)) and written == kept:
                self.stale.append(
                    f"{op} {target} answered {answer.get('code')} and wrote what it makes of the "
                    f"entries this session last read, {list(seen)}, not of the file's {before} "
                    "(LOCK-2)"
                )
                return

    def disk(self, target: str) -> bytes | None:
        """Reads the file's bytes from the disk."""
        path = self.root / FILENAMES.get(target, str(target))
        return path.read_bytes() if path.is_file() else None

    def backups(self, target: str) -> list[bytes]:
        """Reads every ``NAME.bak.<suffix>`` file of the target (CONTRACT-11, DRIFT-3)."""
        name = FILENAMES.get(target, str(target))
        return sorted(
            p.read_bytes()
            for p in self.root.iterdir()
            if file_kind(p.name, name) == "backup" and p.is_file()
        )

    def spec_entries(self, session: str, target: str) -> list[str] | None:
        """Returns the session's entries in the model stepped beside the backend, if any."""
        return None if self.model is None else self.model.spec_entries(session, target)

    def spec_disk(self, target: str) -> bytes | None:
        """Returns the file's bytes in the model stepped beside the backend, if any."""
        return None if self.model is None else self.model.disk(target)

    def spec_outcome(self) -> Outcome | None:
        """Returns the outcome of the last mutation of the model beside the backend, if any."""
        return None if self.model is None else self.model.spec_outcome()

    def close(self) -> None:
        """Closes every session (errors of a broken backend are ignored here)."""
        for session in self.sessions.values():
            with contextlib.suppress(Exception):
                session.close()


def same_outcome(answer: Answer, expected: Answer) -> bool:
    """Whether ``answer`` says what the model's ``expected`` says: the code, whether the text was
    a duplicate, and the usage where the backend gives one."""
    return (
        answer.get("code") == expected["code"]
        and bool(answer.get("duplicate")) == bool(expected.get("duplicate"))
        and answer.get("usage", expected.get("usage")) == expected.get("usage")
    )
