"""strace reaches a command backend's process by attaching to it once it waits for its ``open``
line, and where ptrace forbids that, by starting it (``conformance/tamper/strace.py``).

Attaching leaves the process's start-up untraced (about 80 ms a session instead of 380 ms for a
Python backend); the power tests of ``tests/power/test_strace_*.py`` run the strace checks
both ways. Skipped, with the reason, where strace cannot run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memspec.conformance.tamper import strace as tamper
from memspec.conformance.tamper.fstrace import STRACE_FAULT_ARGUMENTS, read_strace
from memspec.conformance.tamper.strace import attach_strace, strace_backend, strace_problem
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import HarnessError

SERVE = f"{sys.executable} -m memspec.conformance serve --backend memspec.reference_impl:open_store"

pytestmark = [
    pytest.mark.skipif(strace_problem() is not None, reason=str(strace_problem())),
    pytest.mark.usefixtures("unmeasured_backends"),
]


def _tracer(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^TracerPid:\s+(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


def _add_traced(backend: CommandBackend, root: Path) -> tuple[str, int]:
    """Opens a session of ``backend`` on ``root`` and adds one entry; returns the program of
    the session's process and the pid of its tracer (0: none)."""
    root.mkdir()
    session = backend.open(root)
    pid = session.process.pid
    program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    tracer = _tracer(pid)
    assert session.request("add", target="memory", content="Traced entry")["ok"]
    session.close()
    return os.path.basename(program), tracer


def _renamed_to_memory(output: Path, root: Path) -> bool:
    trace = read_strace(output.read_text(), os.path.realpath(root), {})
    return any(
        record.name == "replace" and record.path.endswith("/MEMORY.md") for record in trace.records
    )


def test_strace_attaches_once_the_process_waits_for_open(tmp_path: Path) -> None:
    if tamper.attach_problem() is not None:
        pytest.skip(str(tamper.attach_problem()))
    output = tmp_path / "trace.txt"
    backend = strace_backend(CommandBackend(SERVE), STRACE_FAULT_ARGUMENTS, output)
    assert backend.command == SERVE and backend.started is not None
    program, tracer = _add_traced(backend, tmp_path / "root")
    assert program != "strace" and tracer not in (0, os.getpid())  # strace, not its parent
    text = output.read_text()
    calls = [line for line in text.splitlines() if not line.split(" ", 1)[1].startswith("---")]
    assert '\\"op\\": \\"open\\"' in calls[0]  # the first call traced reads the open line
    assert ".pyc" not in text  # the interpreter's start-up was not traced
    assert _renamed_to_memory(output, tmp_path / "root")


def test_strace_attaches_to_what_a_wrapper_started(tmp_path: Path) -> None:
    """A command that runs the backend as its child (a shell that does not exec it, as
    ``uv run`` or a script would) is traced down to that child."""
    if tamper.attach_problem() is not None:
        pytest.skip(str(tamper.attach_problem()))
    output = tmp_path / "trace.txt"
    wrapped = CommandBackend(f"sh -c '{SERVE}; true'")
    backend = strace_backend(wrapped, STRACE_FAULT_ARGUMENTS, output)
    program, tracer = _add_traced(backend, tmp_path / "root")
    assert program == "sh" and tracer != 0
    assert _renamed_to_memory(output, tmp_path / "root")


def test_where_strace_cannot_attach_it_starts_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tamper, "attach_problem", lambda: "ptrace: Operation not permitted")
    output = tmp_path / "trace.txt"
    backend = strace_backend(CommandBackend(SERVE), STRACE_FAULT_ARGUMENTS, output)
    assert backend.command.startswith("strace --seccomp-bpf -qq ") and backend.started is None
    assert not backend.prestart  # a spare would truncate the running session's trace file
    signalling = strace_backend(CommandBackend(SERVE), (), output, seccomp=False)
    assert "--seccomp-bpf" not in signalling.command
    assert _add_traced(backend, tmp_path / "root") == ("strace", 0)  # the process is strace's
    assert _renamed_to_memory(output, tmp_path / "root")


def test_a_failed_attach_is_a_harness_error_and_ends_the_process(tmp_path: Path) -> None:
    started: list[subprocess.Popen[str]] = []

    def attach(process: subprocess.Popen[str]) -> None:
        started.append(process)
        attach_strace(("-e", "trace=no_such_call", "-o", os.devnull), process)

    backend = dataclasses.replace(CommandBackend(SERVE), started=attach, prestart=False)
    with pytest.raises(HarnessError, match=r"could not attach .*no_such_call"):
        backend.open(tmp_path)
    assert started and started[0].poll() is not None


def test_an_ended_process_is_left_to_its_session() -> None:
    process = subprocess.Popen(["true"], text=True)
    process.wait()
    attach_strace(("-o", os.devnull), process)  # no error: the session reports the death
