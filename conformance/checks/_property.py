"""Runs a Hypothesis test as a named check: sized and seeded by the check's profile, and held
to the check's budget (:func:`~memspec.conformance.core.budgets.run_search`)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis import seed as hypothesis_seed

from memspec.conformance.core.budgets import run_search
from memspec.conformance.core.registry import CheckContext


def run_sized(ctx: CheckContext, test: Callable[[], None], examples: int | None = None) -> None:
    """Runs ``test`` (already ``@given``) with ``examples`` examples (``profile.examples`` by
    default), no database and no deadline, stopping at the first failure; deterministic when the
    profile derandomizes, else seeded by the check's seed. Its search, shrinking included, stops
    at its share of the check's budget: a failure found by then is raised as it stood."""
    configured = settings(
        max_examples=ctx.profile.examples if examples is None else examples,
        derandomize=ctx.profile.derandomize,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )(test)
    if ctx.seed is not None and not ctx.profile.derandomize:
        configured = hypothesis_seed(ctx.seed)(configured)
    run_search(configured, ctx.allowance)
