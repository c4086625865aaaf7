"""Runs a Hypothesis test as a named check: sized and seeded by the check's profile."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis import seed as hypothesis_seed

from memspec.conformance.registry import CheckContext


def run_sized(ctx: CheckContext, test: Callable[[], None]) -> None:
    """Runs ``test`` (already ``@given``) with ``profile.examples`` examples, no database and no
    deadline; deterministic when the profile derandomizes, else seeded by the check's seed."""
    configured = settings(
        max_examples=ctx.profile.examples,
        derandomize=ctx.profile.derandomize,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(test)
    if ctx.seed is not None and not ctx.profile.derandomize:
        configured = hypothesis_seed(ctx.seed)(configured)
    configured()
