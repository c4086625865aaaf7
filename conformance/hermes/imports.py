"""What a Hermes distribution's memory tool needs, found from its own files (pure functions).

A distribution *ships Hermes' memory tool* when its files hold ``tools/memory_tool.py``
(:func:`memory_modules`); its name does not matter, so forks certify like the original. Its
memory modules are that file and, where they exist, ``tools/memory_tool_store.py`` (the store,
split out in the 0.22 line) and ``agent/memory_manager.py`` (the fence).

What to install beside it is read from the code, never from a list of names:

1. :func:`module_imports` parses a module with :mod:`ast` and returns the modules it imports
   unconditionally. An import inside a ``try`` (Hermes' optional imports, which fall back when
   they fail) or under ``if TYPE_CHECKING`` is optional and not followed.
2. :func:`import_closure` follows those imports through the distribution's own modules: every
   import of a memory module (at module level or inside a function: the tool runs them all),
   and the module-level imports of every other module of the distribution that this reaches
   (what runs when it is imported). Function-level imports count in the tool's modules
   (:data:`TOOL_MODULES`), whose functions the adapter calls; ``agent/memory_manager.py`` is
   only imported, for one function that imports nothing (its other functions reach the
   agent's configuration and plugins, which the store never uses). It returns the top-level
   names of the other modules imported, less the standard library.
3. :func:`requirement_pins` keeps the distribution's own ``Requires-Dist`` lines that provide
   those names (:func:`provides`), as written (their pins and markers kept, pip decides the
   markers), and leaves out every extra. A name no line provides is returned as well, so the
   caller can say so.

For hermes-agent 0.19.0 this finds ``pyyaml==6.0.3`` (``utils.py`` imports ``yaml``); for
async-hermes-agent 0.20.4.1 ``aiofiles`` too.

The ``agent`` ops drive more of the release: ``run_agent.AIAgent`` (:data:`AGENT_MODULES`).
:func:`agent_closure` follows them the same way, with every import of ``run_agent.py`` and of
the modules of the ``agent`` package it reaches, wherever they stand (the driver runs their
functions: the OpenAI client the agent builds is imported inside one), and the module-level
imports of the other modules reached. For hermes-agent 0.19.0 that is ``openai``, ``httpx``,
``requests``, ``yaml``, ``dotenv`` and ``fire`` (and ``concurrent_log_handler``, whose line
holds on Windows only): 6 of its 30 ``Requires-Dist`` lines without an extra.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MEMORY_TOOL = "tools/memory_tool.py"
TOOL_MODULES = (MEMORY_TOOL, "tools/memory_tool_store.py")
MEMORY_MODULES = (*TOOL_MODULES, "agent/memory_manager.py")
AGENT_MODULES = ("run_agent.py", "agent/memory_manager.py", "agent/memory_provider.py")
"""The modules the ``agent`` ops drive: the agent, its memory manager and provider interface.
Restated as ``hermes_agent.AGENT_MODULES``, which runs in the Hermes environment without memspec
(tests/unit/test_hermes_agent_discovery.py keeps the two equal)."""
AGENT_PACKAGE = "agent/"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_GUARDS = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def memory_modules(files: Iterable[str]) -> tuple[str, ...]:
    """Returns the memory modules among a distribution's ``files`` (paths as in its RECORD),
    ``tools/memory_tool.py`` first; empty when it ships no memory tool."""
    shipped = set(files)
    if MEMORY_TOOL not in shipped:
        return ()
    return tuple(path for path in MEMORY_MODULES if path in shipped)


def top_level_names(files: Iterable[str]) -> frozenset[str]:
    """Returns the top-level module and package names that ``files`` install."""
    names = set()
    for path in files:
        first, _, rest = path.partition("/")
        if not path.endswith(".py") or first.endswith((".dist-info", ".data")) or first == "..":
            continue
        names.add(first[: -len(".py")] if not rest else first)
    return frozenset(names)


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _absolute(module: str | None, level: int, package: str) -> str:
    """Returns the absolute name of ``from <level dots><module> import`` inside ``package``."""
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, *([module] if module else [])])


def module_imports(source: str, package: str = "", *, everywhere: bool = False) -> list[str]:
    """Returns the absolute names of the modules ``source`` imports unconditionally: at module
    level only, or inside functions and classes too with ``everywhere``. ``from m import a``
    yields ``m`` and ``m.a`` (``a`` may be a submodule); ``package`` resolves relative imports.
    Imports inside ``try`` or ``if TYPE_CHECKING`` are optional and left out."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _GUARDS) or (
                isinstance(child, ast.If) and _is_type_checking(child)
            ):
                continue
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child.module, child.level, package)
                found.append(base)
                found.extend(f"{base}.{alias.name}" for alias in child.names if alias.name != "*")
            elif everywhere or not isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            ):
                visit(child)

    visit(ast.parse(source))
    return [name for name in found if name]


def module_file(name: str, files: frozenset[str]) -> str | None:
    """Returns the file of module ``name`` among ``files`` (a module or a package), or None."""
    stem = name.replace(".", "/")
    for path in (f"{stem}.py", f"{stem}/__init__.py"):
        if path in files:
            return path
    return None


def _package_of(path: str) -> str:
    return ".".join(path[: -len(".py")].split("/")[:-1])


def import_closure(
    files: Iterable[str],
    read: Callable[[str], str],
    start: Iterable[str],
    deep: Callable[[str], bool] | None = None,
) -> frozenset[str]:
    """Returns the top-level names of the modules outside the distribution (and outside the
    standard library) that the modules ``start`` need, following the distribution's own
    modules as the module docstring says: every import of a module for which ``deep(path)``
    holds (by default: the memory tool's modules among ``start``), the module-level imports of
    the others. ``read(path)`` returns a file's text."""
    shipped = frozenset(files)
    own = top_level_names(shipped)
    start = tuple(start)
    if deep is None:
        tool_modules = set(start) & set(TOOL_MODULES)
        deep = tool_modules.__contains__
    queue, seen, external = list(start), set(start), set()
    while queue:
        path = queue.pop()
        try:
            tree_imports = module_imports(read(path), _package_of(path), everywhere=deep(path))
        except SyntaxError:
            continue
        for name in tree_imports:
            top = name.split(".")[0]
            if top not in own:
                if top not in sys.stdlib_module_names and top != "__future__":
                    external.add(top)
                continue
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):
                found = module_file(".".join(parts[:depth]), shipped)
                if found and found not in seen:
                    seen.add(found)
                    queue.append(found)
    return frozenset(external)


def agent_modules(files: Iterable[str]) -> tuple[str, ...]:
    """Returns :data:`AGENT_MODULES` when a distribution's ``files`` hold them all, else
    ``()`` (a release without an agent to drive)."""
    shipped = set(files)
    return AGENT_MODULES if all(path in shipped for path in AGENT_MODULES) else ()


def _driven(path: str) -> bool:
    """Whether the agent driver runs the functions of the module at ``path``."""
    return path == AGENT_MODULES[0] or path.startswith(AGENT_PACKAGE)


def agent_closure(files: Iterable[str], read: Callable[[str], str]) -> frozenset[str]:
    """Returns the top-level names outside the distribution and the standard library that the
    modules the ``agent`` ops drive import (see the module docstring); empty when the
    distribution has no agent."""
    files = tuple(files)
    start = agent_modules(files)
    return import_closure(files, read, start, _driven) if start else frozenset()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """Returns the distribution name a ``Requires-Dist`` line names, normalised (PEP 503)."""
    match = _NAME.match(requirement)
    return _normal(match.group(1)) if match else ""


def provides(distribution: str, module: str) -> bool:
    """Returns whether a distribution of this name is taken to provide top-level ``module``:
    the same name, the name less a ``py``/``python-`` prefix (``pyyaml`` for ``yaml``,
    ``python-dotenv`` for ``dotenv``), or its first dotted part (``ruamel.yaml``)."""
    name, wanted = _normal(distribution), _normal(module)
    candidates = {name, re.sub(r"^(python-|py-?)", "", name), name.split("-")[0]}
    return wanted in candidates


@dataclass(frozen=True)
class Needs:
    """What the memory modules need: ``pins`` to install, ``missing`` names no line provides."""

    pins: tuple[str, ...]
    missing: tuple[str, ...]


def requirement_pins(requires: Iterable[str], modules: Iterable[str]) -> Needs:
    """Returns the ``Requires-Dist`` lines (without extras) that provide ``modules``, as
    written, and the modules none of them provides."""
    lines = [line.strip() for line in requires if "extra ==" not in line.replace("'", '"')]
    pins: list[str] = []
    missing: list[str] = []
    for module in sorted(set(modules)):
        matching = [line for line in lines if provides(requirement_name(line), module)]
        pins.extend(line for line in matching if line not in pins)
        if not matching:
            missing.append(module)
    return Needs(tuple(pins), tuple(missing))
