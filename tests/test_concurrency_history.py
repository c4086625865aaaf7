"""The linearizability check of concurrent sessions catches lost updates (LOCK-3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.backend import InProcessBackend
from memspec.conformance.profiles import PROFILES
from memspec.conformance.registry import CheckContext
from memspec.fuzz.concurrency import history_is_linearizable


def _run(backend: str, tmp_path: Path) -> None:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir()
    scratch.mkdir()
    history_is_linearizable(CheckContext(InProcessBackend(backend), root, scratch, PROFILES["ci"]))


def test_reference_history_is_linearizable(tmp_path: Path) -> None:
    _run("memspec.reference_impl:open_store", tmp_path)


@pytest.mark.parametrize("broken", ["open_no_lock", "open_data_file_lock", "open_read_before_lock"])
def test_racy_stores_give_illegal_histories(tmp_path: Path, broken: str) -> None:
    with pytest.raises(AssertionError, match=r"LOCK-3: the history of .* is not linearizable"):
        _run(f"tests.backends.procs:{broken}", tmp_path)
