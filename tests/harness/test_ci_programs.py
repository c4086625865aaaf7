"""The programs ``ci`` explores depend on the SPEC.md version and the check's id, not on the
source of memspec's code (conformance/core/search.py, ``search_seed``).

Hypothesis derandomizes a test from a digest of its source (for a state machine, of the machine
class too), so before memspec seeded its searches, editing a docstring or adding a failure path
to the state machine reshuffled the programs ``ci`` runs against every backend, and with them a
backend's verdict. Here the real state-machine check, and a plain ``@given`` property check, run
against the reference store; then the same checks from a copy of their module that differs only
by a comment, a docstring or a branch no program takes. Every request the checks send and every
file they write, example by example, must be the same.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memspec.conformance.core import registry
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import Check, CheckContext, all_checks, run_within_budget
from memspec.conformance.transport.backend import InProcessBackend
from memspec.fuzz import machine, properties
from memspec.fuzz.roots import FuzzRoot

REFERENCE = "memspec.reference_impl:open_store"
Program = list[tuple[Any, ...]]

CHECKED = {
    "machine.memory_machine": (machine, "MemoryMachine", "_mutate"),
    "properties.delimiter_round_trip": (properties, "delimiter_round_trip", "round_trip"),
}
"""Each check, its module, and where the edit goes: the machine's method that judges a store
call, and the property's ``@given`` function (nested in the check)."""


@pytest.fixture
def programs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Program]]:
    """Records every example a fuzz check runs, as the program it sends: each request (session,
    op, fields) and each file written from outside, one list per fresh root."""
    recorded: list[Program] = []
    opened, sent, written = FuzzRoot.__init__, FuzzRoot.request, FuzzRoot.put

    def init(self: FuzzRoot, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        recorded.append([("root", tuple(sorted(self.limits.items())))])

    def request(self: FuzzRoot, name: str, op: str, **fields: Any) -> Any:
        recorded[-1].append((name, op, repr(sorted(fields.items()))))
        return sent(self, name, op, **fields)

    def put(self: FuzzRoot, target: str, data: bytes | None) -> None:
        recorded[-1].append(("put", target, data))
        written(self, target, data)

    monkeypatch.setattr(FuzzRoot, "__init__", init)
    monkeypatch.setattr(FuzzRoot, "request", request)
    monkeypatch.setattr(FuzzRoot, "put", put)
    yield recorded


def run(check: Check, tmp_path: Path) -> None:
    """Runs ``check`` at ``ci`` against the reference store, as certification does."""
    root = tmp_path / "root"
    root.mkdir(parents=True)
    context = CheckContext(InProcessBackend(REFERENCE, 10.0), root, tmp_path, PROFILES["ci"])
    run_within_budget(check, context)


def _body_start(source: str, owner: str, function: str) -> tuple[int, int]:
    """Returns the line (0-based) and indentation of the first statement of ``function`` inside
    the class or function ``owner`` at the top of ``source``."""
    tree = ast.parse(source)
    (top,) = [node for node in tree.body if getattr(node, "name", None) == owner]
    (inner,) = [
        node
        for node in ast.walk(top)
        if isinstance(node, ast.FunctionDef) and node.name == function
    ]
    first = inner.body[0]
    return first.lineno - 1, first.col_offset


def comment(source: str, owner: str, function: str) -> str:
    """Returns ``source`` with a comment line at the start of ``function``."""
    line, indent = _body_start(source, owner, function)
    lines = source.splitlines(keepends=True)
    lines.insert(line, " " * indent + "# a comment that changes nothing\n")
    return "".join(lines)


def docstring(source: str, owner: str, function: str) -> str:
    """Returns ``source`` with the docstring of ``owner`` reworded."""
    tree = ast.parse(source)
    (top,) = [node for node in tree.body if getattr(node, "name", None) == owner]
    text = ast.get_docstring(top, clean=False)
    assert text and source.count(text) == 1, f"{owner} has no docstring to reword"
    return source.replace(text, text + " Reworded.", 1)


def failure_branch(source: str, owner: str, function: str) -> str:
    """Returns ``source`` with a failure path at the start of ``function`` that no example
    takes (nothing it is called with is ``None``)."""
    line, indent = _body_start(source, owner, function)
    lines = source.splitlines(keepends=True)
    pad = " " * indent
    lines[line:line] = [
        f"{pad}if any(value is None for value in locals().values()):\n",
        f'{pad}    raise AssertionError("CONTRACT-4: called with nothing")\n',
    ]
    return "".join(lines)


REAL: dict[str, list[Program]] = {}
"""The programs of each real check, recorded once per process."""

EDITS: dict[str, Callable[[str, str, str], str]] = {
    "comment": comment,
    "docstring": docstring,
    "failure-branch": failure_branch,
}


def edited_check(
    check_id: str, edit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Check:
    """Returns check ``check_id`` from a copy of its module whose source differs by ``edit``,
    imported under a name of its own (its checks registered apart from the real ones)."""
    module, owner, function = CHECKED[check_id]
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    changed = EDITS[edit](source, owner, function)
    assert changed != source
    name = f"memspec_edited_{module.__name__.rsplit('.', 1)[1]}_{edit.replace('-', '_')}"
    path = tmp_path / f"{name}.py"
    path.write_text(changed, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    copy: ModuleType = importlib.util.module_from_spec(spec)
    # Hypothesis reads a test's source through its module, as it does the real one's
    monkeypatch.setitem(sys.modules, name, copy)
    monkeypatch.setattr(registry, "CHECKS", {})
    spec.loader.exec_module(copy)
    return registry.CHECKS[check_id]


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("check_id", sorted(CHECKED))
def test_an_edit_of_the_checks_source_leaves_the_programs_ci_explores(
    check_id: str,
    edit: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    programs: list[Program],
) -> None:
    if check_id not in REAL:
        run(all_checks()[check_id], tmp_path / "real")
        REAL[check_id] = list(programs)
        programs.clear()
    real = REAL[check_id]
    run(edited_check(check_id, edit, tmp_path, monkeypatch), tmp_path / "edited")
    # the recorder saw real programs: many examples, most of several steps
    assert len(real) >= PROFILES["ci"].examples // 2, len(real)
    assert sum(len(program) > 3 for program in real) >= len(real) // 2
    assert programs == real
