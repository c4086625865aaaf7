"""memspec's driver of a provider (``conformance/hermes/provider_driver.py``) on its own, without
a Hermes environment: what its audit hook records and refuses, how a call that hangs is
reported, how values cross as JSON, and the collector ``register(ctx)`` is given."""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from memspec.conformance.hermes import provider_driver
from memspec.conformance.hermes.provider_driver import Caller, Driver, portable

WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def driver(home: Path) -> Driver:
    watched = Driver(io.StringIO())
    watched.allowed = {os.path.realpath(home)}
    watched.watching = True
    return watched


def test_writes_are_recorded_and_refused_outside_the_homes(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    watched = driver(home)
    watched.audit("open", (str(home / "notes.db"), None, WRITE))
    watched.audit("open", (str(elsewhere / "x"), "r", os.O_RDONLY))  # a read: nothing
    with pytest.raises(PermissionError, match="refuses writes outside"):
        watched.audit("os.rename", (str(home / "a"), str(elsewhere / "b"), None, None))
    watched.audit("open", (7, None, WRITE))  # a descriptor: its path was judged when opened
    recorded = [(e["op"], Path(e["path"]).name, e["blocked"]) for e in watched.events]
    assert recorded == [("open", "notes.db", False), ("os.rename", "b", True)]
    # an SQLite database created is a write; one that exists is not
    (home / "old.db").parent.mkdir()
    (home / "old.db").write_bytes(b"")
    watched.audit("sqlite3.connect", (str(home / "old.db"),))
    watched.audit("sqlite3.connect", (str(home / "new.db"),))
    assert [Path(e["path"]).name for e in watched.events[2:]] == ["new.db"]


def test_a_chmod_is_recorded_with_the_mode_the_file_had(tmp_path: Path) -> None:
    watched = driver(tmp_path)
    (tmp_path / "notes.db").write_bytes(b"x")
    (tmp_path / "notes.db").chmod(0o600)
    watched.audit("os.chmod", (str(tmp_path / "notes.db"), 0o100600, None))
    watched.audit("os.chmod", (str(tmp_path / "notes.db-wal"), 0o600, None))  # no such file
    watched.audit("os.chmod", (str(tmp_path / "notes.db"), 0o644, None))
    assert [(Path(e["path"]).name, e["mode"], e["was"]) for e in watched.events] == [
        ("notes.db", 0o600, 0o600),
        ("notes.db-wal", 0o600, None),
        ("notes.db", 0o644, 0o600),
    ]


def test_the_network_and_processes_are_refused_and_recorded(tmp_path: Path) -> None:
    watched = driver(tmp_path)
    with pytest.raises(socket.gaierror):
        watched.audit("socket.getaddrinfo", ("api.example.com", 443, 0, 0, 0))
    with pytest.raises(OSError, match="unreachable"):
        watched.audit("socket.connect", (None, ("10.0.0.1", 443)))
    with pytest.raises(PermissionError):
        watched.audit("subprocess.Popen", ("curl", ["curl", "x"], None, None))
    assert [e["kind"] for e in watched.events] == ["network", "network", "process"]
    assert "api.example.com" in watched.events[0]["address"]
    watched.watching = False  # Hermes' own imports: refused all the same, not recorded
    with pytest.raises(OSError):
        watched.audit("socket.connect", (None, ("10.0.0.1", 443)))
    assert len(watched.events) == 3


def test_a_hook_is_timed_whoever_calls_it_and_keeps_its_signature(tmp_path: Path) -> None:
    watched = driver(tmp_path)

    class Provider:
        def sync_turn(self, user: str, reply: str, *, messages: list[str] | None = None) -> None:
            watched.audit("open", (str(tmp_path / "turns"), None, WRITE))

        def prefetch(self, query: str) -> str:
            raise RuntimeError("down")

    provider = Provider()
    watched.wrap(provider)
    import inspect

    assert "messages" in inspect.signature(provider.sync_turn).parameters  # Hermes reads it
    provider.sync_turn("u", "r", messages=[])
    with pytest.raises(RuntimeError):
        provider.prefetch("q")
    hooks = [e for e in watched.events if e["kind"] == "hook"]
    assert [(h["method"], h["raised"]) for h in hooks] == [
        ("sync_turn", None),
        ("prefetch", "RuntimeError: down"),
    ]
    write = next(e for e in watched.events if e["kind"] == "write")
    assert write["hook"] == "sync_turn" and all(h["end"] is not None for h in hooks)


def test_a_call_that_hangs_is_reported_and_the_next_gets_a_thread() -> None:
    caller = Caller()
    release = threading.Event()
    hung = caller.call(release.wait, 0.2)
    assert hung["hung"] and hung["seconds"] >= 0.2
    assert caller.call(lambda: 7, 5.0)["value"] == 7
    raised = caller.call(lambda: 1 / 0, 5.0)
    assert raised["raised"].startswith("ZeroDivisionError")
    # a thread the provider starts from a call is not a daemon, as from the agent's thread
    started = caller.call(lambda: threading.Thread(target=time.sleep, args=(0,)).daemon, 5.0)
    assert started["value"] is False
    release.set()
    caller.stop()  # its threads are not daemons: they end when told, or with the process


def test_values_cross_as_json() -> None:
    assert portable(("a", 1, None, [True, {"k": 1.5}])) == ["a", 1, None, [True, {"k": 1.5}]]
    assert portable({1: object})["1"] == {"$repr": "<class 'object'>"}


def test_the_collector_keeps_every_provider_given() -> None:
    given: list[object] = []
    collector = provider_driver._Collector(given)
    collector.register_tool("x", schema={})
    collector.register_hook("on_x", lambda: None)
    collector.register_memory_provider("first")
    collector.register_memory_provider("second")
    assert given == ["first", "second"]


class Interface:
    """A stand-in for Hermes' ``MemoryProvider``: one abstract hook, defaults for the others."""

    def initialize(self, session_id: str, **kwargs: object) -> None:
        raise NotImplementedError

    initialize.__isabstractmethod__ = True  # type: ignore[attr-defined]

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        return ""

    def sync_turn(self, user: str, reply: str, *, session_id: str = "") -> None:
        return None

    def on_memory_write(self, action: str, target: str, content: str) -> None:
        return None

    def backup_paths(self) -> list[str]:
        return []


def test_a_provider_that_is_not_one_gets_the_interface_defaults_and_claims_only_its_own(
    tmp_path: Path,
) -> None:
    watched = driver(tmp_path)
    watched.base = Interface

    class Lookalike:  # mirrors part of the interface, subclasses nothing
        def prefetch(self, query: str, *, session_id: str = "") -> str:
            return "recalled"

        def sync_turn(self, user: str, reply: str) -> None:
            return None

    provider = Lookalike()
    # its claims are what its own class defines: recall, not mirror (it has no on_memory_write)
    assert watched.claims(provider) == ["recall"]
    lacking = watched.lacking(provider)
    assert "on_memory_write" in lacking and "backup_paths" in lacking and "prefetch" not in lacking
    watched.wrap(provider)
    # a hook it lacks answers as the interface's default, timed as its own; an abstract one
    # stays missing (calling it raises, on its own clause)
    assert provider.backup_paths() == []  # type: ignore[attr-defined]
    assert provider.on_memory_write("add", "memory", "x") is None  # type: ignore[attr-defined]
    assert not hasattr(provider, "initialize")
    assert [e["method"] for e in watched.events if e["kind"] == "hook"] == [
        "backup_paths",
        "on_memory_write",
    ]


def fake_distribution(site: Path, name: str, version: str, files: dict[str, str]) -> None:
    """Writes a distribution ``name`` ``version`` into the directory ``site``: its files and a
    ``.dist-info`` whose RECORD lists them (an entry point from ``entry_points.txt`` text)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for path, text in files.items():
        if path == "entry_points.txt":
            (info / path).write_text(text)
            continue
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in files if p != "entry_points.txt"))


def test_a_package_names_the_plugin_folder_it_installs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    fake_distribution(
        site,
        "memspec-fake-provider",
        "1.2",
        {
            "fake_tools/__init__.py": "HELPERS = 1\n",  # first in order, and no provider
            "fake_provider/__init__.py": "def register(ctx):\n    ctx.register_memory_provider(1)",
            "fake_provider/store.py": "",
        },
    )
    fake_distribution(
        site,
        "memspec-fake-pointed",
        "3.0",
        {
            "entry_points.txt": "[hermes_agent.memory_providers]\npointed = pointed_plugin\n",
            "another/__init__.py": "class MemoryProvider: pass\n",
            "pointed_plugin/__init__.py": "from agent.memory_provider import MemoryProvider\n",
        },
    )
    fake_distribution(site, "memspec-fake-none", "0.1", {"plain/__init__.py": "X = 1\n"})
    monkeypatch.syspath_prepend(str(site))
    found = provider_driver.package_folder("memspec-fake-provider==1.2")
    # the first top-level package that Hermes' look at its __init__.py takes for a provider
    assert found[1] == site / "fake_provider" and found[0].version == "1.2"
    # the package an entry point of hermes_agent.memory_providers names comes first
    assert provider_driver.package_folder("memspec-fake-pointed==3.0")[1] == site / "pointed_plugin"
    for target, said in [
        ("memspec-fake-none==0.1", "installs no plugin folder"),
        ("memspec-fake-provider==9.9", "1.2 is installed here, not 9.9"),
        ("memspec-not-installed==1.0", "is not installed in this environment"),
    ]:
        with pytest.raises(provider_driver.LoadError, match=said):
            provider_driver.package_folder(target)


def test_a_hook_runs_in_the_profile_of_its_hermes_home(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextvars
    import types

    override: contextvars.ContextVar[str | None] = contextvars.ContextVar("home", default=None)
    constants = types.ModuleType("hermes_constants")
    constants.set_hermes_home_override = override.set  # type: ignore[attr-defined]
    constants.reset_hermes_home_override = override.reset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hermes_constants", constants)
    # as Hermes' gateway runs a profile's turn: get_hermes_home() answers the profile's home
    assert provider_driver.in_profile("/profiles/b", override.get) == "/profiles/b"
    assert override.get() is None  # and only meanwhile
    assert provider_driver.in_profile(None, override.get) is None
    monkeypatch.delitem(sys.modules, "hermes_constants")
    assert provider_driver.in_profile("/profiles/b", lambda: 7) == 7  # a release without it


def test_an_sqlite_uri_names_its_file_and_read_only_is_no_write(tmp_path: Path) -> None:
    # scope-recall opens its database as file:/…?mode=ro (uri=True): its path is the URI's, and
    # a read-only connection creates nothing, whether the file exists or not
    home = tmp_path / "home"
    home.mkdir()
    watched = driver(home)
    watched.audit("sqlite3.connect", (f"file:{home / 'gone.sqlite3'}?mode=ro",))
    watched.audit("sqlite3.connect", (f"file:{home / 'made.sqlite3'}?mode=rwc",))
    watched.audit("sqlite3.connect", ("file::memory:?cache=shared",))
    assert [Path(e["path"]).name for e in watched.events] == ["made.sqlite3"]
    assert all(not e["blocked"] for e in watched.events)
