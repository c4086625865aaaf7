"""``memspec provider`` before any Hermes environment: a target that names no provider at all is
one line and exit status 2, and a store's certification never starts a provider's check (SPEC.md,
"Subjects")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]


def memspec(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memspec.conformance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("no/such/folder", "does not exist"),
        ("README.md", "is a file"),
        ("not a:target:at all", "expected a plugin folder or MODULE:CLASS"),
    ],
)
def test_a_target_that_names_nothing_is_refused_before_any_environment(
    target: str, said: str, tmp_path: Path
) -> None:
    # an empty cache: nothing is built for a target that names no provider
    result = memspec("provider", target, "--cache", str(tmp_path / "cache"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert said in result.stderr and not (tmp_path / "cache").exists()


def test_a_store_run_never_starts_a_provider_check() -> None:
    result = memspec("certify", "--backend", "memspec.reference_impl:open_store", "-k", "PLUGIN")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "no check matched -k" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "give a provider: a plugin folder, MODULE:CLASS, or --package NAME"),
        (("--package", "not a package"), "--package expects a distribution NAME or NAME==VERSION"),
        (("--package", "x==1==2"), "--package expects a distribution NAME or NAME==VERSION"),
    ],
)
def test_no_provider_named_is_refused_before_the_index_is_asked(
    args: tuple[str, ...], said: str, tmp_path: Path
) -> None:
    result = memspec("provider", *args, "--cache", str(tmp_path / "cache"))
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"memspec: error: {said}")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ("'unbalanced {home}", '--home-setup "\'unbalanced {home}" is no command'),
        ("", "--home-setup names no command"),
    ],
)
def test_a_home_setup_that_is_no_command_is_refused_before_any_environment(
    setup: str, said: str, tmp_path: Path
) -> None:
    result = memspec(
        "provider", "tests/data/providers/file_plugin", "--home-setup", setup,
        "--cache", str(tmp_path / "cache"),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"memspec: error: {said}"), result.stderr
    assert not (tmp_path / "cache").exists()
