"""``memspec provider`` as a provider's author meets it, in the environment of hermes-agent 0.19.0
(skipped, with the reason, where it cannot be built): a plugin folder loaded through
``register(ctx)`` and one through its ``MemoryProvider`` subclass, a ``register`` that registers
twice (PLUGIN-1), and every kind of target that is no provider, each one line and exit status 2,
never a traceback or a hang."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memspec.conformance.core.locations import cache_dir
from tests.harness.test_hermes_line import Places
from tests.hermes_env import PROJECT, hermes_python, needs_index, package_python

PROVIDERS = "tests/data/providers"


def provider(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    hermes_python()  # skips the test where the environment cannot be built
    return memspec_provider(*args, timeout=timeout)


def memspec_provider(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
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


def one_line_status_2(result: subprocess.CompletedProcess[str], said: str) -> None:
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memspec: error: "), result.stderr
    assert said in lines[0] and "Traceback" not in result.stdout + result.stderr


def test_a_register_that_registers_a_lookalike_fails_plugin_1() -> None:
    # Hermes 0.19.0 takes what register(ctx) gives it; a class that is not a MemoryProvider
    # is certified all the same, and PLUGIN-1 names the hooks it lacks
    result = provider(f"{PROVIDERS}/registers_a_stranger", "-k", "loads_as_hermes_does", "-v")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "not an instance of Hermes' MemoryProvider; it lacks" in result.stdout
    assert "on_memory_write" in result.stdout


@pytest.mark.parametrize(
    ("package", "said"),
    [
        ("memspec-no-such-provider-8d1f", "the package index lists no release of"),
        ("hermes-local-memory==99.1", "hermes-local-memory 99.1 is not on the package index"),
    ],
)
def test_a_package_not_on_the_index_is_one_line_and_status_2(
    package: str, said: str, tmp_path: Path
) -> None:
    needs_index()
    result = memspec_provider("--package", package, "--cache", str(tmp_path / "cache"))
    one_line_status_2(result, said)
    assert not (tmp_path / "cache").exists()  # the index is asked before anything is built


def test_a_package_is_loaded_from_the_plugin_folder_it_installs() -> None:
    package_python("yantrikdb-hermes-plugin", "0.27.1")
    result = memspec_provider(
        "--package", "yantrikdb-hermes-plugin==0.27.1", "-k", "loads_as_hermes_does", "-q"
    )
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "(_hermes_user_memory.yantrikdb_hermes_plugin.YantrikDBMemoryProvider, loaded by "
        "register(ctx), 1 registration(s)) in hermes-agent 0.19.0" in result.stdout
    )


def test_a_package_whose_installer_writes_the_plugin_folder(tmp_path: Path) -> None:
    python = package_python("hermes-local-memory", "0.3.1")
    # its own folder is no plugin Hermes loads: the line says to give the installer's folder
    result = memspec_provider("--package", "hermes-local-memory==0.3.1", "-k", "loads_as")
    one_line_status_2(result, "give that folder as TARGET")
    # the package's own installer writes the folder (its shim) into a scratch Hermes home
    installer = python.parent / "hermes-local-memory"
    subprocess.run(
        [str(installer), "install-shim", "--hermes-home", str(tmp_path)], check=True, timeout=120
    )
    folder = tmp_path / "plugins" / "local_memory"
    result = memspec_provider(
        "--package", "hermes-local-memory==0.3.1", str(folder), "-k", "loads_as", "-q"
    )
    assert "loaded by register(ctx), 1 registration(s)" in result.stdout, result.stdout[-3000:]
    # its provider is a class of its own, not a MemoryProvider (PLUGIN-1)
    assert result.returncode == 1 and "LocalMemoryProvider, not an instance" in result.stdout


def test_a_provider_certification_writes_only_the_report_the_cache_and_temporary_files(
    tmp_path: Path,
) -> None:
    """The provider transport, as the other transports (tests/harness/test_hermes_line.py): a
    "real home" and an invocation directory of the test's own are byte for byte as they were
    after ``memspec provider`` certified a plugin that writes (its store under the Hermes home
    memspec gives it). The environment is built beforehand, under the user's own home."""
    hermes_python()
    places = Places(tmp_path)
    plugin = str(PROJECT / PROVIDERS / "file_plugin")
    args = ["provider", plugin, "--cache", str(cache_dir()), "--report", str(places.report)]
    result = places.memspec(*args, "--profile", "smoke", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (places.report / "report.html").is_file()
    assert places.untouched(), places.listings()


@pytest.mark.parametrize(
    ("target", "wrote"),
    [
        ("tests.backends.providers:RestrictsItsFiles", None),
        ("tests.backends.providers_broken:LoosensItsFiles", "os.chmod"),
        ("tests.backends.providers_broken:WritesInEveryContext", "os.mkdir"),  # then its turns
    ],
)
def test_a_chmod_that_changes_no_mode_is_no_write_in_a_subagent(
    target: str, wrote: str | None
) -> None:
    # PLUGIN-8: a provider that sets, at shutdown, the mode its files have (or chmods one that
    # is not there) writes nothing; one that changes a mode, or writes bytes, writes
    result = provider(target, "-k", "secondary_contexts_write_nothing", "-q")
    shown = result.stdout[-3000:] + result.stderr[-3000:]
    if wrote is None:
        assert result.returncode == 0, shown
        assert result.stdout.rstrip().endswith("1 passed, 0 failed, 0 skipped"), shown
    else:
        assert result.returncode == 1, shown
        assert "PLUGIN-8" in result.stdout and f"it wrote: {wrote} " in result.stdout, shown


@pytest.mark.parametrize(
    ("plugin", "wrote"), [("loads_hermes_config", None), ("writes_at_register", "eager-state.json")]
)
def test_loading_is_judged_on_the_home_hermes_set_up_at_its_start(
    plugin: str, wrote: str | None
) -> None:
    # PLUGIN-1: the folders and SOUL.md Hermes' load_config creates are Hermes' own, made at
    # its start before any plugin loads; a file the provider writes at register is its own
    result = provider(f"{PROVIDERS}/{plugin}", "-k", "loads_as_hermes_does", "-v")
    shown = result.stdout[-3000:] + result.stderr[-3000:]
    assert "SOUL.md" not in result.stdout and "/cron" not in result.stdout, shown
    if wrote is None:
        assert result.returncode == 0, shown
        assert result.stdout.rstrip().endswith("1 passed, 0 failed, 0 skipped"), shown
    else:
        assert result.returncode == 1, shown
        assert "loading wrote: open of " in result.stdout and wrote in result.stdout, shown


def test_a_data_home_of_its_own_that_backup_paths_names_is_no_stray_write() -> None:
    # PLUGIN-7: the variable naming it points to a folder not made yet in one that exists (as
    # ~/.its-home's parent exists), so the provider makes only its own; /dev/null is no file
    result = provider("tests.backends.providers:KeepsItsDataHome", "-k", "writes_stay_at_home")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().endswith("1 passed, 0 failed, 0 skipped"), result.stdout


INSTALLER_CHECKS = (
    "initialize_takes or writes_stay_at_home or secondary_contexts or profiles_never_cross"
)
"""The checks that open homes of every kind: a check's root (PLUGIN-6, PLUGIN-7), a session's
on each secondary context's (PLUGIN-8) and a second profile's (PLUGIN-19)."""


def test_a_provider_that_needs_its_installer_runs_in_every_home_the_setup_prepared() -> None:
    target = "tests.backends.providers:NeedsItsInstaller"
    # without its installer, initialize raises in every fresh home memspec gives it (PLUGIN-6)
    bare = provider(target, "-k", INSTALLER_CHECKS, "-q")
    assert bare.returncode == 1, bare.stdout[-3000:] + bare.stderr[-3000:]
    assert "PLUGIN-6" in bare.stdout and "was not installed into" in bare.stdout, bare.stdout
    # the setup writes, in each new home and with that home as HERMES_HOME, the record it needs;
    # what it writes is not the provider's (PLUGIN-7, PLUGIN-8, PLUGIN-19)
    record = (
        "import os, pathlib, sys; "
        "pathlib.Path(sys.argv[1], 'memspec-installed.txt').write_text(os.environ['HERMES_HOME'])"
    )
    setup = f"{sys.executable} -c {shlex.quote(record)} {{home}}"
    installed = provider(target, "--home-setup", setup, "-k", INSTALLER_CHECKS, "-q")
    shown = installed.stdout[-3000:] + installed.stderr[-3000:]
    assert installed.returncode == 0, shown
    assert installed.stdout.rstrip().endswith("4 passed, 0 failed, 0 skipped"), shown


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import sys; sys.exit('no manifest to write here')", "ended with status 1 in "),
        ("import sys, time; print('installing', file=sys.stderr, flush=True); time.sleep(120)",
         "did not finish within 20 s in "),
    ],
)  # fmt: skip
def test_a_home_setup_that_fails_or_hangs_is_one_line_and_status_2(code: str, said: str) -> None:
    setup = f"{sys.executable} -c {shlex.quote(code)}"
    result = provider(
        f"{PROVIDERS}/file_plugin", "--home-setup", setup, "--timeout", "20", timeout=300
    )
    one_line_status_2(result, said)
    assert f"--home-setup {setup!r}" in result.stderr
    last = "no manifest to write here" if "exit" in code else "installing"
    assert f": {last}" in result.stderr, result.stderr
