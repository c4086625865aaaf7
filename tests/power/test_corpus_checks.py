"""The corpus checks of SCAN-2 can fail, each on its own clause only.

Two naive stores broken on purpose (``tests/backends/naive_broken.py``): one keeps the first
SCAN-4, every invisible character a threat wherever it occurs, and refuses ordinary text; one
matches the patterns without removing invisible content first, and lets split keywords through.
Each fails one corpus check, on the clause of its defect, and passes the other; the reference
and the naive store pass both (``test_checks_power.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.power.test_checks_power import run_check

BROKEN = "tests.backends.naive_broken"


@pytest.mark.parametrize(
    ("variant", "failing", "clause", "passing"),
    [
        ("RefusesEveryInvisible", "scan.ordinary_text_corpus", "SCAN-4", "scan.attack_corpus"),
        ("MatchesThroughInvisibles", "scan.attack_corpus", "SCAN-3", "scan.ordinary_text_corpus"),
    ],
)
def test_a_broken_scan_fails_only_its_own_corpus_check(
    variant: str, failing: str, clause: str, passing: str, tmp_path: Path
) -> None:
    # The first SCAN-4 refuses ordinary text; a scan that keeps invisible content in the text
    # it matches lets split keywords through. Each fails one check, on its clause, and passes
    # the other.
    (tmp_path / "failing").mkdir()
    (tmp_path / "passing").mkdir()
    with pytest.raises(AssertionError) as failure:
        run_check(failing, f"{BROKEN}:{variant}", tmp_path / "failing")
    assert str(failure.value).startswith(clause + ":"), str(failure.value)
    run_check(passing, f"{BROKEN}:{variant}", tmp_path / "passing")
