"""Unit tests of the single judges in ``memspec.spec``: what a root's file names are
(``file_kind``: CONTRACT-11, FILES-5, CRASH-2), with a case for each kind and the edge cases,
and a guard that no other installed module reads those names itself.
"""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

import pytest

from memspec.reference_impl import files
from memspec.spec import root_files
from memspec.spec.root_files import NAMED_KINDS, file_kind

REPO = Path(__file__).resolve().parents[1]
INSTALLED = ("spec", "reference_impl", "conformance", "fuzz", "memspec")

# --- file_kind ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("MEMORY.md", "data"),
        ("USER.md", "data"),
        ("MEMORY.md.lock", "lock"),
        ("USER.md.lock", "lock"),
        ("MEMORY.md.bak.0123456789abcdef", "backup"),
        ("USER.md.bak.x", "backup"),
        ("MEMORY.md.bak.latest", "backup"),
        (".MEMORY.md.tmp.1a2b", "temp"),
        (".USER.md.tmp.", "temp"),
        # An empty suffix is no backup name (CONTRACT-11: NAME.bak.<suffix>).
        ("MEMORY.md.bak.", "other"),
        ("MEMORY.md.bak", "other"),
        ("MEMORY.md.lock.old", "other"),
        ("memory.md", "other"),
        ("MEMORY.md.tmp.1a2b", "other"),
        (".MEMORY.md.tmp", "other"),
        (".mem_1234.tmp", "other"),
        ("notes.txt", "other"),
        ("sub/MEMORY.md", "other"),
        ("sub/MEMORY.md.bak.1", "other"),
        ("", "other"),
    ],
)
def test_file_kind_reads_every_name_of_a_root(name: str, kind: str) -> None:
    assert file_kind(name) == kind


@pytest.mark.parametrize(
    ("name", "memory", "user"),
    [
        ("MEMORY.md", "data", "other"),
        ("USER.md.lock", "other", "lock"),
        ("MEMORY.md.bak.1", "backup", "other"),
        (".USER.md.tmp.9", "other", "temp"),
    ],
)
def test_file_kind_of_one_data_file_ignores_the_other(name: str, memory: str, user: str) -> None:
    assert (file_kind(name, "MEMORY.md"), file_kind(name, "USER.md")) == (memory, user)
    assert file_kind(name, "NOTES.md") == "other"


def test_the_named_kinds_are_those_contract_11_fixes() -> None:
    assert {"data", "lock", "backup"} == NAMED_KINDS


def test_the_reference_names_its_files_as_the_spec_reads_them(tmp_path: Path) -> None:
    """The reference's writer builds the names; the spec's reader must agree with every one."""
    data_path = tmp_path / "USER.md"
    assert file_kind(data_path.name) == "data"
    assert file_kind(files.lock_path(data_path).name, "USER.md") == "lock"
    assert file_kind(files.backup_path(data_path, b"x").name, "USER.md") == "backup"
    assert file_kind(files.temp_prefix(data_path) + "0123abcd", "USER.md") == "temp"
    full = files.write_backup(data_path, b"y")
    assert file_kind(full.name, "USER.md") == "backup"


# --- no other module re-implements them -----------------------------------------------------

NAME_MARKS = (".bak", ".lock", ".tmp", r"\.bak", r"\.lock", r"\.tmp")
MATCHERS = {
    "startswith",
    "endswith",
    "glob",
    "rglob",
    "fnmatch",
    "fnmatchcase",
    "fullmatch",
    "match",
}


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def name_readers(source: str, label: str) -> list[str]:
    """Returns the lines of ``source`` that test a file name against a lock, backup or temp
    suffix: a matcher called with such a literal, or an ``in``/``==`` comparison with one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in MATCHERS:
                continue
            literals = [s for arg in node.args for s in _strings(arg)]
        elif isinstance(node, ast.Compare):
            literals = [s for part in (node.left, *node.comparators) for s in _strings(part)]
        else:
            continue
        if any(mark in literal for literal in literals for mark in NAME_MARKS):
            found.append(f"{label}:{node.lineno}")
    return found


def test_no_other_module_reads_lock_backup_or_temp_names() -> None:
    """``file_kind`` is the one reader of a root's names (the reference's writer builds them)."""
    readers = [
        place
        for folder in INSTALLED
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != REPO / "spec" / "root_files.py"
        for place in name_readers(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert readers == []


def test_the_guard_sees_a_name_reader() -> None:
    source = 'ok = name.endswith(".lock") or ".bak." in name\nre.fullmatch(r"M\\.bak\\..+", n)\n'
    assert sorted(name_readers(source, "sample")) == ["sample:1", "sample:1", "sample:2"]


def test_the_examples_of_file_kind_hold() -> None:
    assert doctest.testmod(root_files, raise_on_error=True).attempted > 0
