"""memspec as a user installs it: a read-only install certifies and writes only where it is told.

The install test builds memspec (not editable) into a new virtual environment from the package
index, makes the installed package read-only — for root too, with a read-only bind mount in a
mount namespace of its own — and certifies the reference from a working directory of its own,
with ``HOME`` and ``TMPDIR`` of their own. It is skipped, with the reason, when the package index
cannot be reached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memspec.conformance import certify as certify_module
from memspec.conformance.jsonlines import INVOCATION_DIR
from memspec.conformance.locations import cache_dir

PROJECT = Path(__file__).resolve().parents[2]
INDEX_ERRORS = ("Could not find a version", "No matching distribution", "Network is unreachable")


def tree_digest(top: Path) -> dict[str, str]:
    """Returns every path under ``top`` with its mode and, for a file, its content's digest."""
    digest: dict[str, str] = {}
    for path in sorted(top.rglob("*")):
        info = path.lstat()
        content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        digest[str(path.relative_to(top))] = f"{stat.filemode(info.st_mode)} {content}"
    return digest


def read_only_command(package: Path, command: list[str]) -> list[str]:
    """Returns ``command`` run with ``package`` read-only: for root, in a mount namespace where
    it is bind-mounted read-only (root ignores file modes); for anyone else, as it is."""
    if os.geteuid() != 0:
        return command
    script = (
        'mount --bind -o ro "$1" "$1" || exit 97; '
        'if touch "$1/.memspec-probe" 2>/dev/null; then echo "not read-only" >&2; exit 97; fi; '
        'shift; exec "$@"'
    )
    return ["unshare", "--mount", "sh", "-c", script, "sh", str(package), *command]


@pytest.fixture
def short_temp(tmp_path: Path) -> Iterator[Path]:
    """A new, empty temp directory with a short path, linked from ``tmp_path/tmp``.

    Worker processes talk through a Unix socket under the temp directory, and a socket's path
    may not exceed 107 bytes: pytest's own ``tmp_path`` can be too long for that.
    """
    temp = Path(tempfile.mkdtemp(prefix="ms-"))
    (tmp_path / "tmp").symlink_to(temp)
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtual environment with memspec installed from the project, not editable."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         str(PROJECT)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if pip.returncode != 0:
        if any(error in pip.stderr for error in INDEX_ERRORS):
            pytest.skip(f"the package index cannot be reached: {pip.stderr.strip()[-300:]}")
        pytest.fail(f"pip install of the project failed:\n{pip.stderr[-3000:]}")
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


def _package_dir(venv: Path) -> Path:
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import memspec, os; print(memspec.__path__[0])"],
        capture_output=True, text=True, check=True, cwd=venv,
    )  # fmt: skip
    return Path(found.stdout.strip())


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("unshare") is None, reason="root needs unshare(1)"
)
@pytest.mark.parametrize("mount", ["as installed", "read-only"])
def test_an_install_certifies_and_writes_only_where_told(
    installed: Path, tmp_path: Path, short_temp: Path, mount: str
) -> None:
    """As installed, a write under the package would show (root may write anywhere); mounted
    read-only, certification must still pass."""
    package = _package_dir(installed)
    assert installed in package.parents, f"memspec was not installed into the venv: {package}"
    work, home = tmp_path / "work", tmp_path / "home"
    for folder in (work, home):
        folder.mkdir()
    temp = short_temp
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMSPEC_", "XDG_", "HYPOTHESIS_", "PYTEST_", "COV_", "PYTHON"))
    }
    env.update(HOME=str(home), TMPDIR=str(temp), PATH=f"{installed / 'bin'}:{env['PATH']}")
    command = [
        str(installed / "bin" / "memspec"), "certify", "--profile", "smoke", "-q",
        "--backend", "memspec.reference_impl:open_store", "--report", "report",
    ]  # fmt: skip
    if mount == "read-only":
        command = read_only_command(package, command)
    subprocess.run(["chmod", "-R", "a-w", str(package)], check=True)
    try:
        before = tree_digest(package)
        result = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        after = tree_digest(package)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(package)], check=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().endswith("0 failed, 2 skipped"), result.stdout[-500:]
    # Nothing under the installed package changed.
    assert after == before
    # The report is where --report pointed, resolved against the working directory.
    assert sorted(p.name for p in work.iterdir()) == ["report"]
    reports = {p.name for p in (work / "report").iterdir()}
    assert {"report.md", "report.json", "junit.xml"} <= reports
    # Temporary files were removed at exit; Hypothesis's caches are in the user cache directory.
    assert list(temp.iterdir()) == [], sorted(str(p) for p in temp.rglob("*"))
    assert (home / ".cache" / "memspec" / "hypothesis").is_dir()


def test_keep_temp_keeps_the_scratch_directory_and_says_where(
    tmp_path: Path, short_temp: Path
) -> None:
    temp = short_temp
    env = {**os.environ, "TMPDIR": str(temp), "MEMSPEC_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "memspec.conformance", "certify", "--profile", "smoke",
               "--backend", "memspec.reference_impl:open_store", "-q", "-k", "FORMAT"]  # fmt: skip
    kept = subprocess.run(
        [*command, "--keep-temp"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stdout + kept.stderr
    scratch = [line.split(" in ", 1)[1] for line in kept.stdout.splitlines()
               if line.startswith("temporary files kept in ")]  # fmt: skip
    assert scratch and Path(scratch[0]).parent == temp and Path(scratch[0]).is_dir()
    shutil.rmtree(scratch[0])
    plain = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "tmp"]  # tmp: a link


def test_hypothesis_caches_fall_back_to_scratch_when_the_cache_is_unwritable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSPEC_CACHE_DIR", str(tmp_path / "cache"))
    assert certify_module.hypothesis_home(tmp_path / "s") == cache_dir() / "hypothesis"
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("MEMSPEC_CACHE_DIR", str(blocker))
    assert certify_module.hypothesis_home(tmp_path / "s") == tmp_path / "s" / "hypothesis"


def test_run_environment_restores_what_it_changed(tmp_path: Path) -> None:
    names = ("TMPDIR", certify_module.HYPOTHESIS_HOME, INVOCATION_DIR, "PYTHONDONTWRITEBYTECODE")
    before = {name: os.environ.get(name) for name in names}
    with certify_module.run_environment(tmp_path):
        assert tempfile.gettempdir() == str(tmp_path / "tmp")
        assert os.environ["TMPDIR"] == str(tmp_path / "tmp")
        assert os.environ[INVOCATION_DIR] == os.getcwd() and sys.dont_write_bytecode
    assert {name: os.environ.get(name) for name in before} == before
    assert tempfile.gettempdir() != str(tmp_path / "tmp")
