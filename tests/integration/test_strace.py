"""The crash-state checks through strace: how the calls of a ``--backend-cmd`` backend are
recorded (``conformance/tamper/fstrace.py``). Needs ``strace`` (and ``node`` for the Node.js
backend); each test is skipped, with the reason, where they are missing or strace is not
permitted.

Through ``memspec serve``, the no-temp-fsync store of ``tests/backends/procs.py`` fails the same
way as when recorded by interposition (``tests/power/test_crash_states.py``); the Node.js
backend passes.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from memspec.conformance.checks import crashstates
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CHECKS, CheckContext
from memspec.conformance.tamper import strace
from memspec.conformance.transport.jsonlines import CommandBackend
from tests.budgeted import run_in_budget

PROCS = "tests.backends.procs"
NODE = "node backends/node/memspec_backend.js"


def _context(tmp_path: Path, backend: CommandBackend) -> CheckContext:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    return CheckContext(backend, root, scratch, PROFILES["ci"])


needs_strace = pytest.mark.skipif(
    strace.strace_problem() is not None, reason=str(strace.strace_problem())
)
pytestmark = pytest.mark.usefixtures("unmeasured_backends")


@needs_strace
def test_strace_catches_a_command_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through memspec serve, strace records the no-temp-fsync store and posix-weak fails it
    at the same step as by interposition."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    ctx = _context(tmp_path, CommandBackend(f"memspec serve --backend {PROCS}:open_no_temp_fsync"))
    recording = crashstates.record(ctx, "batch" in crashstates._setup(ctx))
    assert recording.recorder == "strace"
    failure, _ = crashstates.judge_model(ctx, recording, "posix-weak", crashstates.OLD_OR_NEW)
    assert failure is not None and failure.clause == "CRASH-4", failure
    assert failure.text.startswith("under posix-weak") and "recorded by strace" in failure.text
    assert re.search(
        r"the rename at step \d+ may persist before the data written at step \d+: "
        "fsync the temp file",
        failure.text,
    ), failure


@needs_strace
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_backend_passes_under_strace(tmp_path: Path) -> None:
    """The Node.js backend, recorded by strace, recovers from every crash state."""
    ctx = _context(tmp_path, CommandBackend(NODE))
    run_in_budget(CHECKS["crashstates.crash_states_are_old_or_new"], ctx)
    assert ctx.figures["old-or-new recorder"] == "strace"
    assert ctx.figures["old-or-new posix-weak judged"] >= 5
