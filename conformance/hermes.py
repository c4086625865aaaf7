"""Real Hermes releases as backends: a cached virtual environment per release, the adapter command.

hermes-agent (and its asynchronous rewrite async-hermes-agent) installs top-level modules named
``tools``, ``agent`` and ``utils``. They must never be importable by the harness, so each release
lives in a virtual environment of its own under the cache directory, and the harness reaches it
only through the JSON Lines transport (CONTRACT-12): the command is that environment's Python
running :mod:`memspec.conformance.hermes_adapter` by path, in isolated mode (``-I``), so neither
side sees the other's modules.

The environment holds the release installed without its dependencies, plus the few its memory
tool imports (``pyyaml``, and ``aiofiles`` for the async rewrite) at the versions the release
pins: the full dependency set (an LLM SDK, a web server, ...) is heavy and never reached.

Cache: ``$MEMSPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/memspec``, else ``~/.cache/memspec``;
``--cache DIR`` overrides all three. A finished environment is marked by a ``memspec-ready`` file;
one being built is guarded by an ``flock`` so that parallel runs build it once.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memspec.conformance.backend import UsageError

PACKAGES = ("hermes-agent", "async-hermes-agent")
MEMORY_TOOL_DEPENDENCIES = ("pyyaml", "aiofiles")
PIP_TIMEOUT = 900.0
LOCK_TIMEOUT = 1800.0
READY = "memspec-ready"
ADAPTER = Path(__file__).resolve().parent / "hermes_adapter.py"
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([ab]|rc|\.post|\.dev)?[0-9]*$")


@dataclass(frozen=True, order=True)
class Release:
    """A Release is one version of one Hermes distribution on the package index."""

    package: str
    version: str

    def __post_init__(self) -> None:
        if self.package not in PACKAGES:
            raise UsageError(
                f"--package must be one of {', '.join(PACKAGES)}; got {self.package!r}"
            )
        if not _VERSION.match(self.version):
            raise UsageError(f"expected a version such as 0.19.0, got {self.version!r}")

    @property
    def label(self) -> str:
        """``package==version``, the name reports and the matrix use."""
        return f"{self.package}=={self.version}"


def venv_python(venv: Path) -> Path:
    """Returns the interpreter of the virtual environment ``venv``."""
    return venv / "bin" / "python"


def adapter_command(python: Path) -> str:
    """Returns the ``--backend-cmd`` that serves one session of the release in ``python``'s
    environment (isolated mode: no PYTHONPATH, no user site, no script directory)."""
    return f"{shlex.quote(str(python))} -I {shlex.quote(str(ADAPTER))}"


def _pip_problem(package: str, version: str, output: str) -> str:
    """Returns a one-line reason for a failed pip run, naming what to do."""
    unreachable = r"(Connection|NewConnection|Temporary failure|Max retries|timed out)"
    if re.search(unreachable, output) or "from versions: none" in output:
        return (
            f"the package index lists no release of {package}: is it reachable "
            "(network, pip's index settings)?"
        )
    listed = re.search(r"from versions: ([^)]*)\)", output)
    if listed or "No matching distribution" in output:
        known = f"; it has {listed.group(1)}" if listed else ""
        return f"{package} {version} is not on the package index{known}"
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return f"pip failed installing {package}=={version}: {lines[-1] if lines else 'no output'}"


class _Failed(Exception):
    """A subprocess exited with a non-zero status; the text is its output."""


def _run(argv: Sequence[str], what: str, timeout: float = PIP_TIMEOUT) -> str:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{what} took longer than {timeout:g} s; is the index reachable?"
        ) from None
    except OSError as error:
        raise UsageError(f"{what}: cannot run {argv[0]!r}: {error.strerror or error}") from None
    if done.returncode != 0:
        raise _Failed(done.stdout + done.stderr)
    return done.stdout


def _lock(path: Path, timeout: float) -> int:
    """Returns a descriptor holding an exclusive flock on ``path`` (waits at most ``timeout``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise UsageError(
                    f"another memspec has been building {path.parent} for over {timeout:g} s"
                ) from None
            time.sleep(0.5)


def _dependency_pins(python: Path, package: str) -> list[str]:
    """Returns the requirement strings the installed release pins for its memory tool's imports."""
    script = (
        "import json, sys; from importlib import metadata; "
        "print(json.dumps(metadata.requires(sys.argv[1]) or []))"
    )
    output = _run([str(python), "-I", "-c", script, package], f"reading {package}'s metadata")
    pins = []
    for requirement in json.loads(output):
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()
        if name in MEMORY_TOOL_DEPENDENCIES and "extra ==" not in requirement:
            pins.append(requirement.split(";")[0].strip())
    return pins


def ensure_venv(release: Release, cache: Path, python: str | None = None) -> Path:
    """Returns the interpreter of ``release``'s environment, building it first if needed.

    Raises UsageError (one line) when the release is not on the index, the index cannot be
    reached, or the environment cannot be built.
    """
    venv = cache / "hermes" / f"{release.package}-{release.version}"
    if (venv / READY).exists() and venv_python(venv).exists():
        return venv_python(venv)
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create the cache {venv.parent}: {error.strerror}") from None
    fd = _lock(venv.parent / f".{venv.name}.lock", LOCK_TIMEOUT)
    try:
        if (venv / READY).exists() and venv_python(venv).exists():
            return venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        try:
            _run([python or sys.executable, "-m", "venv", str(venv)], "creating a venv")
            pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
            _run([*pip, "--no-deps", release.label], f"installing {release.label}")
            pins = _dependency_pins(venv_python(venv), release.package)
            if pins:
                _run([*pip, *pins], f"installing {', '.join(pins)}")
        except _Failed as failure:
            shutil.rmtree(venv, ignore_errors=True)
            raise UsageError(_pip_problem(release.package, release.version, str(failure))) from None
        (venv / READY).write_text(release.label + "\n", encoding="utf-8")
        return venv_python(venv)
    finally:
        os.close(fd)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def index_versions(package: str) -> list[str]:
    """Returns the versions of ``package`` on the package index, oldest first (pip's index)."""
    Release(package, "0")  # validates the package name
    argv = [sys.executable, "-m", "pip", "index", "versions", package]
    try:
        output = _run(argv, f"listing the versions of {package}", timeout=300.0)
    except _Failed:
        raise UsageError(
            f"the package index lists no release of {package}: is it reachable "
            "(network, pip's index settings)?"
        ) from None
    match = re.search(r"Available versions:\s*(.+)", output)
    if not match:
        raise UsageError(f"pip did not list the versions of {package}: {output.strip()[:200]}")
    versions = [v.strip() for v in match.group(1).split(",") if _VERSION.match(v.strip())]
    return sorted(versions, key=_version_key)


def versions_between(versions: Sequence[str], first: str | None, last: str | None) -> list[str]:
    """Returns the versions from ``first`` to ``last`` inclusive (either end open when None)."""
    low = _version_key(first) if first else ()
    high = _version_key(last) if last else None
    return [
        v
        for v in sorted(versions, key=_version_key)
        if _version_key(v) >= low and (high is None or _version_key(v) <= high)
    ]
