"""The layers of memspec import one way: the table in docs/architecture.md is the law.

The test reads every module of the installed packages (the folders ``pyproject.toml`` maps),
collects every ``import memspec...`` and ``from memspec... import`` with :mod:`ast` (inside
functions too: a lazy import is an import), and fails on

- a cycle between the top-level packages (``spec``, ``reference_impl``, ``conformance``, ``fuzz``);
- a cycle between any two modules, ``TYPE_CHECKING`` and lazy imports included (an import that
  only the type checker follows still ties the two modules into one);
- an arrow from one layer to another that the layer table of docs/architecture.md does not allow;
- a module the table does not place, or places twice.

The table lists, per layer, its modules (``memspec.x.y`` is that module; ``memspec.x.*`` is the
package ``memspec.x`` and everything under it that no row names by itself) and the layers it may
import. Imports among the modules of one layer are always allowed.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"
TOP_LEVEL = ("spec", "reference_impl", "conformance", "fuzz", "doctor")


def source_modules() -> dict[str, Path]:
    """Returns every module of memspec's packages, by dotted name, from the package-dir map."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    folders = config["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in folders.items():
        base = REPO / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if any(part == "__pycache__" for part in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            modules.setdefault(name, path)
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Yields the memspec modules ``name`` imports, with the line, anywhere in the file."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "memspec":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            if module.split(".")[0] != "memspec":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                yield (sub if sub in known else module), node.lineno


def layer_table() -> list[tuple[str, list[str], set[str]]]:
    """Returns the rows of the layer table of docs/architecture.md: (layer, modules, may
    import), bottom first."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("| layer | modules | may import |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        layer, modules, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        names = re.findall(r"`([^`]+)`", modules)
        may = {item for item in re.findall(r"\*\*([^*]+)\*\*", allowed)}
        rows.append((layer.strip("*"), names, may))
    return rows


def place(module: str, table: list[tuple[str, list[str], set[str]]]) -> list[str]:
    """Returns the layers whose module list covers ``module``: those that name it by itself,
    else those that name a package holding it."""
    named, held = [], []
    for layer, names, _ in table:
        for entry in names:
            if entry.endswith(".*"):
                package = entry[:-2]
                if module == package or module.startswith(package + "."):
                    held.append(layer)
            elif module == entry:
                named.append(layer)
    return named or held


def import_graph() -> dict[str, set[tuple[str, int]]]:
    modules = source_modules()
    known = set(modules)
    return {name: set(imports_of(name, path, known)) for name, path in modules.items()}


def test_the_table_names_known_layers() -> None:
    table = layer_table()
    layers = [layer for layer, _, _ in table]
    assert len(layers) == len(set(layers)), layers
    for layer, _, allowed in table:
        assert allowed <= set(layers), f"layer {layer} may import unknown layers {allowed}"
        below = set(layers[: layers.index(layer)])
        # Each layer imports only layers below it in the table.
        assert allowed <= below, f"layer {layer} may import {allowed - below}, not below it"


def test_every_module_is_in_exactly_one_layer() -> None:
    table = layer_table()
    problems = []
    for module in sorted(source_modules()):
        layers = place(module, table)
        if len(layers) != 1:
            where = "no layer" if not layers else f"layers {layers}"
            problems.append(f"{module} is in {where}")
    assert not problems, "docs/architecture.md's layer table: " + "; ".join(problems)


def test_imports_follow_the_layer_table() -> None:
    table = layer_table()
    allowed = {layer: may for layer, _, may in table}
    modules = source_modules()
    problems = []
    for module, imported in sorted(import_graph().items()):
        (source,) = place(module, table) or ("?",)
        for target, line in sorted(imported):
            layers = place(target, table)
            if target not in modules or not layers:
                problems.append(f"{modules[module]}:{line} imports unknown module {target}")
                continue
            if layers[0] != source and layers[0] not in allowed.get(source, set()):
                problems.append(
                    f"{modules[module].relative_to(REPO)}:{line}: {module} ({source}) imports "
                    f"{target} ({layers[0]}), which the layer table does not allow"
                )
    assert not problems, "\n".join(problems)


def test_top_level_packages_have_no_cycle() -> None:
    arrows: dict[str, set[str]] = {name: set() for name in TOP_LEVEL}
    for module, imported in import_graph().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in TOP_LEVEL:
            continue
        for target, _ in imported:
            other = target.split(".")
            if len(other) > 1 and other[1] in TOP_LEVEL and other[1] != parts[1]:
                arrows[parts[1]].add(other[1])

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for step in arrows[start]:
            if step == goal or (step not in seen and reaches(step, goal, seen | {step})):
                return True
        return False

    cycles = sorted(name for name in TOP_LEVEL if reaches(name, name, set()))
    assert not cycles, f"top-level packages import each other: {cycles} ({arrows})"


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Returns the strongly connected components of ``graph`` that hold more than one module
    (Tarjan's algorithm, iterative): each is a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in graph:
                    continue
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_two_modules_import_each_other() -> None:
    """No import cycle between modules, ``TYPE_CHECKING`` and lazy ones included: each module
    can be read, typed and tested after the modules it imports."""
    graph = {
        module: {target for target, _ in imported if target != module}
        for module, imported in import_graph().items()
    }
    cycles = module_cycles(graph)
    assert not cycles, "modules that import each other: " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_a_cycle_is_seen() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert module_cycles(graph) == [["a", "b", "c"]]
    assert module_cycles({"a": {"b"}, "b": set()}) == []


def test_conformance_never_imports_fuzz() -> None:
    offenders = sorted(
        f"{module} imports {target} (line {line})"
        for module, imported in import_graph().items()
        if module.startswith("memspec.conformance")
        for target, line in imported
        if target == "memspec.fuzz" or target.startswith("memspec.fuzz.")
    )
    assert not offenders, offenders


def test_every_package_is_installed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {name for name, path in source_modules().items() if path.name == "__init__.py"}
    assert packages == listed, f"[tool.setuptools] packages misses {sorted(packages - listed)}"


def test_conformance_top_level_holds_only_its_faces() -> None:
    """Every module of conformance/ lives in a folder that names its job; the top level keeps
    only the package face and ``python -m memspec.conformance``."""
    top = {path.name for path in (REPO / "conformance").glob("*.py")}
    assert top == {"__init__.py", "__main__.py"}, sorted(top - {"__init__.py", "__main__.py"})


@pytest.mark.parametrize("module", ["memspec.conformance.core.registry"])
def test_a_forbidden_import_is_seen(module: str, tmp_path: Path) -> None:
    """The import collector sees lazy imports inside functions."""
    path = tmp_path / "registry.py"
    path.write_text("def f():\n    from memspec.fuzz import strategies\n", encoding="utf-8")
    found = set(imports_of(module, path, {"memspec.fuzz.strategies"}))
    assert found == {("memspec.fuzz.strategies", 2)}
