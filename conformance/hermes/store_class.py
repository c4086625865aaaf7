"""memspec backend: any class with Hermes' ``MemoryStore`` shape (``certify --hermes-class``).

Hermes' store has been copied into other agents with its methods intact: ``load_from_disk``,
``add`` / ``replace`` / ``remove`` (and ``apply_batch``) returning Hermes' result dicts, the live
``memory_entries`` / ``user_entries`` and a system-prompt snapshot method. This module finds those
parts in a class by inspection, says what it found (:meth:`Shape.describe`), and serves the
class as a contract backend over JSON Lines: ``python -m memspec.conformance.hermes.store_class
--class TARGET``, which is what ``memspec certify --hermes-class`` runs. A refusal's text is read
with Hermes' own table (:data:`~memspec.conformance.hermes.adapter.ERROR_CODES`) after the user's
rules (``--hermes-rules``); a text neither knows ends the session with an adapter gap that names
it, never with a guessed code. It never repairs the store.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from memspec.conformance.hermes.adapter import (
    ALWAYS_HOME,
    ERROR_CODES,
    Unmapped,
    home_variables,
    isolate,
    source_of,
    store_features,
)
from memspec.conformance.hermes.adapter import classify as hermes_classify
from memspec.conformance.transport.jsonlines import ADAPTER_GAP_STATUS
from memspec.conformance.verdict.findings import ADAPTER_GAP_MARK, AdapterGap
from memspec.spec.codes import OUTCOME_CODES
from memspec.spec.errors import UsageError
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

LOADERS = ("load_from_disk", "load")
SNAPSHOTS = (
    "format_for_system_prompt",
    "snapshot_block",
    "snapshot",
    "system_prompt_block",
    "snapshot_for_prompt",
)
ENTRY_METHODS = ("entries_for", "get_entries", "_entries_for")
BETWEEN = ("reset_consolidation_failures",)
"""Methods called before every mutation when the class has one: each contract call is one turn
of the agent, and Hermes' store counts failed consolidations per turn."""
DIRECTORY_WORDS = re.compile(r"dir|directory|root|path|home|folder|base", re.IGNORECASE)
DIRECTORY_FUNCTION = re.compile(r"^_?(get_)?\w*(memory|memories)\w*_dir(ectory)?$")
FILE_WORDS = re.compile(r"(path|file)$", re.IGNORECASE)
"""How a constructor parameter that takes one file is named: ``memory_path``, ``user_file``."""
RULE = re.compile(r"^(?P<pattern>.+?)\s+->\s+(?P<code>[A-Z_]+)\s*$")


class NotHermesShaped(UsageError):
    """The class lacks a part every Hermes-shaped store has (the message names it)."""


# -- the class and its shape --------------------------------------------------------------------


def load_class(target: str) -> type:
    """Returns the class named ``MODULE:CLASS`` or ``PATH.py:CLASS`` (a file's folder goes first
    on ``sys.path``, so that it imports its neighbours). Raises UsageError naming what failed."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise UsageError(f"--hermes-class takes MODULE:CLASS or PATH.py:CLASS, got {target!r}")
    try:
        module = _import(where)
    except UsageError:
        raise
    except Exception as error:  # the module's own import failed: say how, in one line
        raise UsageError(
            f"cannot import {where!r}: {type(error).__name__}: {error}".splitlines()[0]
        ) from None
    found = getattr(module, name, None)
    if not isinstance(found, type):
        raise UsageError(f"{where!r} has no class {name!r}")
    return found


def _import(where: str) -> ModuleType:
    if not where.endswith(".py"):
        return importlib.import_module(where)
    path = Path(where).absolute()
    if not path.is_file():
        raise UsageError(f"no such file: {where}")
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Shape:
    """How a Hermes-shaped class is driven: where its directory comes from (``directory`` is
    ``argument``, ``function`` or ``attribute``, ``place`` its name), its limit parameters, and
    the methods each contract request calls."""

    cls: type
    directory: str
    place: str
    """The argument, function or attribute; for ``files``, the memory file's argument."""
    limits: tuple[str, str]
    load: str
    entries: str
    """``memory_entries`` for the live lists, else the method taking a target."""
    snapshot: str
    batch: str | None
    between: str | None
    features: tuple[str, ...]
    user_file: str = ""
    """For ``files`` (a class that takes its two files), the user file's argument."""
    whole_snapshot: bool = False
    """Whether the snapshot method takes no target and answers both blocks (a mapping by
    target, or the pair memory, user)."""

    @property
    def module(self) -> ModuleType:
        return sys.modules[self.cls.__module__]

    def describe(self) -> str:
        """Returns one line saying what was found, for the terminal and the report."""
        where = {
            "files": f"constructor arguments {self.place!r} (MEMORY.md) and "
            f"{self.user_file!r} (USER.md)",
            "argument": f"constructor argument {self.place!r}",
            "function": f"module function {self.place}() (patched per session)",
            "attribute": f"attribute {self.place!r} (set per session)",
        }[self.directory]
        parts = [
            f"directory from {where}",
            f"limits {self.limits[0]}, {self.limits[1]}",
            f"load {self.load}()",
            f"snapshot {self.snapshot}()"
            if self.whole_snapshot
            else f"snapshot {self.snapshot}(target)",
            "entries "
            + (
                "memory_entries/user_entries"
                if self.entries == "memory_entries"
                else f"{self.entries}(target)"
            ),
        ]
        if self.batch:
            parts.append(f"batch {self.batch}()")
        if self.between:
            parts.append(f"{self.between}() before each mutation")
        return f"{self.cls.__qualname__}: " + "; ".join(parts)


def inspect_shape(cls: type, *, snapshot: str | None = None, between: str | None = None) -> Shape:
    """Returns how to drive ``cls``, found by inspection (raises NotHermesShaped naming the first
    missing part). ``snapshot`` and ``between`` name the snapshot method and the method to call
    between requests when the class's own names are not Hermes'."""
    name = cls.__qualname__
    for method, arguments in (("add", 2), ("replace", 3), ("remove", 2)):
        if not _takes(getattr(cls, method, None), arguments):
            raise NotHermesShaped(
                f"{name} is not Hermes-shaped: it has no {method}() taking target and "
                f"{arguments - 1} more argument(s)"
            )
    load = next((m for m in LOADERS if callable(getattr(cls, m, None))), None)
    if load is None:
        raise NotHermesShaped(f"{name} is not Hermes-shaped: it has no {' or '.join(LOADERS)}()")
    parameters = _parameters(cls)
    limits = _limit_parameters(parameters)
    if limits is None:
        raise NotHermesShaped(
            f"{name} is not Hermes-shaped: its constructor takes no memory and user character "
            f"limits (it takes {', '.join(parameters) or 'nothing'})"
        )
    directory, place, user_file = _directory(cls, parameters, limits)
    filled = {*limits, place, user_file} if directory in ("argument", "files") else set(limits)
    unfilled = [
        n for n, p in parameters.items()
        if n not in filled and p.default is inspect.Parameter.empty and p.kind != p.VAR_POSITIONAL
    ]  # fmt: skip
    if unfilled:
        raise NotHermesShaped(
            f"{name}: its constructor needs {unfilled[0]!r}, which memspec cannot fill (it "
            f"gives the limits and the {'files' if directory == 'files' else 'directory'} "
            "only); give it a default, or wrap the class in one that takes a directory"
        )
    shown = snapshot or next((m for m in SNAPSHOTS if callable(getattr(cls, m, None))), None)
    if shown is None or not callable(getattr(cls, shown, None)):
        wanted = f"{snapshot}()" if snapshot else f"one of {', '.join(SNAPSHOTS)}"
        raise NotHermesShaped(
            f"{name} has no snapshot method {wanted}; name it with --hermes-snapshot"
        )
    if between is not None and not callable(getattr(cls, between, None)):
        raise NotHermesShaped(f"{name} has no method {between}() (--hermes-between)")
    hook = between or next((m for m in BETWEEN if callable(getattr(cls, m, None))), None)
    entries = _entries(cls)
    batch = "apply_batch" if callable(getattr(cls, "apply_batch", None)) else None
    return Shape(
        cls, directory, place, limits, load, entries, shown, batch, hook,
        tuple(store_features(cls)), user_file, not _takes(getattr(cls, shown), 1),
    )  # fmt: skip


def _takes(method: Any, arguments: int) -> bool:
    if not callable(method):
        return False
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in list(signature.parameters.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values())
    return len(positional) >= arguments or varargs


def _parameters(cls: type[object]) -> dict[str, inspect.Parameter]:
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in list(signature.parameters.items())[1:] if p.kind != p.VAR_KEYWORD}


def _limit_parameters(parameters: Mapping[str, inspect.Parameter]) -> tuple[str, str] | None:
    def find(word: str) -> str | None:
        return next((n for n in parameters if word in n.lower() and "limit" in n.lower()), None)

    memory, user = find("mem"), find("user")
    return (memory, user) if memory and user and memory != user else None


def _file_parameters(
    parameters: Mapping[str, inspect.Parameter], limits: tuple[str, str]
) -> tuple[str, str] | None:
    """Returns the constructor's two file parameters, the memory file's and the user file's
    (``memory_path``, ``user_path``: agent-kai's shape), or ``None`` when it has not both."""

    def find(word: str) -> str | None:
        return next(
            (
                n
                for n in parameters
                if n not in limits and word in n.lower() and FILE_WORDS.search(n)
            ),
            None,
        )

    memory, user = find("mem"), find("user")
    return (memory, user) if memory and user and memory != user else None


def _directory(
    cls: type[object], parameters: Mapping[str, inspect.Parameter], limits: tuple[str, str]
) -> tuple[str, str, str]:
    """Returns where the class takes its directory from, as (how, where, the user file's
    argument): its two files as constructor arguments (``files``: the root's ``MEMORY.md`` and
    ``USER.md`` are given), a constructor argument whose name says it is a directory, a module
    function that names the memory directory (Hermes' ``get_memory_dir``, read from
    ``HERMES_HOME``), or an attribute the constructor sets to a path."""
    files = _file_parameters(parameters, limits)
    if files is not None:
        return "files", files[0], files[1]
    for name in parameters:
        if name not in limits and DIRECTORY_WORDS.search(name):
            return "argument", name, ""
    module = sys.modules.get(cls.__module__)
    source = source_of(cls)
    for name, value in vars(module or {}).items():
        if callable(value) and DIRECTORY_FUNCTION.match(name) and f"{name}(" in source:
            return "function", name, ""
    required = [
        n for n, p in parameters.items() if n not in limits and p.default is inspect.Parameter.empty
    ]
    if required:
        raise NotHermesShaped(
            f"{cls.__qualname__}: cannot tell which constructor argument is its directory "
            f"({', '.join(required)}): none is named like one (dir, path, root, home)"
        )
    for name in re.findall(r"self\.(\w+)\s*(?::[^=\n]+)?=", source_of(cls.__init__)):
        if DIRECTORY_WORDS.search(name) and not name.endswith("limit"):
            return "attribute", name, ""
    raise NotHermesShaped(
        f"{cls.__qualname__}: cannot find the directory it writes to: no constructor argument, "
        "memory-directory function or path attribute"
    )


def _entries(cls: type) -> str:
    method = next((m for m in ENTRY_METHODS if callable(getattr(cls, m, None))), None)
    init = "".join(source_of(vars(c).get("__init__")) for c in cls.__mro__)
    if "memory_entries" in init and "user_entries" in init:
        return "memory_entries"
    if method is None:
        raise NotHermesShaped(
            f"{cls.__qualname__} is not Hermes-shaped: no memory_entries/user_entries lists and "
            f"no {' or '.join(ENTRY_METHODS)}(target)"
        )
    return method


# -- refusal rules ------------------------------------------------------------------------------


def parse_rules(path: Path) -> tuple[tuple[str, str], ...]:
    """Returns the rules of a ``--hermes-rules`` file: one ``PATTERN -> CODE`` per line (a
    Python regular expression searched in the refusal's ``error`` text, and a contract code),
    blank lines and ``#`` comments skipped. Raises UsageError naming the line at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the rules file {path}: {error}") from None
    rules: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        matched = RULE.match(line.strip())
        if matched is None:
            raise UsageError(f"{where}: expected 'PATTERN -> CODE', got {line.strip()!r}")
        pattern, code = matched["pattern"], matched["code"]
        if code not in OUTCOME_CODES or code == "OK":
            raise UsageError(f"{where}: {code} is not a refusal code of the contract")
        try:
            re.compile(pattern)
        except re.error as error:
            raise UsageError(f"{where}: not a regular expression: {error}") from None
        rules.append((pattern, code))
    return tuple(rules)


def result_fields(result: Any) -> Mapping[str, Any] | None:
    """Returns a store's result as Hermes' result dict: the dict itself, or the fields of a typed
    result object (a dataclass, a named tuple, a pydantic model, an object with public
    attributes) without those that are ``None`` (a field the result does not carry); ``None``
    for what has no fields (a string, a number)."""
    if isinstance(result, Mapping):
        return result
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    elif callable(getattr(result, "_asdict", None)):
        fields = dict(result._asdict())
    elif callable(getattr(result, "model_dump", None)):
        fields = dict(result.model_dump())
    elif hasattr(result, "__dict__") and not isinstance(result, type):
        fields = {k: v for k, v in vars(result).items() if not k.startswith("_")}
    else:
        return None
    return {name: value for name, value in fields.items() if value is not None}


def classify(result: Any, rules: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Returns the contract Outcome of a Hermes result dict (or a typed result object, read by
    :func:`result_fields`), its refusal text read by ``rules`` and then Hermes' table
    (:func:`~memspec.conformance.hermes.adapter.classify`); raises AdapterGap naming an answer
    neither maps."""
    fields = result_fields(result)
    if fields is None:
        raise AdapterGap(f"the store answered a {type(result).__name__}, not a result dict")
    result = fields
    try:
        return dict(hermes_classify(result, (*rules, *ERROR_CODES)))
    except Unmapped:
        error = str(result.get("error", ""))
        raise AdapterGap(
            f"no rule maps the refusal {error[:300]!r} (the whole answer: "
            f"{json.dumps(result, default=str, ensure_ascii=False)[:400]}); add a line "
            "'PATTERN -> CODE' for it to --hermes-rules"
        ) from None


# -- the backend --------------------------------------------------------------------------------


@dataclass
class HermesClassStore:
    """One contract session: one instance of a Hermes-shaped class on the root."""

    shape: Shape
    rules: Sequence[tuple[str, str]]
    root: Path
    limits: tuple[int, int]
    store: Any = field(init=False)

    def __post_init__(self) -> None:
        shape = self.shape
        arguments: dict[str, Any] = dict(zip(shape.limits, self.limits, strict=True))
        if shape.directory == "argument":
            arguments[shape.place] = self.root
        if shape.directory == "files":
            arguments[shape.place] = self.root / "MEMORY.md"
            arguments[shape.user_file] = self.root / "USER.md"
        self._aim()
        self.store = shape.cls(**arguments)
        if shape.directory == "attribute":
            setattr(self.store, shape.place, self.root)

    @property
    def features(self) -> tuple[str, ...]:
        return self.shape.features

    def _aim(self) -> None:
        """Points the module's directory function at this session's root (one process may hold
        sessions on several roots; each call aims it again)."""
        if self.shape.directory == "function":
            root = self.root
            setattr(self.shape.module, self.shape.place, lambda *_, **__: root)

    def _mutate(self, method: str, *arguments: Any) -> dict[str, Any]:
        self._aim()
        if self.shape.between:
            getattr(self.store, self.shape.between)()
        result = getattr(self.store, method)(*arguments)
        try:
            return classify(result, self.rules)
        except AdapterGap as gap:
            print(f"{ADAPTER_GAP_MARK}: {gap}", file=sys.stderr, flush=True)
            os._exit(ADAPTER_GAP_STATUS)

    def load(self) -> None:
        self._aim()
        getattr(self.store, self.shape.load)()

    def add(self, target: Any, content: Any) -> dict[str, Any]:
        return self._mutate("add", target, content)

    def replace(self, target: Any, old_text: Any, new_content: Any) -> dict[str, Any]:
        return self._mutate("replace", target, old_text, new_content)

    def remove(self, target: Any, old_text: Any) -> dict[str, Any]:
        return self._mutate("remove", target, old_text)

    def batch(self, target: Any, operations: Any) -> dict[str, Any]:
        assert self.shape.batch is not None  # not claimed otherwise
        return self._mutate(self.shape.batch, target, operations)

    def entries(self, target: str) -> list[str]:
        if target not in TARGETS:
            raise ValueError(f"target must be 'memory' or 'user', got {target!r}")
        if self.shape.entries == "memory_entries":
            return list(getattr(self.store, f"{target}_entries"))
        return list(getattr(self.store, self.shape.entries)(target))

    def snapshot(self, target: str) -> str | None:
        if target not in TARGETS:
            raise ValueError(f"target must be 'memory' or 'user', got {target!r}")
        self._aim()
        if not self.shape.whole_snapshot:
            block = getattr(self.store, self.shape.snapshot)(target)
            return block if block else None
        return self._block_of(getattr(self.store, self.shape.snapshot)(), target)

    def _block_of(self, both: Any, target: str) -> str | None:
        """Returns ``target``'s block of what a target-less snapshot method answered: a mapping
        by target, the pair (memory, user), or an object with an attribute per target; a
        single text cannot be told apart by target (an adapter gap, naming the method)."""
        if isinstance(both, Mapping):
            block = both.get(target)
        elif isinstance(both, tuple | list) and len(both) == len(TARGETS):
            block = both[0 if target == TARGETS[0] else 1]
        elif hasattr(both, target) and not isinstance(both, str):
            block = getattr(both, target)
        else:
            gap = AdapterGap(
                f"{self.shape.snapshot}() answered a {type(both).__name__}, not a block per "
                "target (a mapping, a pair or attributes memory and user); name a snapshot "
                "method that takes the target with --hermes-snapshot"
            )
            print(f"{ADAPTER_GAP_MARK}: {gap}", file=sys.stderr, flush=True)
            os._exit(ADAPTER_GAP_STATUS)
        return block if block else None


def command(
    target: str, *, rules: str | None = None, between: str | None = None,
    snapshot: str | None = None, base: Path | None = None,
) -> tuple[str, Shape]:  # fmt: skip
    """Returns the backend command that serves the class ``target`` in this environment, and its
    shape, checked here first (raises UsageError, NotHermesShaped). Paths are made absolute
    against ``base``, since the command runs in the invocation directory."""
    base = base or Path.cwd()
    where, _, name = target.rpartition(":")
    if where.endswith(".py"):
        target = f"{(base / where).absolute()}:{name}"
    argv = [sys.executable, "-m", __name__, "--class", target]
    if rules is not None:
        rules_path = (base / rules).absolute()
        parse_rules(rules_path)
        argv += ["--rules", str(rules_path)]
    homes = home_variables(_sources(target.rpartition(":")[0]))
    with _scratch_home(homes):
        shape = inspect_shape(load_class(target), snapshot=snapshot, between=between)
    for variable in homes[len(ALWAYS_HOME) :]:
        argv += ["--home-variable", variable]
    argv += ["--between", between] if between else []
    argv += ["--snapshot", snapshot] if snapshot else []
    return shlex.join(argv), shape


MAX_SOURCES = 2000
"""At most this many files of a class's package are read for the home variables it reads."""


def _sources(where: str) -> list[str]:
    """Returns the Python files of the package that holds the class named by ``where`` (its
    module's file, for a top-level module or a ``PATH.py``), as text: where the variables it
    reads for a home are looked for. Nothing is imported to find them."""
    origin: Path | None = Path(where) if where.endswith(".py") else None
    if origin is None:
        try:
            found = importlib.util.find_spec(where.split(".")[0])
        except (ImportError, ValueError):
            found = None
        origin = Path(found.origin) if found is not None and found.origin else None
    if origin is None or not origin.is_file():
        return []
    package = origin.name == "__init__.py"
    files = sorted(origin.parent.rglob("*.py"))[:MAX_SOURCES] if package else [origin]
    texts = []
    for file in files:
        try:
            texts.append(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return texts


@contextlib.contextmanager
def _scratch_home(variables: Sequence[str] = ()) -> Iterator[str]:
    """Points ``HOME``, ``HERMES_HOME`` and every other variable of ``variables`` (the homes the
    class's package reads, :func:`~memspec.conformance.hermes.adapter.home_variables`) at a
    scratch directory while a store's module is imported or run, so that nothing reaches the
    user's own home or memory."""
    names = (*ALWAYS_HOME, *variables)
    before = {name: os.environ.get(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="memspec-hermes-class-home-") as home:
        isolate(home, variables)
        try:
            yield home
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def factory(shape: Shape, rules: Sequence[tuple[str, str]]) -> Callable[..., HermesClassStore]:
    """Returns the contract factory of ``shape``'s class."""

    def open_store(
        root: Path,
        *,
        memory_char_limit: int = DEFAULT_LIMITS["memory"],
        user_char_limit: int = DEFAULT_LIMITS["user"],
    ) -> HermesClassStore:
        return HermesClassStore(shape, rules, Path(root), (memory_char_limit, user_char_limit))

    return open_store


def _protocol_stream() -> IO[str]:
    """Returns the stream the answers go to (file descriptor 1, where the strace runs look for
    them), and has whatever else the store prints or logs through ``sys.stdout`` (a logger's
    default, a debugging print) go to stderr: one stray line among the answers would end the
    session."""
    protocol = sys.stdout
    sys.stdout = sys.stderr
    return protocol


def main(argv: Sequence[str] | None = None) -> int:
    """Serves one Hermes-shaped class over JSON Lines until stdin closes."""
    from memspec.conformance.transport.backend import InProcessBackend
    from memspec.conformance.transport.served import serve

    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__)
    parser.add_argument("--class", dest="target", required=True, metavar="TARGET")
    parser.add_argument("--rules", metavar="FILE")
    parser.add_argument("--between", metavar="METHOD")
    parser.add_argument("--snapshot", metavar="METHOD")
    parser.add_argument("--home-variable", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    protocol = _protocol_stream()
    with _scratch_home(args.home_variable):
        try:
            rules = parse_rules(Path(args.rules)) if args.rules else ()
            shape = inspect_shape(
                load_class(args.target), snapshot=args.snapshot, between=args.between
            )
        except UsageError as error:
            print(f"memspec hermes-class: error: {error}", file=sys.stderr)
            return 2
        backend = InProcessBackend.of_factory(factory(shape, rules), None)
        backend.spec = f"{shape.cls.__module__}:{shape.cls.__qualname__} (--hermes-class)"
        backend._version = getattr(shape.module, "__version__", "") or ""
        return serve(backend, sys.stdin, protocol)


if __name__ == "__main__":
    sys.exit(main())
