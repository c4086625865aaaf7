"""Backends as the harness sees them: something that opens sessions on a root (CONTRACT-*).

Every part of the harness talks to a store through :class:`Session.request`, in the JSON Lines
protocol's requests and answers whatever the transport. The in-process transport maps them onto a
Python store's methods; a store that raises or answers with no Outcome is a :class:`BackendDefect`
recording what was sent and received.
"""

from __future__ import annotations

import functools
import importlib
import queue
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, NotRequired, Protocol, Self, TypedDict, cast

from memspec.conformance.transport.wire import Answer, Fields, Request
from memspec.conformance.verdict.blame import Answered, blame, refused_core_action
from memspec.conformance.verdict.findings import DEFECT_CLAUSE, Finding, Kind, Refusal
from memspec.spec import codes
from memspec.spec.clauses import PROVIDER, STORE
from memspec.spec.errors import UsageError
from memspec.spec.requests import OP_FIELDS
from memspec.spec.targets import DEFAULT_LIMITS

if TYPE_CHECKING:  # describe() imports it when it runs: memspec serve never does
    from memspec.conformance.verdict.records import BackendInfo

OP_FEATURES = {
    "batch": "batch",
    "fence": "fence",
    "patch": "patch",
    "agent_start": "agent",
    "agent_turn": "agent",
    "agent_rebuild": "agent",
    "tool_schema": "tool",
    "tool_call": "tool",
}


def request_problem(op: object, fields: Mapping[str, Any]) -> str | None:
    """Returns why a request is malformed (unknown op, missing or extra fields), or ``None``."""
    if op not in OP_FIELDS:
        return f"unknown op {op!r}"
    wanted = OP_FIELDS[str(op)]
    missing = [name for name in wanted if name not in fields]
    if missing:
        return f"{op} needs field {missing[0]!r}"
    extra = sorted(set(fields) - set(wanted))
    return f"{op} takes no field {extra[0]!r}" if extra else None


RAISE_CLAUSES = {"tool_call": "TOOL-6"}
"""The clause a raise out of an operation breaks where one is narrower than CONTRACT-6: the
memory tool answers every argument text and never raises (TOOL-6)."""


class BackendDefect(Finding):
    """The backend broke the contract at the transport level: it raised, hung, died, or answered
    with something that is not a valid response. ``sent`` and ``received`` say exactly what;
    ``clause`` is the clause broken: CONTRACT-6 (it raised, hung or died) unless a narrower one
    applies (CONTRACT-2: an answer of the wrong shape); ``hung`` says the call did not return
    within its timeout (a check whose state explains a hang, such as a lock a crash left,
    blames that state's clause)."""

    kind = Kind.DEFECT

    def __init__(
        self,
        message: str,
        sent: Any = None,
        received: Any = None,
        detail: str = "",
        clause: str = DEFECT_CLAUSE,
        *,
        hung: bool = False,
    ) -> None:
        super().__init__(message)
        self.sent = sent
        self.received = received
        self.detail = detail
        """The backend's last words where it printed any (its exception, as a rule)."""
        self.clause = clause
        self.hung = hung


class Session(Protocol):
    """A Session is one store session on a root, behind either transport, and the context
    manager that closes it: ``with backend.open(root, limits) as session:`` ends the session
    when the block ends, however it ends (what closing raises propagates, as from
    :meth:`close`)."""

    features: frozenset[str]
    name: str

    def request(self, op: str, **fields: Any) -> Answer:
        """Sends one request and returns the validated answer (raises BackendDefect)."""
        ...

    def close(self) -> None:
        """Ends the session."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


class Runs(Enum):
    """Where a backend's store runs, which decides what can be done to its file-system calls
    (:mod:`memspec.conformance.tamper.capability` builds that from it)."""

    PYTHON = "python"
    """Python code in the process that opens the session: a worker process can interpose it."""
    COMMAND = "command"
    """A process of its own that each session starts: strace can trace it."""
    PROVIDER = "provider"
    """A Hermes memory provider plugin, driven in a process of its own by memspec's driver,
    which watches its files itself (``transport/provider.py``): the subject ``provider``."""


@dataclass(frozen=True)
class Address:
    """Where a backend is found again by a later run: a Python backend's ``MODULE:FACTORY``
    (``factory``), or a ``command`` and the directory it runs in (``cwd``); ``subject`` is
    ``provider`` for a command that drives a provider plugin (SPEC.md, "Subjects"), whose
    ``home_setup`` is the command run in each new Hermes home before it starts (``--home-setup``;
    empty: none)."""

    factory: str = ""
    command: str = ""
    cwd: str = ""
    subject: str = STORE
    home_setup: str = ""


class Backend(Protocol):
    """A Backend opens sessions on roots; ``label`` names it in reports, ``runs`` says where
    its store runs, :meth:`address` and ``timeout`` how to find it again."""

    runs: ClassVar[Runs]

    @property
    def label(self) -> str:
        """The backend's name in reports: its ``MODULE:FACTORY`` or its command."""
        ...

    @property
    def timeout(self) -> float | None:
        """The longest wait for one call, in seconds (``None``: the default wait)."""
        ...

    def open(self, root: Path, limits: Mapping[str, int] | None = None) -> Session:
        """Opens a new session on ``root`` (raises BackendDefect when it cannot)."""
        ...

    def address(self) -> Address:
        """Returns where a later run finds this backend again."""
        ...


"""The clause of its own that a refusal of a core action breaks, besides CONTRACT-2."""


def subject_of(backend: Backend) -> str:
    """Returns what certifying ``backend`` certifies (SPEC.md, "Subjects"): ``provider`` for a
    provider plugin, ``store`` for every other backend."""
    return PROVIDER if backend.runs is Runs.PROVIDER else STORE


def describe(backend: Backend) -> BackendInfo:
    """Returns what a report says of ``backend``: its label, and the name, version and claimed
    features one session on a scratch root gives (when none can be opened, the features are
    one item saying why)."""
    from memspec.conformance.core.locations import scratch_root
    from memspec.conformance.verdict.records import BackendInfo

    name, version = backend.label, ""
    features: tuple[str, ...] = ("?",)
    with scratch_root("memspec-info-") as root:
        try:
            session = backend.open(root)
        except (BackendDefect, UsageError) as error:
            features = (f"could not open a session: {error}",)
        else:
            with session:
                features = tuple(sorted(session.features))
                name = getattr(session, "name", name) or name
                version = str(getattr(session, "version", "") or "")
    return BackendInfo(backend.label, name, version, features)


def check_answer(
    op: str, sent: Request, answer: object, features: frozenset[str] = frozenset()
) -> Answer:
    """Returns ``answer`` if it is a valid response to ``op`` from a backend that claims
    ``features``, as :func:`~memspec.conformance.verdict.blame.blame` judges its shape; raises
    BackendDefect (CONTRACT-2) otherwise, and :class:`Refusal` when it refuses an action of
    ``core`` as unsupported."""
    problems = blame(Answered({**sent, "op": op}, answer, features=features))
    if problems and isinstance(answer, Mapping):
        refused = refused_core_action(sent, answer.get("code"), features)
        if refused is not None:
            raise Refusal(refused, tuple(p.clause for p in problems), problems[0].text)
    if problems:
        raise BackendDefect(problems[0].text, sent, answer, clause=problems[0].clause)
    return cast(Answer, dict(cast(Mapping[str, Any], answer)))


@functools.lru_cache(maxsize=64)
def _module_version(spec: str) -> str:
    """Returns the ``__version__`` of the backend's module or of its top package, or its
    distribution's version (the one named like the top package first: scanning all installed
    packages costs a quarter of a second). Cached."""
    module_name = spec.partition(":")[0]
    top = module_name.split(".")[0]
    for name in (module_name, top):
        version = getattr(sys.modules.get(name), "__version__", None)
        if version:
            return str(version)
    from importlib import metadata

    try:
        return metadata.version(top)
    except metadata.PackageNotFoundError:
        pass
    try:
        return metadata.version(metadata.packages_distributions().get(top, [top])[0])
    except (metadata.PackageNotFoundError, IndexError):
        return ""


def load_factory(spec: str) -> Callable[..., Any]:
    """Returns the factory named ``MODULE:FACTORY`` (raises UsageError with the reason)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"--backend must be MODULE:FACTORY, e.g. "
            f"memspec.reference_impl:open_store; got {spec!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise UsageError(
            f"cannot import backend module {module_name!r}: {type(error).__name__}: {error}"
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UsageError(f"{module_name!r} has no callable {attr!r}")
    return factory


def factory_name(factory: Callable[..., Any]) -> str | None:
    """Returns the ``MODULE:FACTORY`` name that imports ``factory`` itself, or ``None`` when
    there is none (a lambda, a function defined inside another, a bound method)."""
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if not module or module == "__main__" or not qualname or "<" in qualname or "." in qualname:
        return None
    name = f"{module}:{qualname}"
    try:
        return name if load_factory(name) is factory else None
    except UsageError:
        return None


class SessionThread:
    """The one daemon thread that runs a session's factory and every call, in order, so a store may
    hold thread-bound resources and a hung store cannot hang the harness: :meth:`call` raises
    :class:`TimeoutError` after ``timeout`` seconds. With no timeout, calls run inline (``memspec
    serve``)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] | None = None
        if timeout is not None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(
                target=_run_jobs, args=(self._jobs,), daemon=True, name="memspec-backend-session"
            ).start()
            weakref.finalize(self, self._jobs.put, None)

    def call(self, function: Callable[[], Any]) -> Any:
        """Returns ``function()`` run on the thread; re-raises what it raised."""
        if self._jobs is None:
            return function()
        done = threading.Event()
        result: list[Any] = []
        failure: list[BaseException] = []

        def job() -> None:
            try:
                result.append(function())
            except BaseException as error:
                failure.append(error)
            finally:
                done.set()

        self._jobs.put(job)
        if not done.wait(self.timeout):
            raise TimeoutError(f"did not return within {self.timeout:g} s")
        if failure:
            raise failure[0]
        return result[0]

    def stop(self) -> None:
        """Lets the thread end once the calls already queued have run."""
        if self._jobs is not None:
            self._jobs.put(None)


def _run_jobs(jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        job()
        del job  # the finished job holds the session: keeping it would keep the thread alive


@dataclass
class InProcessSession(Session):
    """A session on a Python store object: requests become method calls (CONTRACT-*), on its
    :class:`SessionThread`. After a timeout the session is dead: every later request is a defect."""

    store: Any
    name: str
    features: frozenset[str] = field(default_factory=frozenset)
    thread: SessionThread = field(default_factory=lambda: SessionThread(None))
    dead: bool = False
    version: str = ""

    def request(self, op: str, **fields: Any) -> Answer:
        """Calls the store method for ``op`` and returns the answer as a protocol response."""
        sent = cast(Request, {"op": op, **fields})
        problem = request_problem(op, fields)
        if problem is not None:
            raise UsageError(problem)
        feature = OP_FEATURES.get(op)
        method = getattr(self.store, op, None)  # tool_schema and tool_call are methods too
        if feature and (feature not in self.features or not callable(method)):
            return {"ok": False, "code": codes.E_UNSUPPORTED}
        answer = self._on_thread(lambda: self._call(op, cast(Fields, fields)), sent)
        return check_answer(op, sent, answer, self.features)

    def _on_thread(self, function: Callable[[], Any], sent: Request) -> Any:
        """Returns ``function()`` run on the session's thread; a raise or a timeout is a
        BackendDefect, and a timeout leaves the session dead."""
        if self.dead:
            raise BackendDefect("the session is dead after an earlier timeout", sent)
        try:
            return self.thread.call(function)
        except TimeoutError as error:
            self.dead = True
            raise BackendDefect(
                f"the backend {error}; raise --timeout if it is slow, not hung", sent, hung=True
            ) from None
        except Exception as error:
            raise BackendDefect(
                f"the backend raised {type(error).__name__}: {error}",
                sent,
                "".join(traceback.format_exception(error)[-3:]),
                clause=RAISE_CLAUSES.get(str(sent.get("op")), DEFECT_CLAUSE),
            ) from None

    def _call(self, op: str, fields: Fields) -> Any:
        store = self.store
        if op == "load":
            store.load()
            return {"ok": True, "code": codes.OK}
        if op == "entries":
            return {"ok": True, "code": codes.OK, "entries": store.entries(fields["target"])}
        if op == "snapshot":
            return {"ok": True, "code": codes.OK, "snapshot": store.snapshot(fields["target"])}
        if op == "fence":
            return {"ok": True, "code": codes.OK, "block": store.fence(fields["raw"])}
        if op == "add":
            return store.add(fields["target"], fields["content"])
        if op == "replace":
            return store.replace(fields["target"], fields["old_text"], fields["new_content"])
        if op == "remove":
            return store.remove(fields["target"], fields["old_text"])
        if op == "patch":
            return store.patch(fields["target"], fields["old_text"], fields["content"])
        if op == "agent_start":
            return store.agent_start(fields["base"], fields["providers"])
        if op == "agent_turn":
            return store.agent_turn(fields["user"], fields["reply"])
        if op == "agent_rebuild":
            return store.agent_rebuild(fields["point"])
        if op == "tool_schema":
            return {"ok": True, "code": codes.OK, "schema": store.tool_schema()}
        if op == "tool_call":
            return {"ok": True, "code": codes.OK, "result": store.tool_call(fields["arguments"])}
        return store.batch(fields["target"], fields["operations"])

    def close(self) -> None:
        """Calls the store's optional ``close`` (on the session's thread), then ends the thread."""
        close = getattr(self.store, "close", None)
        try:
            if callable(close) and not self.dead:
                self._on_thread(close, {"op": "close"})
        finally:
            self.thread.stop()


class _Pickled(TypedDict):
    """An :class:`InProcessBackend` as it travels to a worker process."""

    spec: str
    timeout: float | None
    version: str
    factory: NotRequired[bytes]


@dataclass
class InProcessBackend:
    """A Python backend named ``MODULE:FACTORY``, run in the harness's own process;
    :meth:`of_factory` wraps a factory with no importable name (``spec`` is then a label)."""

    spec: str
    timeout: float | None = None
    factory: Callable[..., Any] = field(init=False, repr=False)
    named: bool = field(default=True, repr=False)
    _version: str | None = field(default=None, init=False, repr=False, compare=False)
    runs: ClassVar[Runs] = Runs.PYTHON

    def __post_init__(self) -> None:
        if self.named:
            self.factory = load_factory(self.spec)

    @classmethod
    def of_factory(cls, factory: Callable[..., Any], timeout: float | None) -> InProcessBackend:
        """Returns the backend of a factory object (named by its module and qualified name)."""
        module = getattr(factory, "__module__", None) or "?"
        label = f"{module}:{getattr(factory, '__qualname__', type(factory).__name__)}"
        backend = cls(label, timeout, named=False)
        backend.factory = factory
        return backend

    def __getstate__(self) -> _Pickled:
        """Pickles the backend by name, so that it can travel to a worker process (with its
        version, which the worker could only look up slowly), or a nameless factory by value."""
        version = self._version_of()
        state: _Pickled = {"spec": self.spec, "timeout": self.timeout, "version": version}
        if self.named:
            return state
        import dill  # multiprocess's pickler: it pickles lambdas and closures by value

        return {**state, "factory": dill.dumps(self.factory, recurse=True)}

    def __setstate__(self, state: _Pickled) -> None:
        """Imports the factory again from its ``MODULE:FACTORY`` name (in the worker)."""
        self.spec = state["spec"]
        self.timeout = state["timeout"]
        self.named = "factory" not in state
        if self.named:
            self.__post_init__()
        else:
            import dill

            self.factory = dill.loads(state["factory"])
        self._version = state["version"]

    def _version_of(self) -> str:
        """Returns the version of the backend's module or distribution ("" when unknown), looked
        up once: a worker gets it with the pickled backend, "" included (looking up a version
        that is not there imports ``importlib.metadata`` and scans every installed package)."""
        known = self._version
        if known is None:
            known = self._version = _module_version(self.spec)
        return known

    @property
    def label(self) -> str:
        """The name reports use."""
        return self.spec

    def address(self) -> Address:
        """Returns the backend's ``MODULE:FACTORY`` (a label for a nameless factory)."""
        return Address(factory=self.spec)

    def open(self, root: Path, limits: Mapping[str, int] | None = None) -> InProcessSession:
        """Calls the factory on ``root`` with the limits (raises BackendDefect if it fails)."""
        limits = {**DEFAULT_LIMITS, **(limits or {})}
        kwargs = {"memory_char_limit": limits["memory"], "user_char_limit": limits["user"]}
        thread = SessionThread(self.timeout)
        try:
            store = thread.call(lambda: self.factory(root, **kwargs))
        except Exception as error:
            thread.stop()
            raise BackendDefect(
                f"the factory raised {type(error).__name__}: {error}",
                {"op": "open", "root": str(root), **kwargs},
            ) from None
        claimed = getattr(store, "features", None) or ("core",)
        if isinstance(claimed, str) or not all(isinstance(f, str) for f in claimed):
            raise BackendDefect(
                "the store's features must be an iterable of str", {"op": "open"}, repr(claimed)
            )
        version = getattr(store, "version", None) or self._version_of()
        return InProcessSession(store, self.spec, frozenset(claimed), thread, version=str(version))
