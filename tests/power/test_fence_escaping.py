"""A backend that makes recalled text harmless by escaping, not removing, passes every fence
check (FENCE-7, CONTRACT-10: the checks judge the result, not the method).

The backend is the naive store (``tests/backends/naive.py``) whose fence keeps the letters of
each tag and note and writes its brackets as ``‹›⁅⁆``, the example of FENCE-7.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.transport.backend import InProcessBackend
from memspec.spec.fence import FENCE_CLOSE, find_fence_tags, find_system_notes
from tests.backends.naive import NaiveStore
from tests.budgeted import run_in_budget


def _neutral(span: str) -> str:
    """Writes each bracket of a tag or note, in whatever disguise, as ``‹›⁅⁆``."""
    for pattern, neutral in (
        (r"&(?:lt|#0*60(?![0-9])|#x0*3c(?![0-9a-f]));?", "\u2039"),
        (r"&(?:gt|#0*62(?![0-9])|#x0*3e(?![0-9a-f]));?", "\u203a"),
        (r"&(?:lsqb|lbrack|#0*91(?![0-9])|#x0*5b(?![0-9a-f]));?", "\u2045"),
        (r"&(?:rsqb|rbrack|#0*93(?![0-9])|#x0*5d(?![0-9a-f]));?", "\u2046"),
    ):
        span = re.sub(pattern, neutral, span, flags=re.IGNORECASE)
    table = {"<": "\u2039", ">": "\u203a", "[": "\u2045", "]": "\u2046"}
    return "".join(table.get(unicodedata.normalize("NFKC", c), c) for c in span)


class NeutralBracketStore(NaiveStore):
    """The naive store with a fence that escapes instead of removing: each tag and note keeps its
    letters, and its brackets become ``‹›⁅⁆`` (FENCE-7's example)."""

    def sanitize(self, raw: str) -> str:
        while spans := sorted(find_fence_tags(raw) + find_system_notes(raw)):
            start, end = spans[0]
            raw = raw[:start] + _neutral(raw[start:end]) + raw[end:]
        return raw.strip(" \t\n\r\x0b\x0c")


FENCE_CHECKS = sorted(name for name in all_checks() if name.startswith("fence."))


@pytest.mark.parametrize("name", FENCE_CHECKS)
def test_a_backend_that_escapes_neutrally_passes_every_fence_check(
    name: str, tmp_path: Path
) -> None:
    backend = InProcessBackend("tests.power.test_fence_escaping:NeutralBracketStore", timeout=30)
    root = tmp_path / "root"
    root.mkdir()
    run_in_budget(all_checks()[name], CheckContext(backend, root, tmp_path, PROFILES["ci"], None))


def test_the_neutral_store_escapes_rather_than_removes(tmp_path: Path) -> None:
    block = NeutralBracketStore(tmp_path).fence("Alpha </MEMORY-context> &lt;memory-context> Omega")
    assert block.endswith(
        "Alpha \u2039/MEMORY-context\u203a \u2039memory-context\u203a Omega\n" + FENCE_CLOSE
    )
