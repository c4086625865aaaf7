"""Real Hermes releases as backends: a cached virtual environment per build, the adapter command.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from memspec.conformance.hermes.adapter import WRITE_FEATURES, home_variables
from memspec.conformance.hermes.imports import (
    MEMORY_TOOL,
    Needs,
    agent_closure,
    agent_modules,
    import_closure,
    memory_modules,
    requirement_pins,
    runtime_lines,
)
from memspec.conformance.tamper.calls import CallRecord
from memspec.conformance.tamper.fstrace import QUIET, SECCOMP_BPF, STRACE_ARGUMENTS, read_strace
from memspec.conformance.tamper.strace import strace_problem
from memspec.spec.errors import MemspecError, UsageError

PACKAGES = ("hermes-agent", "async-hermes-agent")  # the upstream lines; any fork certifies too
PIP_TIMEOUT = 900.0
LOCK_TIMEOUT = 1800.0
READY = "memspec-ready"
READY_FORMAT = 4
"""The ready file's format: 2 records what the agent's build needs from the distribution's own
``Requires-Dist`` lines, the variables the build reads for a home, whether an agent was built
and what a write does; 3 the token encodings fetched for it (:func:`_fetch_token_encodings`);
4 whether an agent is built when, as at the agent's own start, no provider keeps a memory
manager (matrix-agent-symphony's provider tools cannot be imported, and need not be).
An environment of an earlier format is completed before it is used."""
TOKEN_CACHE = "memspec-tiktoken"
"""The folder, under an environment, of the token encodings fetched for its agent; the adapter
points ``TIKTOKEN_CACHE_DIR`` at it (``adapter.TOKEN_CACHE`` says the same)."""
TOKEN_ENCODINGS = ("cl100k_base", "o200k_base")
"""The encodings tiktoken fetches on first use that Hermes builds count tokens with."""
_FETCH_ENCODINGS = """\
import importlib.util, sys
if importlib.util.find_spec("tiktoken") is None:
    sys.exit(3)
import tiktoken
for name in sys.argv[1:]:
    tiktoken.get_encoding(name)
"""
PROBE_TIMEOUT = 300.0
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
    the agent got (``agent``) from the ``Requires-Dist`` lines ``agent_needs``; from format 2
    (:data:`READY_FORMAT`) the evidence the adapter claims by: ``home_variables`` (every one
    points at the session's scratch directory), ``agent_built`` (and why not,
    ``agent_declined``) and ``writes``, the features a recorded write showed (or why no write
    could be recorded, ``writes_unknown``); from format 3 ``encodings``, the token encodings
    fetched for the agent (or why not)."""

    build: str
    installed: str
    agent: str
    agent_needs: list[str]
    format: int
    home_variables: list[str]
    agent_built: bool
    agent_declined: str
    writes: list[str]
    writes_unknown: str
    encodings: str


NOTHING_NEEDED = Needs((), ())


@dataclass(frozen=True)
class Installed:
    """The distribution in an environment that ships the memory tool, and what it needs."""

    name: str
    version: str
    needs: Needs
    agent: Needs = NOTHING_NEEDED
    """What the agent needs beyond :attr:`needs`: every runtime ``Requires-Dist`` line of the
    distribution (what a user's ``pip install`` gets), when it has an agent."""
    followed: Needs = NOTHING_NEEDED
    """The lines that provide what the modules the ``agent`` ops drive import (read with
    ``ast``): installed when the whole set cannot be."""
    homes: tuple[str, ...] = ()
    """The variables the build reads for a home (:func:`~.adapter.home_variables`)."""

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
        followed = Needs(
            tuple(pin for pin in driven.pins if pin not in needs.pins),
            tuple(name for name in driven.missing if name not in needs.missing),
        )
        runtime = runtime_lines(found["requires"]) if agent_modules(found["files"]) else ()
        agent = Needs(tuple(line for line in runtime if line not in needs.pins), ())
        homes = home_variables(_texts(found["files"], read))
        return Installed(found["name"], found["version"], needs, agent, followed, homes)
    raise UsageError(f"{label} ships no Hermes memory tool (no {MEMORY_TOOL} among its files)")


def _texts(files: Sequence[str], read: Callable[[str], str]) -> Iterator[str]:
    """Yields the text of each Python file among ``files``."""
    for path in files:
        if path.endswith(".py"):
            try:
                yield read(path)
            except OSError:
                continue


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


def requires_python(source: Path) -> str | None:
    """Returns the ``requires-python`` of the source directory ``source`` (its pyproject.toml's
    ``[project]`` table), or ``None`` when it names none or cannot be read (pip then decides)."""
    try:
        with (source / "pyproject.toml").open("rb") as file:
            project = tomllib.load(file).get("project")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    wanted = project.get("requires-python") if isinstance(project, dict) else None
    return wanted.strip() if isinstance(wanted, str) and wanted.strip() else None


def python_version(python: str | None) -> str:
    """Returns the version of the interpreter ``python`` (this one when ``None``), as
    ``3.11.7``; raises UsageError (one line) when it cannot be run."""
    if python is None:
        return platform.python_version()
    code = "import platform; print(platform.python_version())"
    try:
        return _run([python, "-I", "-c", code], f"asking {python} its version", 60.0).strip()
    except _Failed as failure:
        raise UsageError(f"--python {python} did not run: {last_line(str(failure))}") from None


def wrong_python(label: str, wanted: str, version: str, python: str | None) -> str:
    """Returns the one line that says a build needs another Python than the one memspec would
    build it with, and how to give one (``--python``)."""
    used = f"--python {python} is" if python else f"this interpreter ({sys.executable}) is"
    return (
        f"{label} needs Python {wanted} (its requires-python) and {used} Python {version}: "
        f"install a Python that fits and give it with --python PATH"
    )


def _python_problem(label: str, source: Path | None, python: str | None, output: str) -> str:
    """Returns the one line for a build refused for its Python, from the build's
    ``requires-python`` or from what pip said (``requires a different Python: V not in 'S'``),
    or ``""`` when the failure is another."""
    said = re.search(r"requires a different Python: (\S+) not in '([^']*)'", output)
    if said is not None:
        return wrong_python(label, said.group(2), said.group(1), python)
    wanted = requires_python(source) if source is not None else None
    if wanted is None:
        return ""
    version = python_version(python)
    if _fits(version, wanted) is not False:
        return ""
    return wrong_python(label, wanted, version, python)


def _fits(version: str, wanted: str) -> bool | None:
    """Whether ``version`` satisfies the specifier ``wanted``; ``None`` when ``wanted`` is no
    specifier packaging reads (pip then decides)."""
    try:
        return SpecifierSet(wanted).contains(version, prereleases=True)
    except InvalidSpecifier:
        return None


def _build_wheel(source: Path, into: Path, python: str | None = None) -> Path:
    """Returns the wheel pip builds from the source directory ``source`` (without deps), with
    the interpreter the environment will have (``python``, else this one); raises UsageError
    (one line, naming ``--python``) when the source's ``requires-python`` excludes it."""
    problem = _python_problem(str(source), source, python, "")
    if problem:
        raise UsageError(problem)
    argv = [python or sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into)]
    try:
        _run([*argv, str(source)], f"building a wheel from {source}")
    except _Failed as failure:
        problem = _python_problem(str(source), None, python, str(failure))
        raise UsageError(
            problem or f"pip could not build {source}: {last_line(str(failure))}"
        ) from None
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
    if "encodings" in ready:
        agent += f"; token encodings {ready['encodings']}"
    homes = ready.get("home_variables")
    home = f"; homes pointed at a scratch directory: {', '.join(homes)}" if homes else ""
    built = ""
    if "agent_built" in ready:
        declined = ready.get("agent_declined", "")
        built = "; an agent was built" if ready["agent_built"] else f"; no agent: {declined}"
    add = ""
    if "writes" in ready:
        add = f"; a recorded add: {', '.join(ready['writes']) or 'neither crash-safe nor durable'}"
    elif "writes_unknown" in ready:
        add = f"; no add recorded: {ready['writes_unknown']}"
    return f"{ready['installed']}{agent}{home}{built}{add}"


def ensure_venv(
    build: Build, cache: Path, python: str | None = None, beside: Release | None = None
) -> Path:
    """Returns the interpreter of ``build``'s environment, building it first if needed; raises
    UsageError (one line) when the release cannot be found, reached, served or built.
    ``beside`` is a distribution installed in it too, with its dependencies (a memory provider
    plugin's, for ``memspec provider --package``): that environment is one of its own."""
    with tempfile.TemporaryDirectory(prefix="memspec-wheel-") as scratch, _pip_settings(cache):
        wheel = None
        if isinstance(build, LocalBuild):
            wheel = build.path
            if not build.path.is_file():
                wheel = _build_wheel(build.path, Path(scratch), python)
        venv = cache / "hermes" / _venv_name(build, wheel, beside)
        return _ensure(build, wheel, venv, python, beside)


@contextlib.contextmanager
def _pip_settings(cache: Path) -> Iterator[None]:
    """Has the pip runs that build an environment keep their cache under memspec's ``cache``
    and skip their version check (which writes under the user's home), unless the user set
    either: certification writes nothing outside the report, the cache and temporary files."""
    wanted = {"PIP_CACHE_DIR": str(cache / "pip"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    added = [name for name in wanted if name not in os.environ]
    os.environ.update({name: wanted[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _install_agent_needs(venv: Path, installed: Installed, ready: Ready) -> None:
    """Installs what the agent needs, from the distribution's own metadata: its runtime
    ``Requires-Dist`` lines (``installed.agent``), else, when pip cannot install them all, the
    lines that provide what the driven modules import (``installed.followed``); records it in
    ``ready``: ``agent`` says what was installed (or why not), ``agent_needs`` the lines the
    adapter then finds installed before it claims the feature. A failed install leaves the
    memory environment usable, without the agent."""
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet"]
    failed = ""
    for needs in (installed.agent, installed.followed):
        pins = needs.pins
        ready["agent_needs"] = list(pins)
        try:
            if pins:
                _run([*pip, *pins], f"installing the agent's requirements {', '.join(pins)}")
        except _Failed as failure:
            failed = failed or last_line(str(failure), "pip failed")
            continue
        if not pins:
            ready["agent"] = "nothing more"
        elif needs is installed.agent:
            ready["agent"] = f"its {len(pins)} runtime Requires-Dist lines"
        else:
            ready["agent"] = f"{', '.join(pins)} (the whole Requires-Dist set failed: {failed})"
        return
    ready["agent"] = f"not installed: {failed}"


def _fetch_token_encodings(venv: Path, ready: Ready) -> None:
    """Fetches, when the agent's requirements brought tiktoken, the encodings it downloads on
    first use (:data:`TOKEN_ENCODINGS`) into the environment's :data:`TOKEN_CACHE`, as pip
    fetched the requirements themselves: the certified code then finds them there and never
    reaches for the network (simplicio-agent counts a turn's tokens with ``cl100k_base``).
    Records what was fetched, or why not, in ``ready`` (``encodings``); an environment without
    tiktoken records nothing."""
    command = [str(venv_python(venv)), "-I", "-c", _FETCH_ENCODINGS, *TOKEN_ENCODINGS]
    environment = {**os.environ, "TIKTOKEN_CACHE_DIR": str(venv / TOKEN_CACHE)}
    try:
        done = subprocess.run(
            command, env=environment, capture_output=True, text=True, timeout=PROBE_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        ready["encodings"] = f"not fetched: {error}"
        return
    if done.returncode == 0:
        ready["encodings"] = f"{', '.join(TOKEN_ENCODINGS)} fetched"
    elif done.returncode != 3:
        ready["encodings"] = f"not fetched: {last_line(done.stderr)[:200]}"


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


def _complete(venv: Path, label: str, ready: Ready) -> None:
    """Brings a ready environment of an earlier format (:data:`READY_FORMAT`) up to date,
    once: the agent's requirements from the distribution's metadata, then the evidence
    (:func:`_gather_evidence`); the ready file (``ready``, as read) then says so."""
    if ready.get("format") == READY_FORMAT:
        return
    installed = _inspect(venv, label)
    _install_agent_needs(venv, installed, ready)
    _fetch_token_encodings(venv, ready)
    _gather_evidence(venv, installed, ready)
    (venv / READY).write_text(json.dumps(ready) + "\n", encoding="utf-8")


def _gather_evidence(venv: Path, installed: Installed, ready: Ready) -> None:
    """Records in ``ready`` what the adapter claims by, each seen rather than read from one
    function's text: the variables the build reads for a home, whether the release's agent is
    built (``adapter.py --probe-agent``, in a scratch home) and which of ``crash-safe`` and
    ``durable`` one add of its store showed under strace (:func:`record_write`)."""
    ready["home_variables"] = list(installed.homes)
    (venv / READY).write_text(json.dumps(ready) + "\n", encoding="utf-8")  # the probes read it
    python = venv_python(venv)
    built = _probe(python, ["--probe-agent"])
    if isinstance(built, str):
        ready["agent_built"], ready["agent_declined"] = False, built
    else:
        ready["agent_built"] = built.get("agent_built") is True
        ready.pop("agent_declined", None)  # an earlier probe's reason
        if not ready["agent_built"]:
            ready["agent_declined"] = str(built.get("agent_declined") or "no agent was built")
    writes = record_write(python)
    if isinstance(writes, str):
        ready["writes_unknown"] = writes
    else:
        ready["writes"] = writes
    ready["format"] = READY_FORMAT


def _probe(
    python: Path, argv: Sequence[str], prefix: Sequence[str] = ()
) -> dict[str, object] | str:
    """Returns the JSON line ``adapter.py ARGV`` prints in ``python``'s environment, or why it
    printed none (one line)."""
    command = [*prefix, str(python), "-I", str(ADAPTER), *argv]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the probe {' '.join(argv)} did not finish: {error}"
    try:
        found = json.loads(last_line(done.stdout, "null"))
    except ValueError:
        found = None
    if not isinstance(found, dict):
        return f"the probe {' '.join(argv)} failed: {last_line(done.stderr)}"
    return found


def record_write(python: Path) -> list[str] | str:
    """Returns which of ``crash-safe`` and ``durable`` the store of ``python``'s environment
    shows when it adds one entry (``adapter.py --probe-write``, recorded under strace and read
    by :func:`write_features`), or why no write could be recorded."""
    problem = strace_problem()
    if problem is not None:
        return problem
    with tempfile.TemporaryDirectory(prefix="memspec-write-") as scratch:
        root, trace = Path(scratch) / "root", Path(scratch) / "trace"
        root.mkdir()
        strace = ["strace", SECCOMP_BPF, QUIET, *STRACE_ARGUMENTS, "-o", str(trace)]
        answer = _probe(python, ["--probe-write", str(root)], strace)
        if isinstance(answer, str):
            return answer
        if answer.get("ok") is not True:
            return f"the recorded add was refused: {json.dumps(answer)[:200]}"
        try:
            records = read_strace(trace.read_text(encoding="utf-8"), str(root), {}).records
        except (OSError, ValueError) as error:
            return f"the strace record of the write could not be read: {error}"
    return write_features(records, str(root / "MEMORY.md"))


def write_features(records: Sequence[CallRecord], target: str) -> list[str]:
    """Returns the features one recorded write of ``target`` shows (CRASH, ATOMIC): ``crash-safe``
    when the new content was written to another file that was then renamed over ``target``;
    ``durable`` when that file was also synced before the rename and the directory after it.

    >>> from memspec.conformance.tamper.calls import CallRecord, Details
    >>> def call(name, path, kind="temp", source=None):
    ...     return CallRecord(name, path, kind, Details(source=source))
    >>> write = [call("write", "/r/.t"), call("replace", "/r/MEMORY.md", "data", "/r/.t")]
    >>> write_features(write, "/r/MEMORY.md")
    ['crash-safe']
    >>> synced = [write[0], call("fsync", "/r/.t"), write[1], call("fsync", "/r", "dir")]
    >>> write_features(synced, "/r/MEMORY.md")
    ['crash-safe', 'durable']
    >>> write_features([call("write", "/r/MEMORY.md", "data")], "/r/MEMORY.md")
    []
    """
    for index, record in enumerate(records):
        source = record.details.source
        if record.name not in ("replace", "rename") or record.path != target or not source:
            continue
        before, after = records[:index], records[index + 1 :]
        if not any(r.name in ("write", "pwrite64", "writev") and r.path == source for r in before):
            continue
        synced = any(r.name in ("fsync", "fdatasync") and r.path == source for r in before)
        dir_synced = any(r.name in ("fsync", "fdatasync") and r.kind == "dir" for r in after)
        return list(WRITE_FEATURES) if synced and dir_synced else [WRITE_FEATURES[0]]
    return []


def _ensure(
    build: Build, wheel: Path | None, venv: Path, python: str | None, beside: Release | None = None
) -> Path:
    """Returns the interpreter of the environment ``venv``: at once when its ready file says it
    is finished, else under the lock, where the ready file is read again (another memspec may
    have finished it meanwhile) and the environment built or completed."""
    if (read_ready(venv) or {}).get("format") == READY_FORMAT and venv_python(venv).exists():
        return venv_python(venv)
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create the cache {venv.parent}: {error.strerror}") from None
    fd = _lock(venv.parent / f".{venv.name}.lock", LOCK_TIMEOUT)
    try:
        ready = read_ready(venv)
        if ready is not None and venv_python(venv).exists():
            _complete(venv, build.label, ready)
            return venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        try:
            installed = _install(build, wheel, venv, python)
        except _Failed as failure:
            shutil.rmtree(venv, ignore_errors=True)
            if isinstance(build, Release):
                raise UsageError(_pip_problem(build.package, build.version, str(failure))) from None
            problem = _python_problem(build.label, None, python, str(failure))
            raise UsageError(
                problem or f"pip failed installing {build.label}: {last_line(str(failure))}"
            ) from None
        except UsageError:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        ready = {"build": build.label, "installed": installed.describe()}
        _install_agent_needs(venv, installed, ready)
        if beside is not None:
            _install_beside(venv, beside, ready)
        _fetch_token_encodings(venv, ready)
        _gather_evidence(venv, installed, ready)
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
