"""A later line's base release: the one whose memory modules share the most lines with its own
(conformance/hermes/lineage.py), which the sweep compares the line's verdicts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.hermes.lineage import (
    Base,
    memory_sources,
    nearest_release,
    shared_lines,
)

OLD = {"tools/memory_tool.py": ["import os", "def add():", "    return 1", "def remove():"]}
NEW = {"tools/memory_tool.py": ["import os", "def add():", "    return 2", "def batch():"]}


def test_memory_sources_reads_the_modules_of_an_environment(tmp_path: Path) -> None:
    packages = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (packages / "tools").mkdir(parents=True)
    (packages / "agent").mkdir()
    (packages / "tools" / "memory_tool.py").write_text("a\nb\n", encoding="utf-8")
    (packages / "agent" / "memory_manager.py").write_bytes(b"caf\xe9\n")
    (packages / "tools" / "other.py").write_text("not a memory module\n", encoding="utf-8")
    python = tmp_path / "venv" / "bin" / "python"
    assert memory_sources(python) == {
        "tools/memory_tool.py": ["a", "b"],
        "agent/memory_manager.py": ["caf\ufffd"],
    }
    assert memory_sources(tmp_path / "elsewhere" / "bin" / "python") == {}


def test_shared_lines_counts_matching_lines_module_by_module() -> None:
    assert shared_lines(OLD, OLD) == 1.0
    assert shared_lines(OLD, NEW) == pytest.approx(2 * 2 / 8)
    # a module only one side has matches nothing, and counts against both
    assert shared_lines(OLD, {**OLD, "agent/memory_manager.py": ["x"] * 4}) == pytest.approx(8 / 12)
    assert shared_lines({}, {}) == 0.0


def test_the_nearest_release_is_the_base_and_the_later_wins_a_tie() -> None:
    fork = {"tools/memory_tool.py": ["import os", "def add():", "    return 1", "def renamed():"]}
    releases = [("0.15.0", OLD), ("0.16.0", OLD), ("0.19.0", NEW)]
    assert nearest_release(fork, releases) == Base("0.16.0", 0.75)
    assert nearest_release(NEW, releases) == Base("0.19.0", 1.0)
    assert nearest_release(fork, []) is None
