"""How every searching check runs Hypothesis (conformance/core/search.py, core/budgets.py): the
seed a derandomized search runs from, and the clause a failure is blamed on, which comes from
the failing case as found, never from how far shrinking got.

That editing the state machine's source leaves the programs ``ci`` explores as they were is
shown on the real check in ``tests/harness/test_ci_programs.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, rule

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext
from memspec.conformance.core.search import PropertyRun, plan, search_seed
from memspec.conformance.verdict.findings import Blame, ClauseFailures, Kind, Violation
from memspec.spec.document import installed_version

BIG = 1000


class Backend:
    """A backend broken twice: it fails LOCK-3 on every number from :data:`BIG` up and, once it
    has, fails ``later`` (DRIFT-5) on every smaller positive number — as a store whose first
    failure leaves it worse off. The first failure a search finds is LOCK-3 whatever it draws
    first, and shrinking it meets smaller failures of the other clause."""

    def __init__(self, later: str = "DRIFT-5", big: int = BIG) -> None:
        self.later = later
        self.big = big
        self.seen: list[str] = []

    def judge(self, number: int) -> None:
        """Fails the clause ``number`` breaks, if any, saying so."""
        if number >= self.big:
            clause = "LOCK-3"
        elif number > 0 and self.seen:
            clause = self.later
        else:
            return
        self.seen.append(clause)
        if clause == "harness":
            raise KeyError("a bug in the check")
        raise Violation(clause, f"{number} is too big")


def _settings(database: Any = None) -> settings:
    return settings(
        max_examples=50, database=database, derandomize=database is None, deadline=None,
        report_multiple_bugs=False, print_blob=False,
    )  # fmt: skip


def _run(test: Callable[[], None], *, with_settings: bool = True, database: Any = None) -> None:
    run = PropertyRun("area.check", _settings(database), None, "Reproduce with: here", None)
    run.run(run.apply(test, with_settings=with_settings))


def test_a_failure_is_blamed_on_its_first_clause_not_a_smaller_one_found_while_shrinking() -> None:
    backend = Backend()

    @given(st.integers(0, 10**6))
    def property_(number: int) -> None:
        backend.judge(number)

    with pytest.raises(AssertionError) as raised:
        _run(property_)
    # the search first met LOCK-3, then, shrinking, smaller examples that fail DRIFT-5
    assert backend.seen[0] == "LOCK-3" and "DRIFT-5" in backend.seen, backend.seen
    # LOCK-3 is blamed, shrunk as far as LOCK-3 goes
    assert str(raised.value).startswith(f"LOCK-3: {BIG} is too big"), str(raised.value)


def test_a_state_machine_failure_keeps_its_first_clause_too() -> None:
    backend = Backend()

    class Counter(RuleBasedStateMachine):
        @rule(number=st.integers(0, 10**6))
        def step(self, number: int) -> None:
            backend.judge(number)

    test = get_state_machine_test(Counter, settings=_settings())
    with pytest.raises(AssertionError) as raised:
        _run(test, with_settings=False)
    assert backend.seen[0] == "LOCK-3" and "DRIFT-5" in backend.seen, backend.seen
    message = str(raised.value)
    assert message.startswith(f"LOCK-3: {BIG} is too big"), message
    assert f"state.step(number={BIG})" in message, message


def test_a_harness_error_found_while_shrinking_is_never_set_aside() -> None:
    backend = Backend(later="harness")

    @given(st.integers(0, 10**6))
    def property_(number: int) -> None:
        backend.judge(number)

    # memspec's own bug is reported, whatever backend failure it displaces
    with pytest.raises(KeyError, match="a bug in the check"):
        _run(property_)
    assert backend.seen[0] == "LOCK-3", backend.seen


def test_the_first_failure_found_is_a_saved_one_replayed_from_the_database(tmp_path: Path) -> None:
    # A shared example database replays its saved failures before generating: the first one it
    # replays that fails is the first found, and its clause is blamed.
    database = DirectoryBasedExampleDatabase(str(tmp_path / "db"))

    def run_against(backend: Backend) -> None:
        @given(st.integers(0, 10**6))
        def saved_under_one_key(number: int) -> None:
            backend.judge(number)

        _run(saved_under_one_key, database=database)

    only_drift = Backend(big=10**7)
    only_drift.seen = ["LOCK-3"]  # broken from the start: DRIFT-5 fails on any positive number
    with pytest.raises(AssertionError, match=r"^DRIFT-5: 1 is too big"):
        run_against(only_drift)  # saves DRIFT-5's smallest example, 1
    broken = Backend()
    broken.seen = ["LOCK-3"]
    with pytest.raises(AssertionError, match=r"^DRIFT-5: 1 is too big"):
        run_against(broken)
    # the replay came first (then the report's own replay); no example was generated
    assert set(broken.seen[1:]) == {"DRIFT-5"}, broken.seen
    fresh = Backend()
    # the saved example passes now (DRIFT-5 needs LOCK-3 first) and is dropped; generation
    # finds LOCK-3, and the smaller DRIFT-5 failures met while shrinking it are set aside
    with pytest.raises(AssertionError, match=f"^LOCK-3: {BIG} is too big"):
        run_against(fresh)
    assert fresh.seen[0] == "LOCK-3" and "DRIFT-5" in fresh.seen, fresh.seen
    # and none of them was saved in its place
    with pytest.raises(AssertionError, match=f"^LOCK-3: {BIG} is too big"):
        run_against(Backend())


def test_a_blame_is_the_kind_and_the_clauses_a_report_shows() -> None:
    assert Blame.of(Violation("LOCK-3", "lost")) == Blame(Kind.VIOLATION, frozenset({"LOCK-3"}))
    # a bare assertion is memspec's own invariant: a harness error, never a clause
    assert Blame.of(AssertionError("LOCK-3: lost")) == Blame(Kind.HARNESS_ERROR, frozenset({""}))
    both = ClauseFailures([Violation("LOCK-3", "a"), Violation("DRIFT-5", "b")], True)
    assert Blame.of(both).clauses == {"LOCK-3", "DRIFT-5"}
    assert [f.clause for f in both.failures] == ["LOCK-3", "DRIFT-5"]
    assert Blame.of(KeyError("x")).kind == Kind.HARNESS_ERROR


def _context(tmp_path: Path, profile: str, seed: int | None, check_id: str) -> CheckContext:
    return CheckContext(object(), tmp_path, tmp_path, PROFILES[profile], seed, check_id=check_id)


def test_a_derandomized_search_runs_from_the_spec_version_and_the_check_id(tmp_path: Path) -> None:
    seed = search_seed("machine.memory_machine")
    assert seed == search_seed("machine.memory_machine", installed_version().number)
    assert seed != search_seed("machine.memory_machine", "0.1")
    assert seed != search_seed("properties.limits_hold")
    for profile in ("smoke", "ci"):
        run = plan(_context(tmp_path, profile, None, "machine.memory_machine"))
        assert run.seed == seed and run.settings.database is None
        # the reproduction names no seed: the same command derives it again
        assert "--seed" not in run.reproduce


def test_a_given_seed_wins_over_the_derived_one(tmp_path: Path) -> None:
    run = plan(_context(tmp_path, "ci", 7, "machine.memory_machine"))
    assert run.seed == 7 and run.reproduce.endswith("-k machine.memory_machine --seed 7")


def test_the_seed_is_the_one_hypothesis_runs_from(tmp_path: Path) -> None:
    # Two tests of different source under one check id draw the same examples.
    drawn: dict[str, list[int]] = {"first": [], "second": []}
    run = plan(_context(tmp_path, "ci", None, "properties.limits_hold"))

    @given(st.integers())
    def first(number: int) -> None:
        drawn["first"].append(number)

    @given(st.integers())
    def second(number: int) -> None:
        # a different body: Hypothesis' own derandomization would draw other numbers
        drawn["second"].append(number + 0)

    run.run(run.apply(first))
    run.run(run.apply(second))
    assert drawn["first"] == drawn["second"] and len(set(drawn["first"])) > 10


def test_a_search_not_shrunk_ends_at_its_first_failure_under_fixed_work(tmp_path: Path) -> None:
    # Each example of such a search is costly (a schedule of three processes): the failure found
    # is replayed once and reported as found, blamed on its clause, with its reproduction.
    run = plan(_context(tmp_path, "ci", None, "interleavings.random_schedules"), shrink=False)
    runs: list[int] = []

    @given(st.integers(0, 10**6), st.data())
    def property_(number: int, data: Any) -> None:
        runs.append(number)
        data.draw(st.integers(0, 255))  # a drawn switch: the message leaves its note out
        if number >= BIG:
            raise Violation("LOCK-3", f"{number} is too big")

    with pytest.raises(AssertionError) as raised:
        run.run(run.apply(property_))
    first = next(at for at, number in enumerate(runs) if number >= BIG)
    # one run after the first failure: Hypothesis' replay of it, the same example
    assert runs[first + 1 :] == [runs[first]], runs
    message = str(raised.value)
    assert message.startswith(f"LOCK-3: {runs[first]} is too big"), message
    assert message.endswith(run.reproduce) and run.check_id in run.reproduce
    assert "Draw 1:" in message  # a run's draws are shown unless it says otherwise


def test_smoke_shows_the_failure_its_search_found_blamed_as_ci_blames_it(tmp_path: Path) -> None:
    # The same property under smoke and ci: ci shrinks the failure to BIG, smoke stops at the one
    # it found; both blame LOCK-3, so the verdict does not depend on shrinking.
    def failure(profile: str) -> tuple[list[int], str]:
        run = plan(_context(tmp_path, profile, None, "interleavings.random_schedules"))
        runs: list[int] = []

        @given(st.integers(0, 10**6))
        def property_(number: int) -> None:
            runs.append(number)
            if number >= BIG:
                raise Violation("LOCK-3", f"{number} is too big")

        with pytest.raises(AssertionError) as raised:
            run.run(run.apply(property_))
        return runs, str(raised.value)

    smoke_runs, smoke = failure("smoke")
    ci_runs, ci = failure("ci")
    found = next(number for number in smoke_runs if number >= BIG)
    assert smoke_runs[-1] == found and smoke.startswith(f"LOCK-3: {found} is too big"), smoke
    assert found != BIG and ci.startswith(f"LOCK-3: {BIG} is too big"), ci
    assert len(ci_runs) > len(smoke_runs)


def test_only_hunting_shrinks_a_search_not_shrunk_and_smoke_shrinks_none(tmp_path: Path) -> None:
    def phases(profile: str, shrink: bool) -> tuple[Phase, ...]:
        context = _context(tmp_path, profile, None, "interleavings.random_schedules")
        return tuple(plan(context, shrink=shrink).settings.phases)

    assert Phase.shrink not in phases("ci", False)
    assert Phase.shrink in phases("ci", True)
    assert Phase.shrink in phases("thorough", False)
    # smoke, a quick look, shrinks no search: the failure found is shown as found
    assert Phase.shrink not in phases("smoke", True) + phases("smoke", False)
    # explain's notes cost runs, under every profile
    assert not any(Phase.explain in phases(name, True) for name in PROFILES)


def test_a_run_that_hides_its_draws_shows_the_rest_of_the_failing_example(tmp_path: Path) -> None:
    run = plan(_context(tmp_path, "ci", None, "interleavings.random_schedules"), shrink=False)
    run = replace(run, draws_shown=False)

    @given(st.integers(BIG, 2 * BIG), st.data())
    def property_(number: int, data: Any) -> None:
        data.draw(st.integers(0, 255))
        data.draw(st.integers(0, 255), label="switch")
        raise Violation("LOCK-3", f"{number} is too big")

    with pytest.raises(AssertionError) as raised:
        run.run(run.apply(property_))
    message = str(raised.value)
    assert "Draw " not in message and "property_(" in message, message
    assert message.endswith(run.reproduce)
