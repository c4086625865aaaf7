"""Certification profiles: how hard the harness pushes (``--profile`` / ``--memspec-profile``).

``smoke`` is a quick look, ``ci`` the deterministic default, ``thorough`` bug hunting. A profile
is resolved once into a frozen value that every check reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from memspec.conformance.core.budgets import EXAMPLE_BUDGET, column
from memspec.conformance.verdict.findings import HarnessError
from memspec.spec.errors import UsageError


@dataclass(frozen=True)
class Profile:
    """A Profile sizes every randomised or repeated check: every size and budget a check uses is a
    field here, so that no check looks a profile up by its name.

    ``examples`` is Hypothesis' ``max_examples``; ``processes`` x ``operations`` sizes the
    concurrent-writer checks; ``trials`` counts repetitions of fault and crash checks.
    ``derandomize`` makes the work fixed, its budget only a hang guard; without it (``thorough``) a
    search hunts until its budget. ``preemption_bound``, ``schedule_budget`` and
    ``adds_per_session`` bound the preemption-bounded schedules, ``schedule_sessions`` x
    ``schedule_operations`` the random ones. ``crash_states``, ``crash_states_per_point`` and
    ``command_states_per_point`` bound the crash states; ``every_crash_state`` judges each on its
    own instead of once per shape. ``shrinks`` says whether a search shrinks the failure it
    found; without it (``smoke``, a quick look) the first failure ends the search and is shown as
    found, blamed on the same clauses (:class:`~memspec.conformance.core.budgets.SearchWatch`).
    ``budgets`` are the seconds each check may run, by check id
    (:data:`memspec.conformance.core.budgets.BUDGETS`); ``example_budget`` those of one example.
    """

    name: str
    examples: int
    processes: int
    operations: int
    trials: int
    derandomize: bool
    preemption_bound: int
    schedule_budget: int
    adds_per_session: tuple[int, int]
    schedule_sessions: int
    schedule_operations: int
    crash_states: int
    crash_states_per_point: int
    command_states_per_point: int
    every_crash_state: bool
    shrinks: bool
    budgets: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)
    example_budget: float = EXAMPLE_BUDGET.ci

    @property
    def fixed_sample(self) -> Profile:
        """The profile whose fixed work a randomized one runs first, as its floor: ``ci``."""
        return PROFILES[DEFAULT_PROFILE]

    @property
    def sample_share(self) -> float:
        """The share of this profile's examples that ``ci``, the fixed sample, runs: a search of
        a randomized profile cut at its budget after that share passes (``core/budgets.py``)."""
        return min(1.0, PROFILES[DEFAULT_PROFILE].examples / self.examples)

    def budget(self, check_id: str) -> float:
        """Returns the seconds check ``check_id`` may run (raises HarnessError for a check
        that has no budget: every check must have one)."""
        if check_id not in self.budgets:
            raise HarnessError(
                f"check {check_id} has no budget under profile {self.name}: add its row to "
                "BUDGETS in conformance/core/budgets.py"
            )
        return self.budgets[check_id]


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke", examples=10, processes=2, operations=10, trials=2, derandomize=True,
        preemption_bound=1, schedule_budget=30, adds_per_session=(1, 1),
        schedule_sessions=2, schedule_operations=3,
        crash_states=150, crash_states_per_point=16, command_states_per_point=8,
        every_crash_state=False, shrinks=False, budgets=column("smoke"),
        example_budget=EXAMPLE_BUDGET.smoke,
    ),
    "ci": Profile(
        "ci", examples=50, processes=4, operations=25, trials=5, derandomize=True,
        preemption_bound=1, schedule_budget=200, adds_per_session=(1, 1),
        schedule_sessions=3, schedule_operations=4,
        crash_states=400, crash_states_per_point=32, command_states_per_point=8,
        every_crash_state=False, shrinks=True, budgets=column("ci"),
        example_budget=EXAMPLE_BUDGET.ci,
    ),
    "thorough": Profile(
        "thorough", examples=1000, processes=8, operations=200, trials=50, derandomize=False,
        preemption_bound=2, schedule_budget=5000, adds_per_session=(2, 1),
        schedule_sessions=3, schedule_operations=8,
        crash_states=4000, crash_states_per_point=128, command_states_per_point=128,
        every_crash_state=True, shrinks=True, budgets=column("thorough"),
        example_budget=EXAMPLE_BUDGET.thorough,
    ),
}  # fmt: skip
DEFAULT_PROFILE = "ci"


def resolve_profile(name: str | None) -> Profile:
    """Returns the profile called ``name`` (``ci`` when ``None``; raises UsageError)."""
    key = name or DEFAULT_PROFILE
    if key not in PROFILES:
        raise UsageError(f"unknown profile {key!r}; choose one of {', '.join(PROFILES)}")
    return PROFILES[key]
