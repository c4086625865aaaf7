"""A real fork whose home variable is renamed, certified with a "real home" of the test's own:
nastech-agent 0.20.0 reads ``NASTECH_HOME`` (default ``~/.nastech``) where Hermes reads
``HERMES_HOME``. The home holds the user's own identity for the fork's agent
(``~/.nastech/SOUL.md``); certification must neither read it (AGENT-1: the agent's identity is
the session's) nor write anything there, byte for byte. Its store writes through
``utils.atomic_write_text`` (temp file, fsync, rename), so ``crash-safe`` is claimed from what
the write does. Skipped, with the reason, when the package index cannot be reached.

The environment is built first, in the user's cache and under the user's own home: pip runs
the build tools of the machine (a Rust toolchain, say, keeps its state in the home), and what
is tested here is what certifying the fork does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes.matrix import Column
from memspec.conformance.hermes.releases import Release, ensure_venv
from memspec.conformance.verdict.standing import clause_verdict
from memspec.spec.errors import UsageError
from tests.harness.test_hermes_line import listing

FORK, VERSION = "nastech-agent", "0.20.0"
PROJECT = Path(__file__).resolve().parents[2]


def test_a_fork_with_a_renamed_home_leaves_the_real_home_untouched(tmp_path: Path) -> None:
    try:
        ensure_venv(Release(FORK, VERSION), cache_dir())
    except UsageError as error:
        pytest.skip(f"the fork's environment cannot be built: {error}")
    home, cwd, report = tmp_path / "home", tmp_path / "cwd", tmp_path / "report"
    (home / ".nastech").mkdir(parents=True)
    (home / ".nastech" / "SOUL.md").write_text("You are Ada, the user's own agent.\n", "utf-8")
    cwd.mkdir()
    before = listing(home)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NASTECH"))}
    environment.update(HOME=str(home), MEMSPEC_CACHE_DIR=str(cache_dir()))
    result = subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "hermes", "--package", FORK,
         "--version", VERSION, "--profile", "smoke", "-k", "AGENT or CRASH", "-q",
         "--report", str(report)],
        cwd=cwd, env={**environment, "PYTHONPATH": str(PROJECT)}, capture_output=True,
        text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    assert "NASTECH_HOME" in result.stdout.split("homes pointed at a scratch directory:")[1]
    # Nothing read or written in the real home, byte for byte; nothing left where it ran.
    assert listing(home) == before
    assert listing(cwd) == []
    column = Column.load(report)
    assert {"agent", "crash-safe"} <= set(column.run["features"]), column.run["features"]
    records = json.loads((report / "report.json").read_text(encoding="utf-8"))
    agent_1 = clause_verdict("AGENT-1", column.checks)
    assert agent_1.status == "pass", (agent_1, records["checks"][:3])
