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
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def _user_environment() -> dict[str, str]:
    """Returns this process's environment without what the test run adds, PYTHONPATH among
    it: an in-process ``memspec`` command of another test puts the project there, and the
    project's own ``memspec`` folder would then shadow the installed package."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMSPEC_", "XDG_", "HYPOTHESIS_", "PYTEST_", "COV_", "PYTHON"))
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtual environment with memspec installed from the project, not editable."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         str(PROJECT)],
        capture_output=True, text=True, timeout=900, env=_user_environment(),
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
        capture_output=True, text=True, check=True, cwd=venv, env=_user_environment(),
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
    env = _user_environment()
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


def test_an_install_certifies_from_a_checkout_of_memspec(installed: Path, tmp_path: Path) -> None:
    """Run from a checkout (a folder with its own ``memspec`` package, as the README's first
    command does), the installed memspec's worker processes import the installed package, not
    the folder: the fork server starts elsewhere and the folder goes last on the path."""
    checkout = tmp_path / "checkout"
    (checkout / "memspec").mkdir(parents=True)
    (checkout / "memspec" / "__init__.py").write_text('"""A checkout\'s own folder."""\n')
    env = _user_environment()
    env.update(PATH=f"{installed / 'bin'}:{env['PATH']}")
    result = subprocess.run(
        [str(installed / "bin" / "memspec"), "certify", "--backend",
         "memspec.reference_impl:open_store", "-k", "kill_at_random or faults", "-q"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "No module named" not in result.stdout + result.stderr
