"""The native backend (``tests/backends/native``, one file of C11) passes ``memspec certify``.

A third implementation of SPEC.md, written from the documents alone in C with libc and POSIX
only, compiled with ``cc`` and certified through ``--backend-cmd`` (CONTRACT-12). Failures
argued to be the harness's, if any, are listed one id per line in
``tests/backends/native/expected-failures.txt``; a listed id that passes fails the run
(CONTRACT-18).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
NATIVE = PROJECT / "tests" / "backends" / "native"
SOURCE = NATIVE / "memspec_backend.c"
EXPECTED_FAILURES = NATIVE / "expected-failures.txt"

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None,
    reason="cc is not on PATH: the native backend (tests/backends/native) cannot be compiled",
)


def test_native_backend_is_certified(tmp_path: Path) -> None:
    binary = tmp_path / "memspec_backend"
    build = subprocess.run(
        [
            "cc",
            "-O2",
            "-std=c11",
            "-D_GNU_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            str(binary),
            str(SOURCE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert build.stderr == "", build.stderr  # no warnings at all

    args = [
        sys.executable,
        "-m",
        "memspec.conformance",
        "certify",
        "--backend-cmd",
        str(binary),
        "-q",
        "-n",
        "2",
    ]
    if EXPECTED_FAILURES.exists():
        args += ["--expected-failures", str(EXPECTED_FAILURES)]
    result = subprocess.run(
        args, cwd=PROJECT, capture_output=True, text=True, timeout=1800, check=False
    )
    # CONTRACT-16: exit status 0 means nothing failed unexpectedly.
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
