"""Check budgets: every check has one per profile, declared once, and a check over it is stopped
and reported as cut, never as passed (conformance/core/budgets.py, conformance/core/search.py)."""

from __future__ import annotations

import json
import re
import signal
import time
import unittest
from dataclasses import fields
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memspec.conformance.core.budgets import (
    BUDGETS,
    HANG_GUARD,
    Allowance,
    Budget,
    BudgetSpent,
    SearchWatch,
    budget_cut_in,
    enforced,
    start_allowance,
)
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.search import PropertyRun
from memspec.conformance.verdict.findings import (
    HarnessError,
    Kind,
    Unverified,
    Violation,
    verdict_of,
)

CHECK_IDS = Path(__file__).resolve().parents[1] / "data" / "check_ids.json"


def _allowance(seconds: float, started: float | None = None) -> Allowance:
    return Allowance("area.check", "ci", seconds, time.monotonic() if started is None else started)


def test_every_check_has_a_budget_and_no_budget_is_stale() -> None:
    assert sorted(BUDGETS) == sorted(json.loads(CHECK_IDS.read_text(encoding="utf-8")))


def test_every_profile_has_a_column_of_budgets() -> None:
    assert [column.name for column in fields(Budget)] == list(PROFILES)
    for name, profile in PROFILES.items():
        for check_id, budget in BUDGETS.items():
            assert profile.budget(check_id) == getattr(budget, name)
        assert profile.example_budget > 0


def test_a_check_without_a_budget_is_a_harness_error() -> None:
    with pytest.raises(HarnessError, match="no budget"):
        PROFILES["ci"].budget("area.unknown_check")


@pytest.mark.parametrize("value", [0, -1, True, "10"])
def test_a_budget_is_positive_seconds(value: object) -> None:
    with pytest.raises(ValueError, match="positive seconds"):
        Budget(smoke=1, ci=value, thorough=1)  # type: ignore[arg-type]


def test_budget_spent_is_a_skip_that_hypothesis_reraises() -> None:
    spent = _allowance(1, started=time.monotonic() - 10).cut("3 examples, none failing")
    # a cut check judged nothing: its clauses read not verified, never not verifiable
    assert isinstance(spent, Unverified) and isinstance(spent, unittest.SkipTest)
    assert verdict_of(spent).kind == Kind.UNVERIFIED
    # what happened: the search stopped itself at three quarters of its budget, after its runs
    assert str(spent).startswith(
        "area.check: the search stopped itself at 3/4 of its 1 s budget (10 s, profile ci) "
        "after 3 examples, none failing; "
    )
    assert spent.how == "stopped itself at 3/4 of its 1 s budget (10 s, profile ci)"


def test_the_harness_stops_a_check_at_its_budget_and_names_what_it_covered() -> None:
    figures = {"schedules run": 7}
    started = time.monotonic()
    stopped = pytest.raises(
        BudgetSpent,
        match=r"^area\.check: the check was interrupted by the harness at its whole 0\.2 s "
        r"budget \(0\.[0-9] s, profile ci\), before it finished; covered by then: "
        r"schedules run 7;",
    )
    with stopped, enforced(_allowance(0.2), figures):
        time.sleep(5)
    assert time.monotonic() - started < 2
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_check_within_its_budget_runs_to_its_end() -> None:
    with enforced(_allowance(5), {}):
        time.sleep(0.01)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _run(allowance: Allowance | None, test: object) -> None:
    PropertyRun("area.check", _settings(), None, "Reproduce with: here", allowance).run(test)  # type: ignore[arg-type]


def _settings() -> object:
    from hypothesis import settings

    return settings(max_examples=20, database=None, derandomize=True, deadline=None)


def test_a_search_with_no_time_left_is_cut_not_passed() -> None:
    @given(st.integers())
    def never_fails(number: int) -> None:
        pass

    with pytest.raises(BudgetSpent, match=r"stopped itself .* after 0 examples, none failing"):
        _run(_allowance(1, started=time.monotonic() - 10), never_fails)


def test_a_search_the_harness_interrupts_says_so_and_what_it_ran() -> None:
    # Each example outlasts the budget: the search never gets to stop itself, the harness
    # interrupts the first example at the whole budget.
    @given(st.integers())
    def slow(number: int) -> None:
        time.sleep(30)

    allowance = _allowance(2)
    with pytest.raises(BudgetSpent) as raised, enforced(allowance, {}):
        _run(allowance, slow)
    message = str(raised.value)
    assert re.fullmatch(
        r"area\.check: the check was interrupted by the harness at its whole 2 s budget "
        r"\(2\.[0-9] s, profile ci\), before it finished; covered by then: nothing it "
        r"reported; the rest is not verified; the search had run 1 example, none failing",
        message,
    ), message


class SpentAfterAFailure(Allowance):
    """An allowance whose search share runs out as soon as the search has failed once."""

    failed: ClassVar[list[bool]] = []

    def search_spent(self) -> bool:
        return bool(self.failed)


def test_a_search_cut_while_shrinking_reports_its_failure_and_says_so() -> None:
    allowance = SpentAfterAFailure("area.check", "ci", 60, time.monotonic())
    allowance.failed.clear()

    @given(st.lists(st.integers(), min_size=3))
    def fails(numbers: list[int]) -> None:
        allowance.failed.append(True)
        raise Violation("LOCK-3", "lost")

    with pytest.raises(AssertionError) as raised:
        _run(allowance, fails)
    message = str(raised.value)
    assert message.startswith("LOCK-3: lost")
    # the seconds spent are the machine's (0.0 s when quiet): only their form is fixed
    assert re.search(
        r"memspec: the search found this failure, then stopped itself at 3/4 of its 60 s budget "
        r"\(\d+\.\d s, profile ci\) while shrinking it, after 1 run \(1 failing\)",
        message,
    ), message
    assert "Reproduce with: here" in message


def test_shrinking_the_harness_interrupts_says_so() -> None:
    # The first example fails at once; the next outlasts the budget, so the harness, not the
    # search, stops the shrinking.
    runs: list[int] = []

    @given(st.lists(st.integers(), min_size=3))
    def fails_then_hangs(numbers: list[int]) -> None:
        runs.append(1)
        if len(runs) > 1:
            time.sleep(30)
        raise Violation("LOCK-3", "lost")

    allowance = _allowance(2)
    with pytest.raises(AssertionError) as raised, enforced(allowance, {}):
        _run(allowance, fails_then_hangs)
    message = str(raised.value)
    assert message.startswith("LOCK-3: lost"), message
    assert re.search(
        r"the search found this failure, then was interrupted by the harness at its whole 2 s "
        rf"budget \(2\.[0-9] s, profile ci\) while shrinking it, after {len(runs)} runs "
        r"\(1 failing\)",
        message,
    ), message


def test_a_search_within_its_budget_is_untouched() -> None:
    @given(st.integers())
    def never_fails(number: int) -> None:
        pass

    _run(_allowance(60), never_fails)
    _run(None, never_fails)


def test_a_cut_is_found_behind_the_error_hypothesis_raised_instead() -> None:
    cut = BudgetSpent("cut")
    try:
        try:
            raise cut
        except BudgetSpent:
            raise RuntimeError("inconsistent data generation") from None
    except RuntimeError as error:
        assert budget_cut_in(error) is cut
    assert budget_cut_in(ValueError("x")) is None


def test_a_watch_counts_runs_and_keeps_the_last_failure() -> None:
    watch = SearchWatch(None)

    def body(fail: bool) -> None:
        assert not fail, "LIMIT-1: over"

    watched = watch.wrap(body)
    watched(False)
    with pytest.raises(AssertionError):
        watched(True)
    assert (watch.examples, watch.failures) == (2, 1)
    assert str(watch.last_failure).startswith("LIMIT-1: over")


def _fixed(seconds: float, started: float) -> Allowance:
    return Allowance("area.check", "ci", seconds, started, fixed_work=True)


def test_under_fixed_work_a_slow_search_still_runs_every_example() -> None:
    # A machine so busy that the search share is spent before the first example: the verdict
    # is the quiet machine's (every example runs, and passes), not "cut".
    ran = []

    @given(st.integers())
    def never_fails(number: int) -> None:
        ran.append(number)

    _run(_fixed(1, started=time.monotonic() - 10), never_fails)
    assert len(ran) >= 20


def test_under_fixed_work_shrinking_is_still_held_to_the_budget() -> None:
    @given(st.lists(st.integers(), min_size=3))
    def fails(numbers: list[int]) -> None:
        raise Violation("LOCK-3", "lost")

    with pytest.raises(AssertionError) as raised:
        _run(_fixed(1, started=time.monotonic() - 10), fails)
    message = str(raised.value)
    # the search stopped itself at 3/4 of its budget: not the harness, not at ten times it
    assert (
        "then stopped itself at 3/4 of its 1 s budget (10 s, profile ci) while shrinking it, "
        "after 1 run (1 failing)"
    ) in message
    assert "times its" not in message and "hung" not in message


def test_a_search_that_does_not_shrink_says_its_failure_is_the_one_found() -> None:
    # Found once the budget's share was spent, the failure is reported as found, unreplayed.
    from hypothesis import Phase, settings

    @given(st.lists(st.integers(), min_size=3))
    def fails(numbers: list[int]) -> None:
        raise Violation("LOCK-3", "lost")

    quick = settings(max_examples=20, database=None, derandomize=True, deadline=None)
    unshrunk = settings(quick, phases=[Phase.generate])
    allowance = _fixed(1, started=time.monotonic() - 10)
    run = PropertyRun("area.check", unshrunk, None, "Reproduce with: here", allowance)
    with pytest.raises(AssertionError) as raised:
        run.run(run.apply(fails))
    message = str(raised.value)
    assert message.startswith("LOCK-3: lost")
    assert (
        "then stopped itself at 3/4 of its 1 s budget (10 s, profile ci) before replaying it, "
        "after 1 run (1 failing); the failing example above is the one found"
    ) in message
    assert "shrinking" not in message and "smallest" not in message


def test_under_fixed_work_the_harness_stops_only_a_hung_check() -> None:
    allowance = _fixed(0.02, started=time.monotonic())
    assert allowance.limit == pytest.approx(0.02 * HANG_GUARD)
    with enforced(allowance, {}):
        time.sleep(0.05)  # past the budget, far below the guard: runs to its end
    stopped = pytest.raises(
        BudgetSpent,
        match=r"^area\.check: the check was stopped by the harness as hung at 10 times its "
        r"0\.02 s budget \(0\.[0-9] s, profile ci: fixed work, so the backend or the check "
        r"hung\), before it finished; covered by then: schedules run 3;",
    )
    with stopped, enforced(_fixed(0.02, started=time.monotonic()), {"schedules run": 3}):
        time.sleep(5)


def test_only_the_profiles_that_hunt_by_time_cut_a_search_early() -> None:
    assert [name for name, p in PROFILES.items() if not p.derandomize] == ["thorough"]
    allowance = start_allowance("atomic.acknowledged_is_visible", PROFILES["ci"])
    assert allowance.fixed_work and allowance.limit == allowance.seconds * HANG_GUARD


class SpentAfter(Allowance):
    """An allowance of a randomized profile whose search share runs out after ``after`` runs."""

    runs: ClassVar[list[int]] = []
    after: ClassVar[int] = 0

    def search_spent(self) -> bool:
        return len(self.runs) >= self.after


def _hunting(after: int, share: float) -> SpentAfter:
    SpentAfter.runs.clear()
    SpentAfter.after = after
    return SpentAfter("area.check", "thorough", 60, time.monotonic(), sample_share=share)


def test_a_hunt_cut_after_the_fixed_sample_passes_and_one_cut_before_it_does_not() -> None:
    # thorough runs 20 times ci's examples; cut after ci's share (here 5 of 20) with no
    # failure, it verified at least what ci does, whatever the machine's load.
    def hunt(allowance: Allowance) -> None:
        @given(st.integers())
        def never_fails(number: int) -> None:
            SpentAfter.runs.append(number)

        run = PropertyRun("area.check", _settings(), None, "Reproduce with: here", allowance)  # type: ignore[arg-type]
        run.run(run.apply(never_fails))

    hunt(_hunting(after=5, share=0.25))
    with pytest.raises(BudgetSpent, match="after 4 examples, none failing"):
        hunt(_hunting(after=4, share=0.25))
    assert _hunting(0, 0.05).sample(200) == 10 and _fixed(1, 0).sample(200) is None
    assert PROFILES["thorough"].sample_share == PROFILES["ci"].examples / 1000
