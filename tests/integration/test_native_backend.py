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
from pathlib import Path

import pytest

from tests.integration.certify_command import assert_certified

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

    assert_certified(str(binary), EXPECTED_FAILURES)
