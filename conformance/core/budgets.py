"""Check budgets: the longest each check may run under each profile, and how a check is held
to it.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import functools
import math
import signal
import threading
import time
import unittest
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

import hypothesis
from hypothesis.errors import HypothesisException

from memspec.conformance.verdict.findings import Blame, Kind, Unverified

SEARCH_SHARE = 0.75
"""The share of its budget a search may use before it stops itself (the rest is for the final
replay, the judging and the clean-up, before the harness would stop the check)."""
HANG_GUARD = 10
"""Under a profile of fixed work (``smoke``, ``ci``) a check runs all its work whatever the
machine's speed, so that its verdict is the same on a busy machine as on a quiet one; the
harness stops it only at this many times its budget, as hung."""


@dataclass(frozen=True)
class Budget:
    """A Budget is the seconds one check may run under each profile."""

    smoke: float
    ci: float
    thorough: float

    def __post_init__(self) -> None:
        for column in fields(self):
            value = getattr(self, column.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"a budget is positive seconds, got {column.name}={value!r}")


QUICK = Budget(smoke=60, ci=120, thorough=600)
"""Fixed inputs on one or a few sessions: seconds for the reference, a minute for a backend
whose every session starts a slow process (a Hermes release in its own environment)."""
PROCESSES = Budget(smoke=120, ci=300, thorough=1800)
"""Worker processes, kills, injected faults and crash states, each starting processes."""
PROPERTIES = Budget(smoke=60, ci=180, thorough=300)
"""A Hypothesis search of a fixed number of examples, each on fresh sessions; it stops itself
at its budget (shrinking included). Under ``thorough`` a search that has run ``ci``'s fixed
sample passes when cut, so five minutes each keeps a thorough run of the slowest backend (Node
under strace: eight such searches) near an hour; hunt longer by repeating runs that share an
example database (docs/campaigns.md)."""
SCHEDULES = Budget(smoke=30, ci=60, thorough=1800)
"""The preemption-bounded exploration of interleavings: every schedule up to the bound, each
run a few seconds; cut short, the bound is not explored and the check is not verified, so its
thorough budget is the largest (the Node backend under strace takes about 12 minutes)."""
RANDOM_SCHEDULES = Budget(smoke=30, ci=60, thorough=600)
"""A Hypothesis search of drawn schedules; a racy store fails within seconds, which ends the
search under ``smoke`` and ``ci``; under ``thorough`` it then shrinks, so its budget bounds the
shrinking, and a cut search that ran ``ci``'s sample passes."""
PROVIDERS = Budget(smoke=120, ci=180, thorough=600)
"""A provider plugin's checks: a process of a Hermes environment per session, and hooks that may
run to the limit at which the driver counts them hung (twice their budget)."""

BUDGETS: dict[str, Budget] = {
    "atomic.acknowledged_is_visible": QUICK,
    "atomic.readers_never_see_a_partial_file": PROCESSES,
    "atomic.write_replaces_by_rename": QUICK,
    "concurrency.history_is_linearizable": PROCESSES,
    "contract.answers_have_contract_shapes": QUICK,
    "contract.claimed_features_are_known": QUICK,
    "contract.factory_stays_in_root": QUICK,
    "contract.mutation_without_load": QUICK,
    "crash.kill_at_each_write_step": PROCESSES,
    "crash.kill_at_random_moments": PROCESSES,
    "crashstates.acknowledged_mutations_survive_power_loss": PROCESSES,
    "crashstates.crash_states_are_old_or_new": PROCESSES,
    "crashstates.every_crash_state_recovers": PROCESSES,
    "drift.external_bytes_survive_rewrite": QUICK,
    "drift.own_bytes_are_what_a_store_last_wrote": QUICK,
    "drift.taken_backup_name_is_kept": QUICK,
    "drift_properties.external_edits_are_kept": PROPERTIES,
    "durability.write_protocol_is_durable": PROCESSES,
    "faults.failed_dir_sync_is_acknowledged": PROCESSES,
    "faults.failed_write_keeps_old_file": PROCESSES,
    "faults.read_errors_are_not_empty": PROCESSES,
    "fence.disguised_tags_are_removed": QUICK,
    "fence.forged_notes_are_removed": QUICK,
    "fence.frame_is_exact": QUICK,
    "fence.only_tags_and_notes_change": QUICK,
    "fence.sanitising_reaches_fixed_point": QUICK,
    "files.created_files_are_private": QUICK,
    "files.file_count_stays_bounded": QUICK,
    "files.nothing_outside_root": QUICK,
    "files.rewrite_keeps_the_mode": QUICK,
    "files.symlinked_data_file_is_kept": QUICK,
    "files.symlinked_lock_is_refused": QUICK,
    "interleavings.preemption_bounded_schedules": SCHEDULES,
    "interleavings.random_schedules": RANDOM_SCHEDULES,
    "locking.concurrent_adds_are_all_kept": PROCESSES,
    "locking.lock_spans_read_to_rename": PROCESSES,
    "machine.memory_machine": PROPERTIES,
    "patch.unsupported_without_the_feature": QUICK,
    "agent.unsupported_without_the_feature": QUICK,
    "agent.prompt_is_frozen_between_rebuild_points": QUICK,
    "agent.failing_providers_are_isolated": QUICK,
    "agent.one_external_provider": QUICK,
    "agent.random_turns_writes_and_rebuilds": PROPERTIES,
    "properties.delimiter_round_trip": PROPERTIES,
    "properties.fence_escape": PROPERTIES,
    "properties.limits_hold": PROPERTIES,
    "properties.snapshot_frozen_until_load": PROPERTIES,
    "protocol.answers_echo_ids_in_order": QUICK,
    "protocol.unknown_op_is_unsupported": QUICK,
    "provider.loads_as_hermes_does": PROVIDERS,
    "provider.name_is_stable": PROVIDERS,
    "provider.availability_is_cheap": PROVIDERS,
    "provider.tool_schemas_are_valid": PROVIDERS,
    "provider.tool_calls_answer_json": PROVIDERS,
    "provider.initialize_takes_hermes_arguments": PROVIDERS,
    "provider.writes_stay_at_home": PROVIDERS,
    "provider.secondary_contexts_write_nothing": PROVIDERS,
    "provider.prefetch_returns_promptly": PROVIDERS,
    "provider.recall_is_fenced_and_bounded": PROVIDERS,
    "provider.sync_is_non_blocking": PROVIDERS,
    "provider.synced_turns_are_recalled": PROVIDERS,
    "provider.memory_writes_are_mirrored": PROVIDERS,
    "provider.session_hooks_hold": PROVIDERS,
    "provider.other_hooks_hold": PROVIDERS,
    "provider.shutdown_is_prompt": PROVIDERS,
    "provider.no_thread_outlives_shutdown": PROVIDERS,
    "provider.profiles_never_cross": PROVIDERS,
    "read.unreadable_file_is_not_empty": QUICK,
    "recovery.lowered_limit_is_recoverable": QUICK,
    "recovery.unreadable_file_says_how_to_repair": QUICK,
    "scan.attack_corpus": QUICK,
    "scan.ordinary_text_corpus": QUICK,
    "scan.whole_content_is_scanned": QUICK,
    "tool.description_guides_the_model": QUICK,
    "tool.generated_calls_are_judged": PROPERTIES,
    "tool.malformed_calls_answered": PROPERTIES,
    "tool.results_never_show_threat_text": QUICK,
    "tool.schema_is_valid_and_agrees": QUICK,
    "tool.unsupported_without_the_feature": QUICK,
}
"""Every check's budget, by check id (``tests/unit/test_budgets.py`` requires one row per
registered check and no other)."""

EXAMPLE_BUDGET = Budget(smoke=30, ci=60, thorough=300)
"""The budget of one SPEC.md example: a scripted session of a few calls."""


def column(profile: str) -> Mapping[str, float]:
    """Returns every check's budget under ``profile`` (a field name of :class:`Budget`)."""
    return {check_id: getattr(budget, profile) for check_id, budget in BUDGETS.items()}


class BudgetSpent(Unverified, unittest.SkipTest):
    """A check was stopped at its budget before it finished: it is reported as skipped, its
    clauses "not verified" (never "not verifiable", which would hold no level back), with what
    it covered. Raise the budget of the check in
    ``conformance/core/budgets.py``, or choose a smaller profile, if the backend is slow but sound.
    ``how`` says what stopped it, where, and when (:meth:`Allowance.search_stop`,
    :meth:`Allowance.harness_stop`)."""

    def __init__(self, message: str, how: str = "") -> None:
        super().__init__(message)
        self.how = how


@dataclass(frozen=True)
class Allowance:
    """An Allowance is one running check's budget: ``seconds`` from ``started`` (monotonic)."""

    check_id: str
    profile: str
    seconds: float
    started: float
    fixed_work: bool = False
    sample_share: float = 1.0
    """Under a randomized profile, the share of a search's examples that the fixed sample of
    ``ci`` runs (``ci``'s examples over this profile's): a search cut at its budget after that
    many, none failing, has verified at least what ``ci`` verifies, and passes."""

    def sample(self, planned: int) -> int | None:
        """Returns how many of a search's ``planned`` examples make the fixed sample of ``ci``
        under this randomized profile, or ``None`` under fixed work (the search always runs
        them all)."""
        if self.fixed_work:
            return None
        return max(1, math.ceil(planned * self.sample_share))

    @property
    def limit(self) -> float:
        """The seconds after which the harness stops the check: its budget, or under fixed work
        :data:`HANG_GUARD` times it."""
        return self.seconds * HANG_GUARD if self.fixed_work else self.seconds

    def elapsed(self) -> float:
        """Returns the seconds since the check started."""
        return time.monotonic() - self.started

    def search_spent(self) -> bool:
        """Whether a search has used its share of the budget (:data:`SEARCH_SHARE`)."""
        return self.elapsed() >= self.seconds * SEARCH_SHARE

    def search_stop(self) -> str:
        """Says how a search that stops itself stopped: ``"stopped itself at 3/4 of its 60 s
        budget (45 s, profile ci)"``."""
        return (
            f"stopped itself at {_share(SEARCH_SHARE)} of its {self.seconds:g} s budget "
            f"({_seconds(self.elapsed())}, profile {self.profile})"
        )

    def harness_stop(self) -> str:
        """Says how the harness stopped the check at its :attr:`limit`: interrupted at the whole
        budget, or under fixed work stopped as hung at :data:`HANG_GUARD` times it
        (``"was stopped by the harness as hung at 10 times its 60 s budget (600 s, profile
        ci: fixed work, so the backend or the check hung)"``)."""
        if self.fixed_work:
            return (
                f"was stopped by the harness as hung at {HANG_GUARD} times its {self.seconds:g} s "
                f"budget ({_seconds(self.elapsed())}, profile {self.profile}: fixed work, so the "
                "backend or the check hung)"
            )
        return (
            f"was interrupted by the harness at its whole {self.seconds:g} s budget "
            f"({_seconds(self.elapsed())}, profile {self.profile})"
        )

    def cut(self, covered: str) -> BudgetSpent:
        """Returns the verdict of a search that stopped itself at :data:`SEARCH_SHARE` of its
        budget having covered ``covered`` (e.g. ``"7 examples, none failing"``)."""
        stop = self.search_stop()
        return BudgetSpent(
            f"{self.check_id}: the search {stop} after {covered}; what it did not reach is "
            "not verified",
            stop,
        )


def _share(share: float) -> str:
    """Returns a share of a budget as a fraction: ``"3/4"``."""
    fraction = Fraction(share).limit_denominator(100)
    return f"{fraction.numerator}/{fraction.denominator}"


def _seconds(seconds: float) -> str:
    """Returns a time taken as it is read: ``"46 s"``, ``"0.3 s"`` under ten seconds."""
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def _count(number: int, noun: str) -> str:
    """Returns ``"1 run"``, ``"3 runs"``."""
    return f"{number} {noun}{'s' * (number != 1)}"


def start_allowance(check_id: str, profile: Any, seconds: float | None = None) -> Allowance:
    """Returns the allowance of check ``check_id`` under ``profile`` (its budget there, or
    ``seconds``), starting now; a derandomized profile's work is fixed."""
    budget = profile.budget(check_id) if seconds is None else seconds
    share = getattr(profile, "sample_share", 1.0)
    return Allowance(check_id, profile.name, budget, time.monotonic(), profile.derandomize, share)


@dataclass
class SearchWatch:
    """A SearchWatch counts the examples a Hypothesis search runs and stops the search once it has
    used its share of the check's budget (``allowance``; ``None``: never). It keeps the last
    failure, the smallest found when shrinking is cut.

    It also holds the search to the clauses of the first failure it found (``blame``): from then
    on a failure that blames other clauses is not a failure of this search but a rejected
    example (``hypothesis.reject()``), so shrinking never slips to another clause, and the clause
    a check blames never depends on how far shrinking got — on a loaded machine as on a quiet
    one. A harness error is never set aside: it is memspec's own bug, reported whatever it
    displaces. For example, a first failure on ENTRY-3 whose smaller variants fail FORMAT-5
    instead is reported on ENTRY-3, shrunk as far as ENTRY-3 still fails."""

    allowance: Allowance | None
    examples: int = 0
    failures: int = 0
    last_failure: BaseException | None = field(default=None, repr=False)
    stopped: BudgetSpent | None = field(default=None, repr=False)
    blame: Blame | None = None
    set_aside: int = 0
    """Failures that blamed other clauses than the first, rejected."""
    shrinking: bool = True
    """Whether the search shrinks a failure it found (its phases hold Hypothesis' shrink), or
    only replays it."""

    def wrap(self, body: Callable[..., Any]) -> Callable[..., Any]:
        """Returns ``body`` (a test's inner function) watched: every call is counted, and a call
        once the search share is spent raises BudgetSpent instead of running — under fixed work
        only while shrinking a failure found (the examples always all run: the verdict does not
        depend on the machine's speed); a failure of other clauses than the first is rejected."""

        @functools.wraps(body)
        def watched(*args: Any, **kwargs: Any) -> Any:
            allowance = self.allowance
            if (
                allowance is not None
                and (self.failures or not allowance.fixed_work)
                and allowance.search_spent()
            ):
                self.stopped = self.stopped or allowance.cut(self.covered())
                raise self.stopped
            self.examples += 1
            try:
                return body(*args, **kwargs)
            except (BudgetSpent, HypothesisException):
                raise  # a cut, or Hypothesis' own flow (assume, reject, frozen data): no failure
            except Exception as error:
                if not self.keeps_blame(error):
                    self.set_aside += 1
                    hypothesis.reject()
                self.failures += 1
                self.last_failure = error
                raise

        return watched

    def keeps_blame(self, error: BaseException) -> bool:
        """Whether the failure ``error`` counts for this search: it is the first (whose blame is
        then kept), it blames what the first blamed, or it is a harness error."""
        blame = Blame.of(error)
        if self.blame is None:
            self.blame = blame
        return blame == self.blame or blame.kind == Kind.HARNESS_ERROR

    def covered(self) -> str:
        """Says what the search ran: ``"12 examples, none failing"``."""
        return f"{_count(self.examples, 'example')}, none failing"

    def verdict(self, cut: BudgetSpent) -> BaseException:
        """Returns what a search cut at its budget ends with: the last failure it found, noting
        when and how shrinking stopped, or, when it found none, ``cut`` itself (saying what the
        search had run when the harness interrupted it)."""
        failure = self.last_failure
        if failure is None:
            if cut is self.stopped:
                return cut
            return BudgetSpent(f"{cut}; the search had run {self.covered()}", cut.how)
        aside = f", {self.set_aside} failing on other clauses set aside" if self.set_aside else ""
        runs = f"{_count(self.examples, 'run')} ({self.failures} failing{aside})"
        if not self.shrinking:
            failure.add_note(
                f"memspec: the search found this failure, then {cut.how} before replaying it, "
                f"after {runs}; the failing example above is the one found"
            )
            return failure
        failure.add_note(
            f"memspec: the search found this failure, then {cut.how} while shrinking it, after "
            f"{runs}; the failing example above is the smallest found by then, not necessarily "
            "the smallest there is"
        )
        return failure


def budget_cut_in(error: BaseException) -> BudgetSpent | None:
    """Returns the BudgetSpent behind ``error`` (itself, or its cause or context: Hypothesis may
    replace the skip it re-raises with an error of its own about the data left undrawn)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, BudgetSpent):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def run_search(test: Callable[[], None], allowance: Allowance | None) -> None:
    """Runs the Hypothesis ``test`` (a ``@given`` test, with its settings) held to ``allowance``
    by a :class:`SearchWatch`: a failure is raised as it is, or as it stood when shrinking was
    cut; a search cut before any failure ends in :class:`BudgetSpent` — unless, under a
    randomized profile, it had already run the fixed sample ``ci`` runs (:meth:`Allowance.sample`):
    then it verified at least what ``ci`` does, on any machine, and passes."""
    chosen = getattr(test, "_hypothesis_internal_use_settings", None) or hypothesis.settings()
    watch = SearchWatch(allowance, shrinking=hypothesis.Phase.shrink in chosen.phases)
    hooks: Any = test.hypothesis  # type: ignore[attr-defined]  # set by @given
    hooks.inner_test = watch.wrap(hooks.inner_test)
    planned = chosen.max_examples
    try:
        test()
    except BaseException as error:
        cut = watch.stopped or budget_cut_in(error)
        if cut is None:
            raise
        if not _sampled(watch, allowance, planned):
            raise watch.verdict(cut) from None
        return
    # A search that was cut short of the fixed sample never reads as a pass.
    if watch.stopped is not None and not _sampled(watch, allowance, planned):
        raise watch.verdict(watch.stopped)


def _sampled(watch: SearchWatch, allowance: Allowance | None, planned: int) -> bool:
    """Whether a search cut with no failure ran at least the fixed sample of ``ci``."""
    sample = allowance.sample(planned) if allowance is not None and planned else None
    return sample is not None and watch.failures == 0 and watch.examples >= sample


def describe_figures(figures: Mapping[str, Any]) -> str:
    """Returns a check's figures as one phrase (``"schedules run 57, seconds 44.9"``)."""
    shown = [f"{name} {value}" for name, value in sorted(figures.items())]
    return ", ".join(shown) if shown else "nothing it reported"


@contextmanager
def enforced(allowance: Allowance, figures: Mapping[str, Any]) -> Iterator[None]:
    """Runs the body under ``allowance``: still running at its limit, it is interrupted with
    :class:`BudgetSpent`, naming the figures the check had reported by then. The timer is a
    ``SIGALRM``, so off the main thread the body runs held only by its searches' own allowance."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        how = allowance.harness_stop()
        raise BudgetSpent(
            f"{allowance.check_id}: the check {how}, before it finished; covered by then: "
            f"{describe_figures(figures)}; the rest is not verified",
            how,
        )

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, allowance.limit - allowance.elapsed()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
