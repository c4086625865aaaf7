#!/usr/bin/env python3
"""memspec's driver of one Hermes memory provider plugin, inside a Hermes environment (PLUGIN).

memspec's provider transport (``conformance/transport/provider.py``) starts it as
``PYTHON -I -B provider_driver.py`` in a release's environment, one process per session, and
drives it over one JSON object per line. The standard library and the release's own code only:
memspec is not installed here. More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import importlib.machinery
import importlib.util
import json
import os
import queue
import re
import sqlite3
import stat
import sys
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import IO, Any

HOOKS = (
    "is_available",
    "initialize",
    "system_prompt_block",
    "prefetch",
    "queue_prefetch",
    "sync_turn",
    "get_tool_schemas",
    "handle_tool_call",
    "shutdown",
    "on_turn_start",
    "on_session_end",
    "on_session_switch",
    "on_pre_compress",
    "on_memory_write",
    "on_delegation",
    "backup_paths",
)
"""The provider's methods the driver may call, and times whoever calls them (PLUGIN)."""
MANAGER_METHODS = (
    "initialize_all",
    "on_turn_start",
    "sync_all",
    "queue_prefetch_all",
    "prefetch_all",
    "flush_pending",
    "on_session_end",
    "on_session_switch",
    "on_memory_write",
    "shutdown_all",
)
"""The ``MemoryManager`` methods the driver may call, for the clauses about the pair."""
CALLBACK = "$callback"
"""An argument the driver replaces by a callback that does nothing (``initialize``'s)."""
USER_NAMESPACE = "_hermes_user_memory"
"""The package a user's plugin folder is imported under, as Hermes 0.19.0 names it."""
HOME_NAME = re.compile(r"\b([A-Z][A-Z0-9_]*_HOME)\b")
PACKAGE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^=\s]+)$")
"""A target that names a distribution installed here (``memspec provider --package``)."""
PROVIDER_ENTRY_POINTS = "hermes_agent.memory_providers"
"""The entry-point group some provider packages name their plugin folder in (Hermes 0.19.0 reads
none: its users copy or link the folder into ``$HERMES_HOME/plugins``)."""
MARKERS = ("register_memory_provider", "MemoryProvider")
"""What Hermes 0.19.0 looks for in the first 8,192 characters of a user's plugin folder's
``__init__.py`` to take it for a memory provider (``_is_memory_provider_dir``)."""
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
FILE_EVENTS = {
    "os.rename": (1,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (1,),
    "shutil.rmtree": (0,),
}
"""The audit events of file operations that write, with the argument index of the path each
writes (the destination of a rename, a link or a copy)."""
NETWORK_EVENTS = {
    "socket.connect": 1,
    "socket.sendto": 1,
    "socket.sendmsg": 1,
    "socket.getaddrinfo": 0,
    "socket.gethostbyname": 0,
    "socket.gethostbyname_ex": 0,
    "socket.gethostbyaddr": 0,
    "socket.getnameinfo": 0,
}
"""The audit events of network attempts, with the argument index of the address."""
PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
)
LOOKUPS = (
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyname_ex",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
)
SCAN_FILES = 2000
SCAN_BYTES = 2_000_000
OWN_THREAD = "memspec-"
"""The prefix of the driver's own threads (never the provider's)."""


class LoadError(Exception):
    """The target is no provider, or could not be loaded: the one line says why."""


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__


def _path_of(value: object) -> str | None:
    """Returns the absolute path an audit argument names (``None``: a descriptor, or none)."""
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    elif hasattr(value, "__fspath__"):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        return None
    return os.path.realpath(value)


def _sqlite_path(database: object, uri: bool = False) -> tuple[str | None, bool]:
    """Returns the absolute path of the file an SQLite connection to ``database`` opens
    (``None``: an in-memory database) and whether it may write there: a ``file:`` URI (which
    Python's audit event gives as it is, ``uri=True`` or not) names its file in its path, and
    ``mode=ro`` opens it read-only."""
    text = os.fsdecode(database) if isinstance(database, bytes) else database
    if isinstance(text, str) and (uri or text.startswith("file:")):
        parsed = urllib.parse.urlsplit(text)
        mode = urllib.parse.parse_qs(parsed.query).get("mode", [""])[-1]
        name = urllib.parse.unquote(parsed.path)
        if mode == "memory" or name in ("", ":memory:"):
            return None, False
        return _path_of(name), mode != "ro"
    if database == ":memory:":
        return None, False
    return _path_of(database), True


def _mode_change(path: str, args: tuple[Any, ...]) -> dict[str, int | None]:
    """Returns what a ``chmod`` of ``path`` (the audit event's ``args``) asks and finds, read
    before the call: ``mode``, the permission bits it sets, and ``was``, the file's own
    (``None``: there is no such file, and the call fails). PLUGIN: a ``chmod`` that sets the
    mode a file has changes no mode, and is no write. Empty when the mode is not a number."""
    mode = args[1] if len(args) > 1 else None
    if not isinstance(mode, int):
        return {}
    try:
        was: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        was = None
    return {"mode": stat.S_IMODE(mode), "was": was}


def portable(value: object, depth: int = 0) -> object:
    """Returns ``value`` as JSON can carry it: built-in values as they are (a tuple as a list),
    anything else as ``{"$repr": ...}``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth < 20 and isinstance(value, list | tuple):
        return [portable(item, depth + 1) for item in value]
    if depth < 20 and isinstance(value, dict):
        return {str(key): portable(item, depth + 1) for key, item in value.items()}
    try:
        shown = repr(value)[:500]
    except Exception as error:
        shown = f"<repr raised {_describe(error)}>"
    return {"$repr": shown}


class Caller:
    """The thread that calls the provider, as the agent's thread does: one at a time, in order,
    from a thread that is not a daemon. A call that has not returned within its limit is
    abandoned with its thread, and the next call gets a new thread."""

    def __init__(self) -> None:
        self._count = 0
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] | None = None

    def _start(self) -> queue.SimpleQueue[Callable[[], None] | None]:
        jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._count += 1
        name = f"{OWN_THREAD}caller-{self._count}"
        # not a daemon, as the agent's main thread is not: a thread the provider starts from a
        # call inherits that (the process ends with os._exit, whatever is left running)
        threading.Thread(target=self._serve, args=(jobs,), daemon=False, name=name).start()
        return jobs

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            job()

    def stop(self) -> None:
        """Lets the current thread end once its call returns."""
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None

    def call(self, function: Callable[[], Any], limit: float) -> dict[str, Any]:
        """Returns how ``function()`` ended: ``value``, ``raised`` or ``hung``, and ``seconds``."""
        if self._jobs is None:
            self._jobs = self._start()
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def job() -> None:
            started = time.monotonic()
            try:
                outcome["value"] = function()
            except BaseException as error:  # the provider's: reported, never re-raised here
                outcome["raised"] = _describe(error)
                outcome["trace"] = "".join(traceback.format_exception(error)[-4:])[-2000:]
            outcome["seconds"] = time.monotonic() - started
            done.set()

        started = time.monotonic()
        self._jobs.put(job)
        if not done.wait(limit):
            self.stop()  # that thread is stuck in the provider; the next call gets another
            return {"hung": True, "seconds": time.monotonic() - started}
        return outcome


class Driver:
    """The Driver holds one provider's process: what it watches, the instances it loaded, the
    managers it built, and the answers to each request."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.local = threading.local()
        self.allowed: set[str] = set()
        self.watching = False
        self.instances: list[Any] = []
        self.managers: list[Any] = []
        self.baseline: set[int] = set()
        self.caller = Caller()
        self.module: ModuleType | None = None
        self.provider_class: type | None = None
        self.via = ""
        self.base: type | None = None
        self.registered: int | None = None
        """How many providers ``register(ctx)`` registered (``None``: not loaded by it)."""
        self.homes: dict[int, str] = {}
        """The ``hermes_home`` each instance was initialised with: its hooks run in that profile
        (:func:`in_profile`)."""
        self.distribution: metadata.Distribution | None = None
        """The distribution a ``NAME==VERSION`` target named (``None``: another target)."""
        for name in ("HOME", "HERMES_HOME", "TMPDIR"):
            path = _path_of(os.environ.get(name))
            if path:
                self.allowed.add(path)

    # --- what the provider does, watched -------------------------------------------------

    def hooks_running(self) -> list[str]:
        stack: list[str] = getattr(self.local, "hooks", [])
        return stack

    def record(self, event: dict[str, Any]) -> None:
        """Adds ``event`` with the hook running on this thread, the thread and the time."""
        running = self.hooks_running()
        event.update(
            hook=running[-1] if running else None,
            thread=threading.current_thread().name,
            t=time.monotonic(),
        )
        with self.lock:
            self.events.append(event)

    def permitted(self, path: str) -> bool:
        return path.startswith("/dev/") or any(
            path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in self.allowed
        )

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: records each write, network attempt and process start while the
        provider is watched; refuses every network attempt and process, and every write outside
        the provider's scratch directories, whoever makes it."""
        if getattr(self.local, "inside", False):
            return
        path: str | None = None
        if event == "open":
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if not flags & WRITE_FLAGS:
                return
            path = _path_of(args[0])
        elif event in FILE_EVENTS:
            index = FILE_EVENTS[event][0]
            path = _path_of(args[index]) if len(args) > index else None
        elif event == "sqlite3.connect":
            path, writes = _sqlite_path(args[0] if args else None)
            if path is None or not writes or os.path.exists(path):
                return
        elif event in NETWORK_EVENTS:
            self._refuse_network(event, args)
            return
        elif event in PROCESS_EVENTS:
            self._refuse_process(event, args)
            return
        else:
            return
        if path is None:
            return
        blocked = not self.permitted(path)
        if self.watching:
            write = {"kind": "write", "op": event, "path": path, "blocked": blocked}
            if event == "os.chmod":
                # its mode before the call: a chmod that changes none is no write (PLUGIN)
                self._guarded(lambda: write.update(_mode_change(path, args)))
            self._guarded(self.record, write)
        if blocked:
            raise PermissionError(
                errno.EACCES,
                f"memspec refuses writes outside the provider's scratch directories: {path}",
            )

    def _guarded(self, function: Callable[..., None], *args: Any) -> None:
        self.local.inside = True
        try:
            function(*args)
        finally:
            self.local.inside = False

    def _refuse_network(self, event: str, args: tuple[Any, ...]) -> None:
        index = NETWORK_EVENTS[event]
        address = args[index] if len(args) > index else None
        if self.watching:
            self._guarded(
                self.record, {"kind": "network", "op": event, "address": repr(address)[:200]}
            )
        if event in LOOKUPS:
            import socket

            raise socket.gaierror(socket.EAI_NONAME, "memspec: the network is unreachable")
        raise OSError(errno.ENETUNREACH, "memspec: the network is unreachable")

    def _refuse_process(self, event: str, args: tuple[Any, ...]) -> None:
        if self.watching:
            self._guarded(
                self.record, {"kind": "process", "op": event, "detail": repr(args[:2])[:200]}
            )
        raise PermissionError(errno.EPERM, "memspec: a provider's processes are not started")

    def trace_sqlite(self) -> None:
        """Has every SQLite connection opened from now on report its statements (PLUGIN:
        a statement that changes a database is a write)."""
        original = sqlite3.connect
        driver = self

        @functools.wraps(original)
        def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
            connection = original(database, *args, **kwargs)
            path, _ = _sqlite_path(database, bool(kwargs.get("uri")))
            if path is not None:

                def statement(text: str) -> None:
                    if driver.watching:
                        driver._guarded(
                            driver.record,
                            {"kind": "sql", "op": "sql", "path": path, "detail": str(text)[:300]},
                        )

                # a connection of another kind (a factory's) may not take one: it goes untraced
                with contextlib.suppress(Exception):
                    connection.set_trace_callback(statement)
            return connection

        sqlite3.connect = connect
        dbapi2 = sys.modules.get("sqlite3.dbapi2")
        if dbapi2 is not None:
            dbapi2.connect = connect  # type: ignore[attr-defined]  # the same, where it is defined

    # --- loading -------------------------------------------------------------------------

    def point_homes(self, target: str, cwd: str) -> list[str]:
        """Points every ``*_HOME`` variable the provider's source names that is not set yet (memspec
        set every one the environment had) into the scratch ``HOME``, before it is imported;
        returns the names."""
        home = os.environ.get("HOME", "")
        names = sorted(set(self._home_names(target, cwd)) - set(os.environ))
        for name in names:
            os.environ[name] = os.path.join(home, ".memspec-homes", name)
        return names

    @staticmethod
    def _home_names(target: str, cwd: str) -> Iterator[str]:
        folder = Path(cwd, target)
        if not folder.exists() and PACKAGE.match(target):
            with contextlib.suppress(LoadError):
                folder = package_folder(target)[1]
        if folder.is_dir():
            roots = [folder]
        else:
            top = target.partition(":")[0].split(".")[0]
            sys.path.insert(0, cwd)
            try:
                found = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                found = None
            locations = list(found.submodule_search_locations or []) if found else []
            origin = found.origin if found and found.origin else None
            roots = [Path(p) for p in locations] or ([Path(origin)] if origin else [])
        files = 0
        for root in roots:
            paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
            for path in paths[:SCAN_FILES]:
                files += 1
                try:
                    text = path.read_bytes()[:SCAN_BYTES].decode("utf-8", "replace")
                except OSError:
                    continue
                yield from HOME_NAME.findall(text)

    def _import_folder(self, folder: Path) -> ModuleType:
        """Imports a plugin folder as Hermes 0.19.0 imports it: ``__init__.py`` as the package
        ``_hermes_user_memory.<name>`` (a user's), or ``plugins.memory.<name>`` for one of the
        providers the release bundles; its siblings importable relatively."""
        init = folder / "__init__.py"
        if not folder.is_dir():
            raise LoadError(f"{folder} is not a directory")
        if not init.is_file():
            raise LoadError(f"{folder} has no __init__.py: not a provider plugin folder")
        if folder.resolve().parent == bundled_dir():
            name = f"plugins.memory.{folder.name}"
        else:
            if USER_NAMESPACE not in sys.modules:
                namespace = importlib.machinery.ModuleSpec(USER_NAMESPACE, None, is_package=True)
                namespace.submodule_search_locations = []
                sys.modules[USER_NAMESPACE] = importlib.util.module_from_spec(namespace)
            name = f"{USER_NAMESPACE}.{folder.name}"
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(folder)]
        )
        if spec is None or spec.loader is None:
            raise LoadError(f"{init} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as error:
            sys.modules.pop(name, None)
            raise LoadError(f"importing {init} raised {_describe(error)}") from None
        return module

    def _import_target(self, target: str, cwd: str) -> tuple[ModuleType, str | None]:
        folder = Path(cwd, target)
        if not folder.exists() and PACKAGE.match(target):
            self.distribution, folder = package_folder(target)
            return self._import_folder(folder), None
        if ":" not in target or folder.exists():
            if not folder.exists():
                raise LoadError(f"{folder} does not exist (give a plugin folder or MODULE:CLASS)")
            return self._import_folder(folder), None
        module_name, _, class_name = target.partition(":")
        if not module_name or not class_name:
            raise LoadError(f"expected a plugin folder or MODULE:CLASS, got {target!r}")
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        try:
            return importlib.import_module(module_name), class_name
        except BaseException as error:
            raise LoadError(f"importing {module_name} raised {_describe(error)}") from None

    def _instance(self) -> Any:
        """Returns a new instance of the loaded provider, made as it was first made."""
        base = self.base
        assert base is not None and self.module is not None
        if self.via == "register":
            registered: list[Any] = []
            collector = _Collector(registered)
            try:
                self.module.register(collector)
            except BaseException as error:
                raise LoadError(f"register(ctx) raised {_describe(error)}") from None
            self.registered = len(registered)
            if registered:
                # Hermes' collector keeps the last one given, whatever it is (PLUGIN-1 judges
                # one that is not a MemoryProvider)
                return registered[-1]
            self.via = "subclass"
            self.provider_class = self._subclass()
        assert self.provider_class is not None
        try:
            return self.provider_class()
        except BaseException as error:
            raise LoadError(f"{self.provider_class.__name__}() raised {_describe(error)}") from None

    def _subclass(self) -> type:
        """Returns the module's subclass of ``MemoryProvider``, as Hermes finds it (the first in
        ``dir()`` order)."""
        assert self.module is not None and self.base is not None
        for name in dir(self.module):
            found = getattr(self.module, name, None)
            if isinstance(found, type) and issubclass(found, self.base) and found is not self.base:
                return found
        hint = (
            f" (if {self.distribution.metadata['Name']}'s installer writes a plugin folder, give "
            "that folder as TARGET)"
            if self.distribution is not None
            else ""
        )
        raise LoadError(
            f"{self.module.__name__} registers no provider and defines no MemoryProvider "
            f"subclass: not a provider{hint}"
        )

    def load(self, target: str, cwd: str) -> Any:
        """Loads the provider ``target`` names (a plugin folder, or ``MODULE:CLASS``), as Hermes
        0.19.0's plugin loader does; raises LoadError."""
        from agent.memory_provider import MemoryProvider

        self.base = MemoryProvider
        self.registered = None
        module, class_name = self._import_target(target, cwd)
        self.module = module
        if class_name is not None:
            found = getattr(module, class_name, None)
            if not isinstance(found, type):
                raise LoadError(f"{module.__name__} has no class {class_name!r}")
            if not issubclass(found, MemoryProvider):
                raise LoadError(
                    f"{module.__name__}:{class_name} is not a subclass of Hermes' MemoryProvider: "
                    "not a provider"
                )
            self.via, self.provider_class = "class", found
        elif callable(getattr(module, "register", None)):
            self.via = "register"
        else:
            self.via, self.provider_class = "subclass", self._subclass()
        return self._instance()

    def lacking(self, provider: Any) -> list[str]:
        """Returns the hooks of the interface ``provider`` lacks (one that is not a
        ``MemoryProvider`` may: ``register(ctx)`` can register anything, PLUGIN-1)."""
        return [method for method in HOOKS if not callable(getattr(provider, method, None))]

    def wrap(self, provider: Any) -> None:
        """Times every hook of ``provider`` whoever calls it (the driver or Hermes' manager),
        recording each call, its end and what it raised; the wrapper keeps the hook's
        signature (Hermes reads it). A hook the provider lacks is given the interface's
        default, as a subclass would inherit it: PLUGIN-1 alone judges what it lacks."""
        base = self.base
        for method in HOOKS:
            original = getattr(provider, method, None)
            if not callable(original) and base is not None:
                default = getattr(base, method, None)
                if not callable(default) or getattr(default, "__isabstractmethod__", False):
                    continue
                original = default.__get__(provider, type(provider))
            if not callable(original):
                continue
            try:
                setattr(provider, method, self._timed(method, original))
            except (AttributeError, TypeError):
                continue  # a class that forbids it: its calls are timed by the driver alone

    def _timed(self, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        driver = self

        @functools.wraps(original)
        def hook(*args: Any, **kwargs: Any) -> Any:
            record: dict[str, Any] = {
                "kind": "hook",
                "method": method,
                "start": time.monotonic(),
                "end": None,
                "raised": None,
            }
            driver._guarded(driver.record, record)
            stack = driver.hooks_running()
            if not stack:
                driver.local.hooks = stack
            stack.append(method)
            try:
                return original(*args, **kwargs)
            except BaseException as error:
                record["raised"] = _describe(error)
                raise
            finally:
                stack.pop()
                record["end"] = time.monotonic()

        return hook

    def claims(self, provider: Any) -> list[str]:
        """Returns the features the provider's code claims (SPEC.md, PLUGIN): ``recall`` and
        ``mirror`` from the methods its class overrides; ``provider-tools`` is added from what
        ``get_tool_schemas()`` returns."""
        base = self.base
        cls = type(provider)

        def overrides(method: str) -> bool:
            return getattr(cls, method, None) not in (None, getattr(base, method, None))

        found = []
        if overrides("prefetch") and overrides("sync_turn"):
            found.append("recall")
        if overrides("on_memory_write"):
            found.append("mirror")
        return found

    # --- requests ------------------------------------------------------------------------

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        handler = getattr(self, f"op_{op}", None)
        if not isinstance(op, str) or handler is None:
            return {"ok": False, "error": f"unknown op {op!r}"}
        return dict(handler(request))

    def op_load(self, request: Mapping[str, Any]) -> dict[str, Any]:
        target = str(request.get("target") or (sys.argv[-1] if len(sys.argv) > 1 else ""))
        cwd = str(request.get("cwd") or os.getcwd())
        limit = float(request.get("limit") or 60.0)
        homes = self.point_homes(target, cwd)
        # Hermes' own modules load before the watching begins
        import agent.memory_manager
        import agent.memory_provider

        with contextlib.suppress(ImportError):
            importlib.import_module("hermes_constants")  # the profile override (in_profile)
        try:
            import toolsets

            core = [str(name) for name in getattr(toolsets, "_HERMES_CORE_TOOLS", [])]
        except Exception:
            core = []
        bundled_dir()  # Hermes' plugins package, imported before the watching begins
        hermes_start_up()  # the home Hermes sets up before it loads any plugin
        self.trace_sqlite()
        self.baseline = {thread.ident or 0 for thread in threading.enumerate()}
        started = time.monotonic()
        self.watching = True
        outcome = self.caller.call(lambda: self.load(target, cwd), limit)
        ended = time.monotonic()
        if outcome.get("hung"):
            return {"ok": False, "error": f"loading {target} did not finish within {limit:g} s"}
        if "raised" in outcome:
            raised = outcome["raised"]
            error = raised.split(": ", 1)[1] if raised.startswith("LoadError: ") else raised
            return {"ok": False, "error": error}
        provider = outcome["value"]
        features = self.claims(provider)
        lacking = self.lacking(provider)
        self.wrap(provider)
        self.instances.append(provider)
        name = self.caller.call(lambda: provider.name, 5.0)
        schemas = self.caller.call(provider.get_tool_schemas, 5.0)
        if isinstance(schemas.get("value"), list) and schemas["value"]:
            features.append("provider-tools")
        return {
            "ok": True,
            "name": name.get("value") if isinstance(name.get("value"), str) else None,
            "class": f"{type(provider).__module__}.{type(provider).__qualname__}",
            "via": self.via,
            "registered": self.registered,
            "interface": self.base is not None and isinstance(provider, self.base),
            "lacking": lacking,
            "features": sorted(features),
            "version": self._version(),
            "hermes": _hermes_release(),
            "core_tools": core,
            "homes": homes,
            "load": {"start": started, "end": ended},
            "prefetch_timeout": getattr(agent.memory_manager, "_EXTERNAL_PREFETCH_TIMEOUT_S", None),
        }

    def _version(self) -> str:
        if self.distribution is not None:
            return str(self.distribution.version)
        module = self.module
        version = getattr(module, "__version__", None)
        if isinstance(version, str):
            return version
        origin = getattr(module, "__file__", None)
        manifest = Path(origin).with_name("plugin.yaml") if origin else None
        if manifest is not None and manifest.is_file():
            found = re.search(
                r"^version:\s*['\"]?([^'\"\s]+)", manifest.read_text(errors="replace"), re.MULTILINE
            )
            if found:
                return found.group(1)
        return ""

    def op_instance(self, request: Mapping[str, Any]) -> dict[str, Any]:
        limit = float(request.get("limit") or 60.0)
        outcome = self.caller.call(self._instance, limit)
        if outcome.get("hung") or "raised" in outcome:
            return {"ok": False, "error": outcome.get("raised") or "loading hung"}
        provider = outcome["value"]
        self.wrap(provider)
        self.instances.append(provider)
        return {"ok": True, "instance": len(self.instances) - 1}

    def _arguments(self, request: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        def given(value: Any) -> Any:
            return (lambda *_, **__: None) if value == CALLBACK else value

        args = [given(value) for value in request.get("args") or []]
        kwargs = {str(k): given(v) for k, v in (request.get("kwargs") or {}).items()}
        home = _path_of(kwargs.get("hermes_home"))
        if home is not None:
            self.allowed.add(home)
        return args, kwargs

    def op_call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        index, method = int(request.get("instance") or 0), str(request.get("method"))
        if method != "name" and method not in HOOKS:
            return {"ok": False, "error": f"{method} is not a hook of the interface"}
        if not 0 <= index < len(self.instances):
            return {"ok": False, "error": f"no instance {index}"}
        provider = self.instances[index]
        args, kwargs = self._arguments(request)
        if method == "initialize" and isinstance(kwargs.get("hermes_home"), str):
            self.homes[index] = kwargs["hermes_home"]
        home = self.homes.get(index)
        if method == "name":
            outcome = self.caller.call(lambda: provider.name, float(request.get("limit") or 10.0))
        else:
            function = getattr(provider, method)
            outcome = self.caller.call(
                lambda: in_profile(home, function, *args, **kwargs),
                float(request.get("limit") or 10.0),
            )
        if method == "backup_paths" and isinstance(outcome.get("value"), list):
            self.allowed.update(p for p in map(_path_of, outcome["value"]) if p)
        return self._outcome(outcome)

    @staticmethod
    def _outcome(outcome: Mapping[str, Any]) -> dict[str, Any]:
        value = outcome.get("value")
        return {
            "ok": True,
            "value": portable(value),
            "type": type(value).__name__,
            "raised": outcome.get("raised"),
            "trace": outcome.get("trace"),
            "hung": bool(outcome.get("hung")),
            "seconds": outcome.get("seconds", 0.0),
            "ended": time.monotonic(),
        }

    def op_manager(self, request: Mapping[str, Any]) -> dict[str, Any]:
        from agent.memory_manager import MemoryManager

        index = int(request.get("instance") or 0)
        manager = MemoryManager()
        outcome = self.caller.call(
            lambda: manager.add_provider(self.instances[index]), float(request.get("limit") or 10.0)
        )
        self.managers.append(manager)
        answer = self._outcome(outcome)
        answer["manager"] = len(self.managers) - 1
        return answer

    def op_manager_call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        index, method = int(request.get("manager") or 0), str(request.get("method"))
        if method not in MANAGER_METHODS:
            return {"ok": False, "error": f"{method} is not a method the driver calls"}
        function = getattr(self.managers[index], method)
        args, kwargs = self._arguments(request)
        outcome = self.caller.call(
            lambda: function(*args, **kwargs), float(request.get("limit") or 10.0)
        )
        return self._outcome(outcome)

    def op_events(self, request: Mapping[str, Any]) -> dict[str, Any]:
        since = int(request.get("since") or 0)
        with self.lock:
            found = [dict(event) for event in self.events[since:]]
            count = len(self.events)
        return {"ok": True, "events": found, "next": count, "now": time.monotonic()}

    def op_settle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Waits until no hook runs and no event came for ``quiet`` seconds, at most ``limit``:
        what a provider does in the background after its hooks returned has then been done."""
        quiet, limit = float(request.get("quiet") or 0.5), float(request.get("limit") or 5.0)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            with self.lock:
                last = max((e.get("end") or e["t"] for e in self.events), default=0.0)
                running = any(e["kind"] == "hook" and e["end"] is None for e in self.events)
            if not running and time.monotonic() - last >= quiet:
                return {"ok": True, "settled": True}
            time.sleep(0.05)
        return {"ok": True, "settled": False}

    def op_threads(self, request: Mapping[str, Any]) -> dict[str, Any]:
        found = [
            {"name": thread.name, "daemon": thread.daemon, "alive": thread.is_alive()}
            for thread in threading.enumerate()
            if (thread.ident or 0) not in self.baseline and not thread.name.startswith(OWN_THREAD)
        ]
        return {"ok": True, "threads": found}

    def op_now(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {"ok": True, "now": time.monotonic()}


class _Collector:
    """The plugin context Hermes 0.19.0 hands ``register(ctx)``: it keeps the providers given
    (Hermes keeps the last) and takes every other registration without doing anything."""

    def __init__(self, registered: list[Any]) -> None:
        self._registered = registered

    def register_memory_provider(self, provider: Any) -> None:
        self._registered.append(provider)

    def register_tool(self, *args: Any, **kwargs: Any) -> None:
        """Does nothing, as Hermes' collector."""

    def register_hook(self, *args: Any, **kwargs: Any) -> None:
        """Does nothing, as Hermes' collector."""

    def register_cli_command(self, *args: Any, **kwargs: Any) -> None:
        """Does nothing, as Hermes' collector."""


def in_profile(home: str | None, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Returns ``function(*args, **kwargs)`` run in the profile of ``home`` as Hermes' gateway
    runs a profile's turn when it serves several from one process (hermes-agent 0.19.0,
    ``gateway/run.py``, ``_profile_runtime_scope``): ``hermes_constants.get_hermes_home()``
    answers ``home`` meanwhile. Without ``home``, or in a release without the override, it is
    the call alone."""
    setter = getattr(sys.modules.get("hermes_constants"), "set_hermes_home_override", None)
    resetter = getattr(sys.modules.get("hermes_constants"), "reset_hermes_home_override", None)
    if home is None or setter is None or resetter is None:
        return function(*args, **kwargs)
    token = setter(home)
    try:
        return function(*args, **kwargs)
    finally:
        resetter(token)


def hermes_start_up() -> None:
    """Sets up the Hermes home as Hermes does when it starts, before it loads any plugin:
    hermes-agent 0.19.0's ``load_config``, the first thing its command line and gateway do,
    runs ``hermes_cli.config.ensure_hermes_home``, which creates the home's folders and
    ``SOUL.md`` once per home and process. A provider whose ``register`` loads Hermes' config
    then finds it done, as in Hermes, and what loading writes is its own (PLUGIN-1). A release
    without that function, or whose function fails, is left as it is."""
    try:
        config = importlib.import_module("hermes_cli.config")
    except Exception:
        return
    setup = getattr(config, "ensure_hermes_home", None)
    if callable(setup):
        with contextlib.suppress(Exception):
            setup()


@functools.cache
def bundled_dir() -> Path | None:
    """Returns the folder of the providers this Hermes release bundles (``plugins/memory``), or
    ``None`` when it has none; Hermes imports them as ``plugins.memory.<name>``."""
    try:
        found = importlib.util.find_spec("plugins.memory")
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations))).resolve()


def package_folder(target: str) -> tuple[metadata.Distribution, Path]:
    """Returns the distribution ``NAME==VERSION`` names, installed here, and the plugin folder it
    installs: the package its ``hermes_agent.memory_providers`` entry point names, else its
    first top-level package whose ``__init__.py`` Hermes 0.19.0 would take for a memory
    provider's (:data:`MARKERS`). Raises LoadError (one line) when there is none."""
    found = PACKAGE.match(target)
    assert found is not None
    name, version = found.group("name"), found.group("version")
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise LoadError(f"{name} is not installed in this environment") from None
    if distribution.version != version:
        raise LoadError(f"{name} {distribution.version} is installed here, not {version}")
    named = [
        entry.value.partition(":")[0].split(".")[0]
        for entry in distribution.entry_points
        if entry.group == PROVIDER_ENTRY_POINTS
    ]
    tops = sorted(
        {
            str(path).split("/")[0]
            for path in distribution.files or []
            if str(path).count("/") == 1 and str(path).endswith("/__init__.py")
        }
    )
    for top in dict.fromkeys(named + tops):
        folder = Path(str(distribution.locate_file(top)))
        try:
            head = (folder / "__init__.py").read_text(encoding="utf-8", errors="replace")[:8192]
        except OSError:
            continue
        if any(marker in head for marker in MARKERS):
            return distribution, folder
    raise LoadError(
        f"{name} {version} installs no plugin folder (no top-level package whose __init__.py "
        "names register_memory_provider or MemoryProvider, as Hermes looks for): name its "
        "provider as MODULE:CLASS"
    )


def _hermes_release() -> str:
    """Returns the distribution of this environment that ships ``agent/memory_provider.py``, as
    ``NAME VERSION``."""
    for distribution in metadata.distributions():
        files = distribution.files or []
        if any(str(path) == "agent/memory_provider.py" for path in files):
            return f"{distribution.metadata['Name']} {distribution.version}"
    return "an unknown Hermes build"


@contextmanager
def protocol_stream() -> Iterator[IO[str]]:
    """Yields the stream the answers go to: the process's real standard output, kept apart,
    while file descriptor 1 and ``sys.stdout`` go to standard error, so that nothing the
    provider prints can break the protocol."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with os.fdopen(private, "w", encoding="utf-8") as stream:
        yield stream


def main() -> int:
    """Serves requests from standard input until it closes, then ends the process at once (a
    thread the provider left must not keep it alive)."""
    with protocol_stream() as out:
        driver = Driver(out)
        sys.addaudithook(driver.audit)
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except ValueError as error:
                answer: dict[str, Any] = {"ok": False, "error": f"not JSON: {error}"}
                request = {}
            else:
                try:
                    answer = driver.answer(request)
                except Exception as error:  # the driver's own bug: said, never hidden
                    answer = {
                        "ok": False,
                        "error": f"BUG IN MEMSPEC'S DRIVER: {_describe(error)}",
                        "trace": traceback.format_exc()[-2000:],
                    }
            answer["id"] = request.get("id") if isinstance(request, dict) else None
            out.write(json.dumps(answer) + "\n")
            out.flush()
        out.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
