"""Repro files: a failing interleaving saved so that ``memspec repro FILE`` replays it exactly.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.core.locations import scratch_root
from memspec.conformance.core.registry import CheckContext
from memspec.conformance.core.settings import backend_at
from memspec.conformance.schedule.exploration import (
    Execution,
    Program,
    execute,
    render_interleaving,
)
from memspec.conformance.schedule.schedule import ScheduleDiverged, follow
from memspec.conformance.tamper.capability import tampering
from memspec.conformance.transport.backend import Address, Backend
from memspec.conformance.verdict.findings import Violation
from memspec.spec.errors import UsageError
from memspec.spec.requests import OPS
from memspec.spec.targets import TARGETS

FORMAT = "repro"
VERSION = 1


@dataclass(frozen=True)
class Repro:
    """A Repro is the content of a repro file (module docs): ``backend`` is a Python
    backend's ``MODULE:FACTORY``, or empty when ``command`` (run in ``cwd``) names a command
    backend."""

    backend: str
    program: Program
    schedule: tuple[str, ...]
    check: str = ""
    failure: Mapping[str, str] | None = None
    seed: int | None = None
    command: str = ""
    cwd: str = ""

    @property
    def label(self) -> str:
        """The backend in words: its ``MODULE:FACTORY`` or its command."""
        return self.backend or self.command

    def open_backend(self, timeout: float) -> Backend:
        """Returns the backend the repro names."""
        where = Address(factory=self.backend, command=self.command, cwd=self.cwd or os.getcwd())
        return backend_at(where, timeout)

    def to_json(self) -> dict[str, Any]:
        """Returns the repro as the JSON object of its file."""
        return {
            "memspec": FORMAT,
            "version": VERSION,
            "backend": self.backend or None,
            **({"backend_cmd": self.command, "cwd": self.cwd} if self.command else {}),
            "check": self.check,
            "limits": dict(self.program.limits),
            "files": {
                target: None if data is None else data.hex()
                for target, data in self.program.files.items()
            },
            "sessions": [
                {"name": name, "operations": list(operations)}
                for name, operations in self.program.sessions
            ],
            "schedule": list(self.schedule),
            "seed": self.seed,
            "failure": dict(self.failure) if self.failure else None,
        }


def repro_of(
    execution: Execution,
    backend: str,
    check: str = "",
    seed: int | None = None,
    *,
    command: str = "",
    cwd: str = "",
) -> Repro:
    """Returns the repro of a (failing) execution (``seed``: the one its programs came from;
    ``command`` and ``cwd`` for a command backend, with ``backend`` empty)."""
    failure = None
    if execution.finding is not None:
        finding = execution.finding
        failure = {
            "checker": finding.checker,
            "clause": finding.clause,
            "summary": finding.message.split("\n", 1)[0],
        }
    schedule = tuple(execution.schedule)
    return Repro(backend, execution.program, schedule, check, failure, seed, command, cwd)


def save_repro(path: Path, repro: Repro) -> Path:
    """Writes ``repro`` to ``path`` (parents created) and returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(repro.to_json(), indent=1) + "\n", encoding="utf-8")
    return path


def _require(condition: bool, where: Path, message: str) -> None:
    if not condition:
        raise UsageError(f"{where}: not a memspec repro file: {message}")


def load_repro(path: Path) -> Repro:
    """Reads a repro file (raises UsageError naming what is wrong with it)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a memspec repro file: {error}") from None
    _require(
        isinstance(record, dict) and record.get("memspec") == FORMAT,
        path,
        'no "memspec": "repro" marker',
    )
    _require(
        record.get("version") == VERSION,
        path,
        f"version {record.get('version')!r} (this memspec reads version {VERSION})",
    )
    backend, command, cwd = record.get("backend"), record.get("backend_cmd"), record.get("cwd")
    if command is None:
        _require(
            isinstance(backend, str) and ":" in backend, path, "backend must be MODULE:FACTORY"
        )
    else:
        _require(
            backend is None and isinstance(command, str) and bool(command.strip()),
            path,
            'backend_cmd must be a command, with "backend": null',
        )
        _require(cwd is None or isinstance(cwd, str), path, "cwd must be a directory")
    limits = record.get("limits")
    _require(
        isinstance(limits, dict)
        and all(t in TARGETS and isinstance(v, int) and v > 0 for t, v in limits.items()),
        path,
        "limits must map memory/user to positive integers",
    )
    files = record.get("files") or {}
    try:
        _require(isinstance(files, dict) and set(files) <= set(TARGETS), path, "bad files")
        starting = {t: None if v is None else bytes.fromhex(v) for t, v in files.items()}
    except (TypeError, ValueError):
        raise UsageError(f"{path}: not a memspec repro file: files must be hex or null") from None
    sessions = record.get("sessions")
    _require(isinstance(sessions, list) and bool(sessions), path, "no sessions")
    program_sessions = []
    for session in sessions:
        _require(
            isinstance(session, dict)
            and isinstance(session.get("name"), str)
            and isinstance(session.get("operations"), list)
            and all(isinstance(op, dict) and op.get("op") in OPS for op in session["operations"]),
            path,
            "each session needs a name and a list of operations with a known op",
        )
        program_sessions.append((session["name"], tuple(session["operations"])))
    names = [name for name, _ in program_sessions]
    _require(len(set(names)) == len(names), path, "session names must differ")
    schedule = record.get("schedule")
    _require(
        isinstance(schedule, list) and all(name in names for name in schedule),
        path,
        "the schedule must list session names",
    )
    failure = record.get("failure")
    seed = record.get("seed")
    _require(seed is None or isinstance(seed, int), path, "seed must be an integer or null")
    return Repro(
        backend or "",
        Program(tuple(program_sessions), dict(limits), starting),
        tuple(schedule),
        str(record.get("check") or ""),
        failure if isinstance(failure, dict) else None,
        seed,
        command or "",
        cwd or "",
    )


@dataclass
class Replay:
    """A Replay is one replayed run: its execution, or why it diverged."""

    execution: Execution | None
    diverged: str = ""

    @property
    def reproduced(self) -> bool:
        """Whether the replay failed with a finding."""
        return self.execution is not None and self.execution.finding is not None


def replay(repro: Repro, backend: Any = None, timeout: float = 10.0) -> Replay:
    """Replays ``repro`` once on a fresh root (``backend`` overrides the file's)."""
    backend = backend or repro.open_backend(timeout)
    chosen = follow(repro.schedule)
    with scratch_root("memspec-repro-") as root:
        try:
            return Replay(execute(backend, root, repro.program, chosen, tampering(backend)))
        except ScheduleDiverged as diverged:
            return Replay(None, str(diverged))


def fail_with_repro(ctx: CheckContext, execution: Execution, seed: int | None = None) -> None:
    """Saves the failing execution's repro file, named after the running check, and raises the
    Violation of the finding's clause that explains it."""
    check_id = ctx.check_id
    finding = execution.finding
    assert finding is not None
    # One file per check: Hypothesis replays its shrunk example last, so the file ends minimal.
    name = f"repro-{check_id.rsplit('.', 1)[-1]}.json"
    folder = ctx.artifacts or ctx.scratch
    address = ctx.backend.address()
    repro = repro_of(
        execution, address.factory, check_id, seed, command=address.command, cwd=address.cwd
    )
    path = save_repro(folder / name, repro)
    raise Violation(
        finding.clause,
        f"the {finding.checker} checker: {finding.message}\n\n"
        f"Replay it with: memspec repro {path}\n\n"
        f"{render_interleaving(execution)}",
    )
