"""The Hermes line as forks ship it: what ``memspec hermes`` claims is seen, not assumed.

A small Hermes-shaped build whose home variable is renamed (``FAKEFORK_HOME``, as nastech-agent
renamed ``HERMES_HOME`` to ``NASTECH_HOME``) is served by the adapter and certified through every
transport with a "real home" of the test's own: nothing may be written there, nor in the
directory certification is called from (README, "What certification writes"). The agent is
claimed only on a built agent, with a reason printed otherwise; the stand-in model endpoint is
one a local-inference policy lets through. A real fork is certified in
``tests/integration/test_hermes_renamed_home.py``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import weakref
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pytest

from memspec.conformance.hermes import adapter as hermes_adapter
from memspec.conformance.hermes import agent as hermes_agent
from memspec.conformance.hermes.releases import write_features
from memspec.conformance.tamper.calls import CallRecord, Details

PROJECT = Path(__file__).resolve().parents[2]
REFERENCE = "memspec.reference_impl:open_store"
FEW = "remove-deletes-one-entry or match-no-candidate"

FORK_TOOL = """
import json
import os
from pathlib import Path

# A fork's home: HERMES_HOME renamed, ~ when it is not set (nastech-agent's hermes_constants).
FORK_HOME = Path(os.environ.get("FAKEFORK_HOME", Path.home() / ".fakefork"))
DELIMITER = "\\n§\\n"


def get_memory_dir():
    return FORK_HOME / "memories"


class MemoryStore:
    def __init__(self, memory_char_limit=2200, user_char_limit=1375):
        self.memory_entries, self.user_entries = [], []

    def _path(self, target):
        return get_memory_dir() / ("USER.md" if target == "user" else "MEMORY.md")

    def load_from_disk(self):
        FORK_HOME.mkdir(parents=True, exist_ok=True)  # its state database, logs, SOUL.md
        (FORK_HOME / "state.db").write_text("sessions", encoding="utf-8")
        for target in ("memory", "user"):
            path = self._path(target)
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            setattr(self, target + "_entries", [e for e in text.split(DELIMITER) if e])

    def _save(self, target):
        entries = getattr(self, target + "_entries")
        self._path(target).write_text(DELIMITER.join(entries), encoding="utf-8")

    def format_for_system_prompt(self, target):
        return None

    def add(self, target, content):
        getattr(self, target + "_entries").append(content)
        self._save(target)
        home = "private" if FORK_HOME == Path(os.environ["HERMES_HOME"]) else str(FORK_HOME)
        return {"success": True, "message": "Entry added to the " + home + " home."}

    def remove(self, target, old_text):
        entries = getattr(self, target + "_entries")
        found = [e for e in entries if old_text in e]
        if not found:
            return {"success": False, "error": "No entry matched '" + old_text + "'."}
        entries.remove(found[0])
        self._save(target)
        return {"success": True, "message": "Entry removed."}


def memory_tool(action=None, target="memory", content=None, old_text=None, store=None):
    if action == "add":
        return json.dumps(store.add(target, content))
    if action == "remove":
        return json.dumps(store.remove(target, old_text))
    return json.dumps({"success": False, "error": "Unknown action '" + str(action) + "'."})
"""
FORK_FILES = {"tools/__init__.py": "", "tools/memory_tool.py": textwrap.dedent(FORK_TOOL)}
DIST_INFO = "fakefork-1.0.dist-info"
METADATA = "Metadata-Version: 2.1\nName: fakefork\nVersion: 1.0\n"
WHEEL = "Wheel-Version: 1.0\nGenerator: memspec-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def fork_files() -> dict[str, str]:
    """Returns the fake fork's installed files, its dist-info included (RECORD lists them all)."""
    files = {**FORK_FILES, f"{DIST_INFO}/METADATA": METADATA, f"{DIST_INFO}/WHEEL": WHEEL}
    record = "".join(f"{path},,\n" for path in [*files, f"{DIST_INFO}/RECORD"])
    return {**files, f"{DIST_INFO}/RECORD": record}


def fork_wheel(directory: Path) -> Path:
    """Writes the fake fork as a wheel in ``directory`` and returns its path."""
    wheel = directory / "fakefork-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in fork_files().items():
            archive.writestr(path, text)
    return wheel


Listing = list[tuple[str, int, bytes]]


def listing(directory: Path) -> Listing:
    """Returns every path under ``directory`` with its mode and, for a file, its bytes."""
    found = []
    for path in sorted(directory.rglob("*")):
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found.append((str(path.relative_to(directory)), path.lstat().st_mode, data))
    return found


class Places:
    """A run's places: a "real home" and an invocation directory, each holding a file of the
    user's, the cache and report directories certification may write, and a temporary
    directory of the run's own, which it must leave empty."""

    def __init__(self, tmp_path: Path) -> None:
        self.home, self.cwd = tmp_path / "home", tmp_path / "cwd"
        self.cache, self.report = tmp_path / "cache", tmp_path / "report"
        for directory in (self.home, self.cwd, self.cache):
            directory.mkdir()
        # in the system's temporary directory: socket paths made under it must stay short
        self.temp = Path(tempfile.mkdtemp(prefix="memspec-places-"))
        weakref.finalize(self, shutil.rmtree, self.temp, ignore_errors=True)
        (self.home / ".profile").write_text("the user's own\n", encoding="utf-8")
        (self.cwd / "notes.txt").write_text("the user's own\n", encoding="utf-8")
        self.before = (listing(self.home), listing(self.cwd))

    def again(self) -> None:
        """Takes the home and the invocation directory as they are now as the reference."""
        self.before = (listing(self.home), listing(self.cwd))

    def environment(self) -> dict[str, str]:
        """The run's environment: this home, this cache and this temporary directory."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMSPEC_"))}
        return {**keep, "HOME": str(self.home), "MEMSPEC_CACHE_DIR": str(self.cache),
                "TMPDIR": str(self.temp), "PYTHONPATH": str(PROJECT)}  # fmt: skip

    def memspec(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memspec.conformance", *args],
            cwd=self.cwd,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def untouched(self) -> bool:
        """Whether the home and the invocation directory are byte for byte as they were, and the
        temporary directory is empty again."""
        return self.listings() == (*self.before, [])

    def listings(self) -> tuple[Listing, Listing, list[str]]:
        """The home's and the invocation directory's listings, and what the temporary directory
        holds."""
        return listing(self.home), listing(self.cwd), sorted(p.name for p in self.temp.iterdir())


# -- the home variables a build reads --------------------------------------------------------


def test_every_home_variable_a_build_reads_is_found() -> None:
    sources = [
        'HOME_DIR = Path(os.environ.get("NASTECH_HOME", Path.home() / ".nastech"))',
        "kanban = os.getenv('NASTECH_KANBAN_HOME')\nos.environ [ \"XDG_STATE_HOME\" ]",
        'os.environ.get("HERMES_HOME")  # restated first, with HOME',
        'os.environ.get("PATH"); os.environ.get("NOT_A_HOME_VAR"); print("FAKE_HOME")',
    ]
    assert hermes_adapter.home_variables(sources) == (
        "HOME", "HERMES_HOME", "NASTECH_HOME", "NASTECH_KANBAN_HOME", "XDG_STATE_HOME",
    )  # fmt: skip


def test_a_fork_with_a_renamed_home_writes_nothing_in_the_real_home(tmp_path: Path) -> None:
    """The adapter, serving the fake fork installed on its path: the fork's home variable is
    found in its files and pointed at the session's scratch directory, with HOME."""
    build = tmp_path / "build"
    for path, text in fork_files().items():
        (build / path).parent.mkdir(parents=True, exist_ok=True)
        (build / path).write_text(text, encoding="utf-8")
    places = Places(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    lines = [
        {"id": 0, "op": "open", "root": str(root)},
        {"id": 1, "op": "load"},
        {"id": 2, "op": "add", "target": "memory", "content": "User prefers tabs"},
    ]
    result = subprocess.run(
        [sys.executable, str(Path(hermes_adapter.__file__))],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        env={**places.environment(), "PYTHONPATH": str(build)},
        cwd=places.cwd,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    # The fork's FAKEFORK_HOME is the private home memspec made (HERMES_HOME), not ~/.fakefork.
    assert answers[2]["message"] == "Entry added to the private home.", answers
    assert places.untouched(), places.listings()


# -- no writes outside the report, the cache and temporary files, for every transport ---------


TRANSPORTS = {
    "in-process": ["certify", "--backend", REFERENCE],
    "command": ["certify", "--backend-cmd",
                f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"],
}  # fmt: skip


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_certification_writes_only_the_report_the_cache_and_temporary_files(
    tmp_path: Path, transport: str
) -> None:
    places = Places(tmp_path)
    args = [*TRANSPORTS[transport], "--profile", "smoke", "-k", FEW, "-q"]
    result = places.memspec(*args, "--report", str(places.report))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (places.report / "report.json").exists()
    assert places.untouched(), places.listings()


def test_the_check_of_what_is_written_sees_a_backend_that_writes_in_the_home(
    tmp_path: Path,
) -> None:
    places = Places(tmp_path)
    backend = "tests.backends.home_writer:open_store"
    result = places.memspec("certify", "--backend", backend, "--profile", "smoke", "-k", FEW)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert not places.untouched()
    assert (places.home / ".home-writer" / "state").exists()


def test_memspec_hermes_on_a_fork_with_a_renamed_home_writes_only_where_it_may(
    tmp_path: Path,
) -> None:
    """The whole ``memspec hermes`` path on the fake fork's wheel: its environment built in the
    cache, its evidence recorded, the adapter's sessions run in private homes; and the reason
    it does not claim ``agent`` is printed on the terminal. Building the environment runs
    ``python -m venv`` and pip, whose own doings are not memspec's (pip's user agent asks
    ``rustc --version``, and a rustup there writes ``~/.rustup``): the home is compared across
    a certification of the environment built."""
    places = Places(tmp_path)
    wheel = fork_wheel(tmp_path)
    args = ["hermes", "--wheel", str(wheel), "--python", sys.executable, "--cache",
            str(places.cache), "--profile", "smoke", "-k", FEW,
            "--report", str(places.report)]  # fmt: skip
    built = places.memspec(*args)
    assert built.returncode in (0, 1), built.stdout[-3000:] + built.stderr[-2000:]
    places.again()
    result = places.memspec(*args)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    assert "homes pointed at a scratch directory: HOME, HERMES_HOME, FAKEFORK_HOME" in (
        result.stdout
    ), result.stdout[:2000]
    declined = [line for line in result.stdout.splitlines() if "feature not claimed" in line]
    assert [line.split(":")[0] for line in declined] == [
        "tool feature not claimed",
        "agent feature not claimed",
    ], declined
    assert declined[1] == "agent feature not claimed: the release ships no run_agent.py"
    assert places.untouched(), places.listings()


# -- the agent, claimed on evidence ------------------------------------------------------------


class _Agent:
    """An agent session whose build, or else whose first turn, raises what it is given."""

    def __init__(self, error: BaseException | None, at_turn: bool = False) -> None:
        self.error, self.at_turn, self.started, self.turns = error, at_turn, 0, 0

    def start(self, base: str, providers: list[Any]) -> None:
        self.started += 1
        if self.error is not None and not self.at_turn:
            raise self.error

    def turn(self, user: str, reply: str) -> None:
        self.turns += 1
        if self.error is not None and self.at_turn:
            raise self.error


def test_agent_is_claimed_only_on_a_built_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a record, the session builds one; an import that exits (sentinelos-agent's
    # run_agent.py without rich) or a refused endpoint is the reason.
    monkeypatch.setattr(hermes_adapter, "recorded", dict)
    built = _Agent(None)
    assert hermes_adapter.agent_evidence(built) == "" and (built.started, built.turns) == (1, 1)
    offline = _Agent(
        ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'"), True
    )
    assert hermes_adapter.agent_evidence(offline) == (
        "the built agent's first turn failed: ConnectionError: Failed to resolve "
        "'openaipublic.blob.core.windows.net'"
    )
    exits = hermes_adapter.agent_evidence(_Agent(SystemExit("missing dependencies: rich")))
    assert exits == "building the agent failed: SystemExit: missing dependencies: rich"
    refused = hermes_adapter.agent_evidence(_Agent(RuntimeError("LOCAL_INFERENCE_PAUSED: x")))
    assert refused == "building the agent failed: RuntimeError: LOCAL_INFERENCE_PAUSED: x"
    # With memspec hermes's record, no session builds one again.
    record = {"agent_built": False, "agent_declined": "building the agent failed: X"}
    monkeypatch.setattr(hermes_adapter, "recorded", lambda: record)
    unused = _Agent(None)
    assert hermes_adapter.agent_evidence(unused) == record["agent_declined"]
    monkeypatch.setattr(hermes_adapter, "recorded", lambda: {"agent_built": True})
    assert hermes_adapter.agent_evidence(unused) == "" and unused.started == 0


def _local(base_url: str) -> bool:
    """simplicio-agent 0.28.9's classifier of a local endpoint (agent/local_inference_policy.py,
    ``_is_local_endpoint``), restated: loopback, private, link-local, single-label or .local."""
    host = (urlparse(base_url).hostname or "").lower()
    if host in {"localhost", "::1"} or (host and "." not in host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith(".local")
    return address.is_private or address.is_loopback or address.is_link_local


def test_the_stand_in_model_is_an_endpoint_no_local_inference_policy_refuses() -> None:
    assert _local("http://127.0.0.1:9/v1")  # the endpoint of memspec before
    assert not _local(hermes_agent.MODEL_URL)
    hermes_agent.refuse_model_host()
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo(hermes_agent.MODEL_HOST, 443)


# -- crash-safe and durable, from what a write does ---------------------------------------------


def _call(name: str, path: str, kind: str = "temp", source: str | None = None) -> CallRecord:
    return CallRecord(name, path, kind, Details(source=source))


def _stub_venv(venv: Path, script: str) -> Path:
    """Returns ``venv`` with ``bin/python`` a shell script standing in for its interpreter."""
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    python.chmod(0o755)
    return venv


def test_the_token_encodings_the_agent_needs_are_fetched_with_its_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # simplicio-agent's first turn counts tokens with tiktoken, which downloads cl100k_base on
    # first use: the network refused, no agent was built. The encodings are fetched into the
    # environment as it is prepared, and the adapter points tiktoken's cache there.
    from memspec.conformance.hermes.releases import TOKEN_CACHE, Ready, _fetch_token_encodings

    fetched = _stub_venv(
        tmp_path / "a", 'mkdir -p "$TIKTOKEN_CACHE_DIR" && echo "$@" > "$TIKTOKEN_CACHE_DIR/asked"'
    )
    ready: Ready = {}
    _fetch_token_encodings(fetched, ready)
    assert ready == {"encodings": "cl100k_base, o200k_base fetched"}
    assert (fetched / TOKEN_CACHE / "asked").read_text().split()[-2:] == [
        "cl100k_base",
        "o200k_base",
    ]
    without = _stub_venv(tmp_path / "b", "exit 3")  # no tiktoken in the environment
    ready = {}
    _fetch_token_encodings(without, ready)
    assert ready == {}
    offline = _stub_venv(tmp_path / "c", "echo 'ConnectionError: unreachable' >&2; exit 1")
    _fetch_token_encodings(offline, ready)
    assert ready == {"encodings": "not fetched: ConnectionError: unreachable"}
    # the adapter, run in the environment, uses them; the two names of the folder agree
    assert hermes_adapter.TOKEN_CACHE == TOKEN_CACHE
    monkeypatch.setattr(sys, "prefix", str(fetched))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    hermes_adapter.use_fetched_encodings()
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(fetched / TOKEN_CACHE)
    monkeypatch.setattr(sys, "prefix", str(without))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    hermes_adapter.use_fetched_encodings()
    assert "TIKTOKEN_CACHE_DIR" not in os.environ


def test_crash_safe_and_durable_come_from_the_recorded_write() -> None:
    target = "/r/MEMORY.md"
    in_place = [_call("open", target, "data"), _call("write", target, "data")]
    renamed = [_call("write", "/r/.t"), _call("replace", target, "data", "/r/.t")]
    synced = [renamed[0], _call("fsync", "/r/.t"), renamed[1], _call("fsync", "/r", "dir")]
    unsynced_dir = synced[:3]
    assert write_features(in_place, target) == []
    assert write_features(renamed, target) == ["crash-safe"]
    assert write_features(unsynced_dir, target) == ["crash-safe"]
    assert write_features(synced, target) == ["crash-safe", "durable"]


class _WritesInPlace:
    """A store whose ``_write_file`` reads as crash-safe (temp file, rename), as the text-based
    detection read it, though what it does is decided elsewhere."""

    def _write_file(self) -> None:
        tmp = "MEMORY.md.tmp"
        os.replace(tmp, "MEMORY.md")


def test_a_recorded_write_outweighs_the_writers_text() -> None:
    # nastech-agent's _write_file delegates to utils.atomic_write_text: its text has no rename,
    # its write does; the recorded write decides either way.
    assert "crash-safe" in hermes_adapter.store_features(_WritesInPlace)
    assert "crash-safe" not in hermes_adapter.store_features(_WritesInPlace, [])
    assert "crash-safe" in hermes_adapter.store_features(SimpleNamespace, ["crash-safe"])


REFUSING_OPEN = """
import json, sys
request = json.loads(sys.stdin.readline())
answer = {"id": request["id"], "ok": False, "code": "E_INVALID",
          "message": "MemoryStore() missing 1 required positional argument: 'user_path'"}
print(json.dumps(answer), flush=True)
"""


def test_a_refused_open_says_why(tmp_path: Path) -> None:
    from memspec.conformance.transport.backend import BackendDefect
    from memspec.conformance.transport.jsonlines import CommandBackend

    script = tmp_path / "refuses.py"
    script.write_text(textwrap.dedent(REFUSING_OPEN), encoding="utf-8")
    backend = CommandBackend(f"{sys.executable} {script}", timeout=30, prestart=False)
    with pytest.raises(BackendDefect) as refused:
        backend.open(tmp_path)
    assert str(refused.value).startswith(
        "the backend refused to open the root: MemoryStore() missing 1 required positional "
        "argument: 'user_path'"
    ), str(refused.value)


def test_hermes_help_states_the_timeout_a_release_gets() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "hermes", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "default 60 (its first agent op imports the agent)" in result.stdout
    assert "default 10" not in result.stdout


# -- a source checkout that needs another Python ----------------------------------------------

FUTURE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "fakefork"
version = "1.0"
requires-python = ">=3.99"
"""


def test_a_source_that_needs_another_python_says_which_in_one_line(tmp_path: Path) -> None:
    """A checkout whose ``requires-python`` excludes the interpreter (Hermes' main asks for
    3.14) stops before pip runs, in one line naming what it needs, what it was offered and
    ``--python PATH``, with status 2; nothing is built or cached."""
    places = Places(tmp_path)
    source = tmp_path / "checkout"
    (source / "tools").mkdir(parents=True)
    (source / "pyproject.toml").write_text(FUTURE_PYPROJECT, encoding="utf-8")
    (source / "tools" / "memory_tool.py").write_text(FORK_TOOL, encoding="utf-8")
    for python in (None, sys.executable):
        chosen = ["--python", python] if python else []
        result = places.memspec(
            "hermes", "--source", str(source), *chosen, "--cache", str(places.cache), "-q"
        )
        assert result.returncode == 2, result.stdout + result.stderr
        (line,) = result.stderr.strip().splitlines()
        version = ".".join(map(str, sys.version_info[:3]))
        assert line == (
            f"memspec: error: {source} needs Python >=3.99 (its requires-python) and "
            f"{f'--python {python}' if python else f'this interpreter ({sys.executable})'} is "
            f"Python {version}: install a Python that fits and give it with --python PATH"
        )
    assert not (places.cache / "hermes").exists() and places.untouched()


def test_the_wheel_of_a_source_is_built_with_the_python_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--python`` builds the wheel as well as the environment: a checkout that only the
    given interpreter may build is built by it, and pip's refusal of a Python reads as the
    same one line."""
    from memspec.conformance.hermes import releases

    (tmp_path / "pyproject.toml").write_text(FUTURE_PYPROJECT, encoding="utf-8")
    ran: list[list[str]] = []

    def run(argv: list[str], what: str, timeout: float = 0) -> str:
        ran.append(list(argv))
        if "-c" in argv:
            return "3.99.1\n"
        raise releases._Failed(
            "ERROR: Package 'fakefork' requires a different Python: 3.99.1 not in '<3.99'\n"
        )

    monkeypatch.setattr(releases, "_run", run)
    with pytest.raises(releases.UsageError) as refused:
        releases._build_wheel(tmp_path, tmp_path / "into", "/opt/py399/bin/python")
    assert [argv[0] for argv in ran] == ["/opt/py399/bin/python"] * 2
    assert ran[1][1:4] == ["-m", "pip", "wheel"]
    assert str(refused.value) == (
        f"{tmp_path} needs Python <3.99 (its requires-python) and --python "
        "/opt/py399/bin/python is Python 3.99.1: install a Python that fits and give it with "
        "--python PATH"
    )


def test_a_probe_that_builds_the_agent_drops_an_earlier_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an environment probed again (a newer ready format) whose agent is now built keeps no
    # reason of the probe before, which said it was not
    from memspec.conformance.hermes import releases

    monkeypatch.setattr(releases, "_probe", lambda python, argv: {"agent_built": True})
    monkeypatch.setattr(releases, "record_write", lambda python: ["crash-safe"])
    ready: Any = {"agent_built": False, "agent_declined": "the release's AIAgent has no x"}
    installed = SimpleNamespace(homes=("HOME",))
    releases._gather_evidence(tmp_path, installed, ready)
    assert ready["agent_built"] is True and "agent_declined" not in ready
    assert ready["format"] == releases.READY_FORMAT
