"""What a Hermes distribution's memory tool needs, found from its own files (pure functions).

More in docs/architecture.md, "Module notes".
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
    """Returns the top-level names of the modules outside the distribution and the standard library
    that the modules ``start`` need: every import of a module for which ``deep(path)`` holds, the
    module-level imports of the others. ``read(path)`` returns a file's text."""
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


def runtime_lines(requires: Iterable[str]) -> tuple[str, ...]:
    """Returns the ``Requires-Dist`` lines a plain ``pip install`` of the distribution installs
    (those of no extra), as written: pip decides their other markers."""
    return tuple(line.strip() for line in requires if "extra ==" not in line.replace("'", '"'))


def requirement_pins(requires: Iterable[str], modules: Iterable[str]) -> Needs:
    """Returns the ``Requires-Dist`` lines (without extras) that provide ``modules``, as
    written, and the modules none of them provides."""
    lines = runtime_lines(requires)
    pins: list[str] = []
    missing: list[str] = []
    for module in sorted(set(modules)):
        matching = [line for line in lines if provides(requirement_name(line), module)]
        pins.extend(line for line in matching if line not in pins)
        if not matching:
            missing.append(module)
    return Needs(tuple(pins), tuple(missing))
