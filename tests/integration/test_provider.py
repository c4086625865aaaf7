"""``memspec provider`` as a provider's author meets it, in the environment of hermes-agent 0.19.0
(skipped, with the reason, where it cannot be built): a plugin folder loaded through
``register(ctx)`` and one through its ``MemoryProvider`` subclass, a ``register`` that registers
twice (PLUGIN-1), and every kind of target that is no provider, each one line and exit status 2,
never a traceback or a hang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hermes_env import PROJECT, hermes_python

PROVIDERS = "tests/data/providers"


def provider(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    hermes_python()  # skips the test where the environment cannot be built
    return subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "provider", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_folder_registering_its_provider_certifies(tmp_path: Path) -> None:
    result = provider(f"{PROVIDERS}/file_plugin", "--report", str(tmp_path), "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "loaded by register(ctx), 1 registration(s)" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    # no tools, no mirror: those clauses skip for their feature, and the level stops at core
    assert report["run"]["features"] == ["recall"]
    assert report["level"]["name"] == "core"
    assert report["summary"]["passed"] == 16 and report["summary"]["skipped"] == 2
    assert {row["clause"] for row in report["clauses"]} == {f"PLUGIN-{n}" for n in range(1, 20)}
    assert (tmp_path / "junit.xml").is_file() and (tmp_path / "report.md").is_file()


def test_a_folder_without_register_loads_its_subclass() -> None:
    result = provider(f"{PROVIDERS}/subclass_plugin", "-k", "loads_as or name_is", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "'quiet-plugin' (_hermes_user_memory.subclass_plugin.QuietProvider, loaded by its "
        "subclass)" in result.stdout
    )
    assert result.stdout.rstrip().endswith("2 passed, 0 failed, 0 skipped")


def test_a_register_that_registers_twice_fails_plugin_1() -> None:
    result = provider(f"{PROVIDERS}/registers_twice", "-k", "loads_as_hermes_does", "-q")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "PLUGIN-1" in result.stdout and "2 times" in result.stdout


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (f"{PROVIDERS}/not_a_provider", "defines no MemoryProvider subclass: not a provider"),
        (f"{PROVIDERS}/import_fails", "raised ModuleNotFoundError"),
        (f"{PROVIDERS}/import_hangs", "did not finish within 5 s"),
        (f"{PROVIDERS}/constructor_raises", "NeedsAKey() raised RuntimeError"),
        ("tests.backends.providers:Path", "is not a subclass of Hermes' MemoryProvider"),
        ("tests.backends.providers:NoSuchProvider", "has no class 'NoSuchProvider'"),
        ("memspec_no_such_module:Provider", "No module named 'memspec_no_such_module'"),
    ],
)
def test_what_is_no_provider_is_one_line_and_status_2(target: str, said: str) -> None:
    result = provider(target, "--timeout", "5", timeout=300)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memspec: error: "), result.stderr
    assert said in lines[0] and "Traceback" not in result.stdout + result.stderr
