"""Provider plugins as the harness sees them: a backend whose sessions each drive one Hermes
memory provider in a process of its own (PLUGIN, subject ``provider``).

:class:`ProviderBackend` is named by the command that starts memspec's driver
(``conformance/hermes/provider_driver.py``) in a Hermes environment with the provider's target
as its last argument. Each session starts that process with ``HOME``, the ``XDG_*_HOME``
directories, every other ``*_HOME`` and ``TMPDIR`` pointed at scratch directories beside the
session's root, and ``HERMES_HOME`` at the root itself; it loads the provider, and then calls
its hooks, Hermes' ``MemoryManager`` around it, and asks what the provider wrote, tried on the
network and left running. A call that hangs is reported as hung by the driver, which goes on; a
driver that dies or stops answering is a :class:`BackendDefect` of the clause of the hook it was
running (``spec/provider.py``, ``HOOK_CLAUSES``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

from memspec.conformance.core.locations import backend_environment
from memspec.conformance.core.waits import RELEASE_CALL_TIMEOUT
from memspec.conformance.transport import prestart
from memspec.conformance.transport.backend import Address, BackendDefect, Runs, Session
from memspec.conformance.transport.jsonlines import (
    EOF,
    close_process,
    invocation_dir,
    kill_process,
    read_output,
)
from memspec.conformance.transport.wire import Answer
from memspec.spec.clauses import PROVIDER
from memspec.spec.errors import UsageError
from memspec.spec.provider import HOOK_CLAUSES, Call, limit_of

EXCHANGE_MARGIN = 15.0
"""Seconds the harness waits for the driver's answer beyond the limit the driver waits for the
provider: the driver always answers, even for a call that hung."""
HOMES = ".memspec-homes"
"""The folder of the scratch ``HOME`` every other ``*_HOME`` variable points into (the driver
points the names in the provider's source there too)."""
XDG = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_STATE_HOME": ".local/state",
}


def scratch_of(root: Path) -> tuple[Path, Path]:
    """Returns the scratch ``HOME`` and ``TMPDIR`` of the sessions on ``root``: directories
    beside it, the same for every session on the root, so that a later process of the same
    profile finds what an earlier one left there (a provider's ``backup_paths()`` under
    ``HOME``)."""
    return root.with_name(root.name + ".home"), root.with_name(root.name + ".tmp")


def provider_environment(root: Path, home: Path, temporary: Path) -> dict[str, str]:
    """Returns the environment of a provider's process: memspec's own, with ``HERMES_HOME`` the
    root, ``HOME``, the XDG directories and every other ``*_HOME`` in the scratch ``HOME``, and
    ``TMPDIR`` the scratch temporary directory."""
    environment = backend_environment()
    for name in list(environment):
        if name.endswith("_HOME"):
            environment[name] = str(home / HOMES / name)
    environment.update({name: str(home / below) for name, below in XDG.items()})
    environment.update(
        HOME=str(home),
        HERMES_HOME=str(root),
        TMPDIR=str(temporary),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    environment.pop("PYTHONPATH", None)
    return environment


class HomeSetupError(UsageError):
    """The command ``--home-setup`` names failed in a Hermes home: it could not start, ended with
    a status other than 0 or outlived its budget. The user's command is wrong, not the provider
    nor memspec: give one that prepares a home as the provider's installer does."""


@dataclass
class HomeSetup:
    """A HomeSetup is the command ``memspec provider --home-setup CMD`` names, run once in each
    new Hermes home the provider is given (a session's root, PLUGIN-19's second profile) before
    the provider's process starts there: the provider's own installer, for a provider that runs
    only in a home it prepared. ``{home}`` in its words stands for the home; it runs in the home,
    with the provider's environment (:func:`provider_environment`), at most ``timeout`` seconds.
    What it writes is there before the provider's process starts, so no judge counts it as the
    provider's (PLUGIN-1, PLUGIN-7). The driver refuses the network inside its own process only:
    the setup's network is not refused."""

    command: str
    timeout: float
    prepared: set[str] = field(default_factory=set, repr=False, compare=False)

    def __post_init__(self) -> None:
        setup_words(self.command)

    def argv(self, home: Path) -> list[str]:
        """Returns the command's words with ``{home}`` replaced by ``home``."""
        return [word.replace("{home}", str(home)) for word in setup_words(self.command)]

    def prepare(self, home: Path, environment: Mapping[str, str]) -> None:
        """Runs the command in ``home`` unless it ran there already; raises HomeSetupError (one
        line: the command, what went wrong, its last line on stderr) when it fails."""
        key = os.path.realpath(home)
        if key in self.prepared:
            return
        argv = self.argv(home)
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                cwd=home,
                env=dict(environment),
                start_new_session=True,
            )
        except OSError as error:
            raise HomeSetupError(
                f"--home-setup {self.command!r} could not start {argv[0]!r}: "
                f"{error.strerror or error}"
            ) from None
        try:
            _, stderr = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            # the setup's own children end with it: it runs in a process group of its own
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            try:
                _, stderr = process.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a child of its own session holds the pipe
                stderr = ""
            raise HomeSetupError(
                f"--home-setup {self.command!r} did not finish within {self.timeout:g} s in "
                f"{home}{_last_line(stderr)}; raise --timeout if it is slow, not hung"
            ) from None
        if process.returncode != 0:
            raise HomeSetupError(
                f"--home-setup {self.command!r} ended with status {process.returncode} in "
                f"{home}{_last_line(stderr)}"
            )
        self.prepared.add(key)


def setup_words(command: str) -> list[str]:
    """Returns the words of the ``--home-setup`` command ``command`` (split as a shell does);
    raises UsageError for one that cannot be split or names nothing."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise UsageError(f"--home-setup {command!r} is no command: {error}") from None
    if not words:
        raise UsageError("--home-setup names no command; give the command that prepares a home")
    return words


def _last_line(stderr: str) -> str:
    """Returns ``: LINE``, the last line ``stderr`` holds that is not blank, or `` (nothing on
    stderr)``."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f": {lines[-1][:300]}" if lines else " (nothing on stderr)"


@dataclass
class ProviderSession(Session):
    """A session that drives one provider plugin in the driver's process: ``info`` is what
    loading it answered (its class, how it was loaded, the Hermes release, the core tool names,
    when loading began and ended), ``features`` the claims its code makes, ``home`` and
    ``temporary`` the scratch directories of its process."""

    command: str
    root: Path
    timeout: float
    cwd: str
    features: frozenset[str] = frozenset()
    name: str = ""
    version: str = ""
    setup: HomeSetup | None = None
    info: dict[str, Any] = field(default_factory=dict)
    home: Path = field(init=False)
    temporary: Path = field(init=False)
    process: subprocess.Popen[str] = field(init=False, repr=False)
    _lines: queue.Queue[object] = field(init=False, repr=False)
    _stderr: deque[str] = field(init=False, repr=False)
    _next_id: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise UsageError(f"not a valid command: {self.command!r}: {error}") from None
        self.home, self.temporary = scratch_of(self.root)
        self.home.mkdir(exist_ok=True)
        self.temporary.mkdir(exist_ok=True)
        # the folder the other *_HOME variables point into exists, as a real home does: a
        # provider that makes its own home makes only that (PLUGIN-7)
        (self.home / HOMES).mkdir(exist_ok=True)
        self.prepare_home(self.root)
        try:
            self.process = prestart.start(
                argv, str(self.home), provider_environment(self.root, self.home, self.temporary)
            )
        except OSError as error:
            raise BackendDefect(
                f"could not start {argv[0]!r}: {error.strerror or error}",
                {"command": self.command},
                clause=HOOK_CLAUSES["load"],
            ) from None
        self._lines, self._stderr, _ = read_output(self.process)
        loaded = self._exchange(
            {"op": "load", "cwd": self.cwd, "limit": self.timeout}, "load", self.timeout
        )
        if not loaded.get("ok"):
            self.kill()
            raise BackendDefect(
                f"the provider could not be loaded: {loaded.get('error')}",
                {"op": "load", "target": shlex.split(self.command)[-1]},
                loaded,
                clause=HOOK_CLAUSES["load"],
            )
        self.info = loaded
        self.features = frozenset(str(f) for f in loaded.get("features") or ())
        self.name = str(loaded.get("name") or loaded.get("class") or "")
        self.version = str(loaded.get("version") or "")

    def prepare_home(self, home: Path) -> None:
        """Runs ``--home-setup``'s command in the Hermes home ``home`` (this session's root, or
        another profile's home it is given) unless it ran there already; raises HomeSetupError
        when it fails. Without ``--home-setup`` it does nothing."""
        if self.setup is not None:
            self.setup.prepare(home, provider_environment(home, self.home, self.temporary))

    def _exchange(self, request: dict[str, Any], method: str, limit: float) -> dict[str, Any]:
        """Sends one request to the driver and returns its answer (raises BackendDefect, of the
        clause of ``method``, when the driver dies or does not answer)."""
        request = {"id": self._next_id, **request}
        self._next_id += 1
        clause = HOOK_CLAUSES.get(method, HOOK_CLAUSES["load"])
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._defect("the provider's process ended", request, clause) from None
        try:
            received = self._lines.get(timeout=limit + EXCHANGE_MARGIN)
        except queue.Empty:
            raise self._defect(
                f"the provider's process did not answer within {limit + EXCHANGE_MARGIN:g} s",
                request,
                clause,
            ) from None
        if received is EOF:
            status = self.process.wait(timeout=5)
            raise self._defect(
                f"the provider's process ended (status {status}) during {method}", request, clause
            )
        try:
            answer = json.loads(cast(str, received))
        except ValueError:
            raise self._defect(
                f"the driver printed a line that is not JSON: {cast(str, received)[:200]!r}",
                request,
                clause,
            ) from None
        if not isinstance(answer, dict) or answer.get("id") != request["id"]:
            raise self._defect("the driver answered out of turn", request, clause)
        answer.pop("id")
        if str(answer.get("error", "")).startswith("BUG IN MEMSPEC"):
            from memspec.conformance.verdict.findings import HarnessError

            raise HarnessError(f"{answer['error']}\n{answer.get('trace', '')}")
        return answer

    def _defect(self, message: str, sent: Any, clause: str) -> BackendDefect:
        self.kill()
        tail = "\n".join(self._stderr)
        detail = [line.strip() for line in self._stderr if line.strip()]
        if tail:
            message += f"\n--- stderr of the provider's process (last lines) ---\n{tail}"
        return BackendDefect(message, sent, None, detail[-1] if detail else "", clause=clause)

    def request(self, op: str, **fields: Any) -> Answer:
        """Sends one request of the driver's protocol and returns its answer as it came."""
        return cast(Answer, self._exchange({"op": op, **fields}, op, self.timeout))

    def call(
        self, method: str, *args: Any, instance: int = 0, limit: float | None = None, **kwargs: Any
    ) -> Call:
        """Calls the provider's hook ``method`` (``name`` reads the property) and returns how
        it ended; the driver waits ``limit`` seconds (default: :func:`limit_of`) before it
        reports the call hung."""
        wait = limit if limit is not None else limit_of(method)
        request = {
            "op": "call",
            "instance": instance,
            "method": method,
            "args": list(args),
            "kwargs": kwargs,
            "limit": wait,
        }
        return self._call(request, method, wait)

    def _call(
        self, request: dict[str, Any], method: str, wait: float, blamed: str | None = None
    ) -> Call:
        """Sends the call ``request`` of ``method`` and returns how it ended; a driver that dies
        or does not answer is a defect of the clause of the hook ``blamed`` (``method``'s by
        default)."""
        answer = self._exchange(request, blamed or method, wait)
        if not answer.get("ok"):
            raise UsageError(f"the driver refused {method}: {answer.get('error')}")
        return Call.of(method, answer)

    def instance(self) -> int:
        """Loads another instance of the provider in the same process, as Hermes would again;
        returns its index."""
        answer = self._exchange({"op": "instance", "limit": self.timeout}, "load", self.timeout)
        if not answer.get("ok"):
            raise BackendDefect(
                f"a second instance could not be loaded: {answer.get('error')}",
                {"op": "instance"},
                answer,
                clause=HOOK_CLAUSES["load"],
            )
        return int(answer["instance"])

    def manager(self, instance: int = 0) -> tuple[int, Call]:
        """Builds a Hermes ``MemoryManager`` and adds the provider ``instance`` to it, as the agent
        does; returns the manager's index and how ``add_provider`` ended."""
        wait = limit_of("get_tool_schemas")
        answer = self._exchange(
            {"op": "manager", "instance": instance, "limit": wait}, "get_tool_schemas", wait
        )
        return int(answer.get("manager", 0)), Call.of("get_tool_schemas", answer)

    def manager_call(
        self, manager: int, method: str, *args: Any, limit: float = 20.0, **kwargs: Any
    ) -> Call:
        """Calls ``method`` of Hermes' manager ``manager`` and returns how it ended."""
        request = {
            "op": "manager_call",
            "manager": manager,
            "method": method,
            "args": list(args),
            "kwargs": kwargs,
            "limit": limit,
        }
        return self._call(request, method, limit, blamed="load")

    def events(self) -> list[dict[str, Any]]:
        """Returns everything the driver recorded since loading began: each hook called (its
        method, start, end, what it raised), write, network attempt and process start."""
        answer = self._exchange({"op": "events"}, "load", self.timeout)
        return list(answer.get("events") or [])

    def settle(self, quiet: float = 0.5, limit: float = 5.0) -> bool:
        """Waits until the provider has been quiet ``quiet`` seconds (no hook running, nothing
        recorded), at most ``limit``; returns whether it settled."""
        answer = self._exchange({"op": "settle", "quiet": quiet, "limit": limit}, "load", limit)
        return bool(answer.get("settled"))

    def threads(self) -> list[dict[str, Any]]:
        """Returns the threads started since loading began, but the driver's own."""
        return list(self._exchange({"op": "threads"}, "load", self.timeout).get("threads") or [])

    def now(self) -> float:
        """Returns the driver's clock, the one every event is timed by."""
        return float(self._exchange({"op": "now"}, "load", self.timeout).get("now") or 0.0)

    def kill(self) -> None:
        """Ends the provider's process at once."""
        kill_process(self.process)

    def close(self) -> None:
        """Closes the driver's input, which ends its process at once; kills it if it lingers."""
        close_process(self.process, 5)


@dataclass
class ProviderBackend:
    """A provider plugin, named by the command that starts memspec's driver on it in a Hermes
    environment (its last argument is the provider's target: a plugin folder or
    ``MODULE:CLASS``). ``cwd`` is the directory a relative target and ``MODULE`` are found
    from; ``timeout`` bounds loading the provider (import, ``register``, constructor) and
    ``home_setup``'s command, run once in each new Hermes home (:class:`HomeSetup`; empty:
    none)."""

    command: str
    timeout: float = RELEASE_CALL_TIMEOUT
    cwd: str = field(default_factory=invocation_dir)
    home_setup: str = ""
    runs: ClassVar[Runs] = Runs.PROVIDER
    setup: HomeSetup | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.home_setup:
            self.setup = HomeSetup(self.home_setup, self.timeout)

    @property
    def target(self) -> str:
        """The provider's target as given: a plugin folder or ``MODULE:CLASS``."""
        return shlex.split(self.command)[-1]

    @property
    def label(self) -> str:
        """The name reports use: the provider's target."""
        return f"provider {self.target}"

    def address(self) -> Address:
        """Returns the driver's command, the directory it resolves the target from, the
        subject ``provider`` and the ``--home-setup`` command (what a worker rebuilds it from)."""
        return Address(
            command=self.command, cwd=self.cwd, subject=PROVIDER, home_setup=self.home_setup
        )

    def open(self, root: Path, limits: Mapping[str, int] | None = None) -> ProviderSession:
        """Starts the driver with ``root`` as the provider's ``hermes_home`` (run ``home_setup``
        in it first, if it is new) and loads the provider (raises BackendDefect, of PLUGIN-1,
        when it cannot be loaded; HomeSetupError when the setup fails)."""
        return ProviderSession(self.command, root, self.timeout, self.cwd, setup=self.setup)


def open_provider(backend: object, root: Path) -> ProviderSession:
    """Opens a session of the provider plugin ``backend`` on ``root`` (its ``hermes_home``): what
    the provider checks are handed to reach a provider, whose calls a store's session lacks.
    Raises HarnessError for a backend that is no provider (the suite runs the provider checks
    only on one)."""
    session = backend.open(root) if isinstance(backend, ProviderBackend) else None
    if session is None:
        from memspec.conformance.verdict.findings import HarnessError

        raise HarnessError(f"a provider check ran against {backend!r}, not a provider plugin")
    return session


def driver_command(python: Path, driver: Path, target: str) -> str:
    """Returns the command that starts the driver ``driver`` with ``python`` (isolated mode,
    no bytecode written) on the provider ``target``."""
    return " ".join(shlex.quote(str(part)) for part in (python, "-I", "-B", driver, target))


def provider_label(session: Session) -> str:
    """Returns one line on a loaded provider: its name, class, how it was loaded, and the
    Hermes release it runs in (for the start of a run)."""
    info = getattr(session, "info", {})
    registered = info.get("registered")
    how = {
        "register": f"register(ctx), {registered} registration(s)",
        "subclass": "its subclass",
        "class": "the class named",
    }.get(str(info.get("via")), "?")
    return (
        f"{session.name!r} ({info.get('class')}, loaded by {how}) in {info.get('hermes')}; "
        f"claims {', '.join(sorted(session.features)) or 'nothing optional'}"
    )
