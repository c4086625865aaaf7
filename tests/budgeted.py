"""Running a check in a test as certification runs it: within its budget for the profile.

A power test proves that a check fails a broken backend *within its budget*, as it would in
``memspec certify``; a test that expects a pass must not read as a pass, nor as a skip, when the
check was cut. So a cut is a test failure here, with the harness's own words.
"""

from __future__ import annotations

import pytest

from memspec.conformance.core.budgets import BudgetSpent
from memspec.conformance.core.registry import Check, CheckContext, run_within_budget


def run_in_budget(check: Check, context: CheckContext) -> None:
    """Runs ``check`` under its budget for ``context.profile``; a cut fails the test."""
    try:
        run_within_budget(check, context)
    except BudgetSpent as cut:
        pytest.fail(f"{check.id} was cut at its budget: {cut}", pytrace=False)
