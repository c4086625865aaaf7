"""Certifies a command backend the way a user does from the project folder, for the tests of the
backends in other languages (Node.js, native)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def assert_certified(command: str, expected_failures: Path) -> None:
    """Runs ``memspec certify --backend-cmd COMMAND -q -n 2`` in the project folder, with
    ``expected_failures`` where that file exists (CONTRACT-18), and asserts exit status 0:
    nothing failed unexpectedly (CONTRACT-16)."""
    args = [sys.executable, "-m", "memspec.conformance", "certify", "--backend-cmd", command]
    args += ["-q", "-n", "2"]
    if expected_failures.exists():
        args += ["--expected-failures", str(expected_failures)]
    result = subprocess.run(
        args, cwd=PROJECT, capture_output=True, text=True, timeout=1800, check=False
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
