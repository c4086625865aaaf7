"""Real Hermes releases as backends: a cached virtual environment per build, the adapter command.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from memspec.conformance.hermes.imports import (
    MEMORY_TOOL,
    Needs,
    agent_closure,
    import_closure,
    memory_modules,
    requirement_pins,
)
from memspec.spec.errors import MemspecError, UsageError

PACKAGES = ("hermes-agent", "async-hermes-agent")  # the upstream lines; any fork certifies too
PIP_TIMEOUT = 900.0
LOCK_TIMEOUT = 1800.0
READY = "memspec-ready"
ADAPTER = Path(__file__).resolve().parent / "adapter.py"
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([ab]|rc|\.post|\.dev)?[0-9]*$")
_PACKAGE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass(frozen=True, order=True)
class Release:
    """A Release is one version of one distribution on the package index (any name: whether
    it ships Hermes' memory tool is found once it is installed)."""

    package: str
    version: str

    def __post_init__(self) -> None:
        if not _PACKAGE.match(self.package):
            raise UsageError(
                f"--package must be a distribution name such as hermes-agent; got {self.package!r}"
            )
        if not _VERSION.match(self.version):
            raise UsageError(f"expected a version such as 0.19.0, got {self.version!r}")

    @property
    def label(self) -> str:
        """``package==version``, the name reports and the matrix use."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class LocalBuild:
    """A LocalBuild is a wheel file or a source directory of a Hermes build (a fork's own)."""

    path: Path

    def __post_init__(self) -> None:
        is_wheel = self.path.is_file() and self.path.suffix == ".whl"
        if not (is_wheel or self.path.is_dir()):
            raise UsageError(
                f"expected a wheel (.whl) or a source directory, got {str(self.path)!r}"
            )

    @property
    def label(self) -> str:
        """The path, as given."""
        return str(self.path)


Build = Release | LocalBuild


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
    return f"pip failed installing {package}=={version}: {last_line(output)}"


class _Failed(MemspecError):
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


_INSPECT = """
import json
from importlib import metadata
print(json.dumps([
    {"name": d.metadata["Name"], "version": d.version, "requires": d.requires or [],
     "files": [str(f) for f in d.files or []], "base": str(d.locate_file(""))}
    for d in metadata.distributions()
]))
"""


class Distribution(TypedDict):
    """A distribution of an environment as ``_INSPECT`` lists it."""

    name: str
    version: str
    requires: list[str]
    files: list[str]
    base: str


class Ready(TypedDict, total=False):
    """What the ready file of an environment records: the build, what was installed, and what
    the agent's imports got (``agent``) from the ``Requires-Dist`` lines ``agent_needs``."""

    build: str
    installed: str
    agent: str
    agent_needs: list[str]


NOTHING_NEEDED = Needs((), ())


@dataclass(frozen=True)
class Installed:
    """The distribution in an environment that ships the memory tool, and what it needs."""

    name: str
    version: str
    needs: Needs
    agent: Needs = NOTHING_NEEDED
    """What the modules the ``agent`` ops drive need beyond :attr:`needs`."""

    def describe(self) -> str:
        """Returns one line naming the distribution and what was installed beside it."""
        beside = ", ".join(self.needs.pins) or "nothing"
        missing = (
            f"; imported but named by no Requires-Dist: {', '.join(self.needs.missing)}"
            if self.needs.missing
            else ""
        )
        return f"{self.name} {self.version} (--no-deps) with {beside}{missing}"


def find_memory_tool(distributions: Sequence[Distribution], label: str) -> Installed:
    """Returns the distribution among ``distributions`` (as ``_INSPECT`` lists them) that
    ships Hermes' memory tool, with the pins its memory modules need and those the modules of
    its agent need beside them. Raises UsageError (one line) when none does."""
    for found in distributions:
        modules = memory_modules(found["files"])
        if not modules:
            continue
        base = Path(found["base"])

        def read(path: str, base: Path = base) -> str:
            return (base / path).read_text(encoding="utf-8", errors="replace")

        external = import_closure(found["files"], read, modules)
        needs = requirement_pins(found["requires"], external)
        driven = requirement_pins(found["requires"], agent_closure(found["files"], read))
        agent = Needs(
            tuple(pin for pin in driven.pins if pin not in needs.pins),
            tuple(name for name in driven.missing if name not in needs.missing),
        )
        return Installed(found["name"], found["version"], needs, agent)
    raise UsageError(f"{label} ships no Hermes memory tool (no {MEMORY_TOOL} among its files)")


def _inspect(venv: Path, label: str) -> Installed:
    """Returns the distribution in ``venv`` that ships Hermes' memory tool, found by
    :func:`find_memory_tool` among the distributions the environment's own interpreter lists
    (``_INSPECT``)."""
    listing = _run([str(venv_python(venv)), "-I", "-c", _INSPECT], "reading the installed files")
    return find_memory_tool(json.loads(listing), label)


def wheel_digest(wheel: Path) -> str:
    """Returns a short digest of a wheel's RECORD: the same files give the same digest, however
    the archive was packed."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
            if not records:
                raise UsageError(f"{wheel} is not a wheel: it has no .dist-info/RECORD")
            return hashlib.sha256(archive.read(records[0])).hexdigest()[:12]
    except (OSError, zipfile.BadZipFile) as error:
        raise UsageError(f"cannot read the wheel {wheel}: {error}") from None


def _build_wheel(source: Path, into: Path) -> Path:
    """Returns the wheel pip builds from the source directory ``source`` (without deps)."""
    argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into)]
    try:
        _run([*argv, str(source)], f"building a wheel from {source}")
    except _Failed as failure:
        raise UsageError(f"pip could not build {source}: {last_line(str(failure))}") from None
    wheels = sorted(into.glob("*.whl"))
    if not wheels:
        raise UsageError(f"pip built no wheel from {source}")
    return wheels[0]


def _venv_name(build: Build, wheel: Path | None, beside: Release | None = None) -> str:
    extra = f"+{beside.package}-{beside.version}" if beside is not None else ""
    if isinstance(build, Release):
        return f"{build.package}-{build.version}{extra}"
    assert wheel is not None
    stem = "-".join(wheel.name.split("-")[:2])
    return f"local-{stem}-{wheel_digest(wheel)}{extra}"


def describe_venv(python: Path) -> str:
    """Returns the ready file's line on what the environment of ``python`` holds."""
    ready = read_ready(python.parent.parent) or {}
    if "installed" not in ready:
        return "an environment built by an earlier memspec"
    agent = f"; for the agent: {ready['agent']}" if "agent" in ready else ""
    return f"{ready['installed']}{agent}"


def ensure_venv(
    build: Build, cache: Path, python: str | None = None, beside: Release | None = None
) -> Path:
    """Returns the interpreter of ``build``'s environment, building it first if needed; raises
    UsageError (one line) when the release cannot be found, reached, served or built.
    ``beside`` is a distribution installed in it too, with its dependencies (a memory provider
    plugin's, for ``memspec provider --package``): that environment is one of its own."""
    with tempfile.TemporaryDirectory(prefix="memspec-wheel-") as scratch:
        wheel = None
        if isinstance(build, LocalBuild):
            wheel = build.path if build.path.is_file() else _build_wheel(build.path, Path(scratch))
        venv = cache / "hermes" / _venv_name(build, wheel, beside)
        return _ensure(build, wheel, venv, python, beside)


def _install_agent_needs(venv: Path, installed: Installed, ready: Ready) -> None:
    """Installs what the modules the ``agent`` ops drive import (``installed.agent``) and
    records it in ``ready``: ``agent`` says what was installed (or why not), ``agent_needs``
    lists the ``Requires-Dist`` lines the adapter then finds installed before it claims the
    feature. A failed install leaves the memory environment usable, without the agent."""
    pins = installed.agent.pins
    ready["agent_needs"] = list(pins)
    if pins:
        pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
        try:
            _run([*pip, *pins], f"installing the agent's imports {', '.join(pins)}")
        except _Failed as failure:
            ready["agent"] = f"not installed: {last_line(str(failure), 'pip failed')}"
            return
    ready["agent"] = ", ".join(pins) or "nothing more"


def _install_beside(venv: Path, beside: Release, ready: Ready) -> None:
    """Installs ``beside`` with its dependencies into the environment ``venv`` (whose Hermes
    build is installed) and records it in ``ready``; removes the environment and raises
    UsageError (one line) when pip cannot."""
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    try:
        _run([*pip, beside.label], f"installing {beside.label}")
    except (_Failed, UsageError) as failure:
        shutil.rmtree(venv, ignore_errors=True)
        if isinstance(failure, UsageError):
            raise
        raise UsageError(_pip_problem(beside.package, beside.version, str(failure))) from None
    ready["installed"] = f"{ready['installed']}; beside it {beside.label}"


def last_line(output: str, default: str = "no output") -> str:
    """Returns the last line of ``output`` that is not blank (what pip says went wrong), or
    ``default``."""
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else default


def read_ready(venv: Path) -> Ready | None:
    """Returns what the ready file of ``venv`` records, or ``None`` when there is none. An
    earlier memspec wrote only the build's name there, as text: that reads ``{"build": name}``,
    an environment without the agent's imports."""
    try:
        text = (venv / READY).read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        ready = json.loads(text)
    except ValueError:
        ready = None
    return cast(Ready, ready) if isinstance(ready, dict) else {"build": text.strip()}


def _add_agent_needs(venv: Path, label: str, ready: Ready) -> None:
    """Installs the agent's imports into a ready environment built without them (by a memspec
    before the agent feature), once; the ready file (``ready``, as read) then says so."""
    if "agent" in ready:
        return
    _install_agent_needs(venv, _inspect(venv, label), ready)
    (venv / READY).write_text(json.dumps(ready) + "\n", encoding="utf-8")


def _ensure(
    build: Build, wheel: Path | None, venv: Path, python: str | None, beside: Release | None = None
) -> Path:
    """Returns the interpreter of the environment ``venv``: at once when its ready file says it
    is finished, else under the lock, where the ready file is read again (another memspec may
    have finished it meanwhile) and the environment built or completed."""
    if "agent" in (read_ready(venv) or {}) and venv_python(venv).exists():
        return venv_python(venv)
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create the cache {venv.parent}: {error.strerror}") from None
    fd = _lock(venv.parent / f".{venv.name}.lock", LOCK_TIMEOUT)
    try:
        ready = read_ready(venv)
        if ready is not None and venv_python(venv).exists():
            _add_agent_needs(venv, build.label, ready)
            return venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        try:
            installed = _install(build, wheel, venv, python)
        except _Failed as failure:
            shutil.rmtree(venv, ignore_errors=True)
            if isinstance(build, Release):
                raise UsageError(_pip_problem(build.package, build.version, str(failure))) from None
            raise UsageError(
                f"pip failed installing {build.label}: {last_line(str(failure))}"
            ) from None
        except UsageError:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        ready = {"build": build.label, "installed": installed.describe()}
        _install_agent_needs(venv, installed, ready)
        if beside is not None:
            _install_beside(venv, beside, ready)
        (venv / READY).write_text(json.dumps(ready) + "\n", encoding="utf-8")
        return venv_python(venv)
    finally:
        os.close(fd)


def _install(build: Build, wheel: Path | None, venv: Path, python: str | None) -> Installed:
    """Installs ``build`` without its dependencies, then what its memory modules import."""
    _run([python or sys.executable, "-m", "venv", str(venv)], "creating a venv")
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    requirement = build.label if wheel is None else str(wheel)
    _run([*pip, "--no-deps", requirement], f"installing {build.label}")
    installed = _inspect(venv, build.label)
    if installed.needs.pins:
        _run([*pip, *installed.needs.pins], f"installing {', '.join(installed.needs.pins)}")
    return installed


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
