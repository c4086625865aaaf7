"""How every check that searches with Hypothesis runs it — the properties of ``memspec.fuzz``
and the fence, tool and agent checks alike: settings from the profile, the seed, the example
database, and the one-command reproduction every failure ends with.

A derandomized search (``smoke``, ``ci``) runs from a seed derived from the SPEC.md version and
the check's id (:func:`search_seed`), not from the digest of the test's source that Hypothesis
derandomizes with: editing memspec's code, a comment or a failure path of the state machine,
leaves the programs ``ci`` explores, and so a backend's ``ci`` verdict, as they were.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import hashlib
import random
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from memspec.conformance.core.budgets import Allowance, run_search
from memspec.conformance.core.registry import CheckContext
from memspec.conformance.verdict.findings import HarnessError, Violation
from memspec.spec.document import installed_version

HEALTH_CHECKS_OFF = [
    HealthCheck.too_slow,
    HealthCheck.filter_too_much,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
]
"""A backend's speed is not the property under test, and adversarial data is large on purpose."""
DRAW_NOTE = re.compile(r"Draw [0-9]+( \(.*\))?: ")
"""How Hypothesis notes a value drawn from ``st.data()`` when it prints a failing example."""


class NamespacedDatabase(ExampleDatabase):
    """A NamespacedDatabase stores every key of a shared database under a fixed prefix."""

    def __init__(self, inner: ExampleDatabase, namespace: str) -> None:
        super().__init__()
        self.inner = inner
        self.prefix = namespace.encode("utf-8") + b":"

    def __repr__(self) -> str:
        return f"NamespacedDatabase({self.inner!r}, {self.prefix!r})"

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)


def open_database(location: str) -> ExampleDatabase:
    """Returns the example database at ``location``: ``redis://host:port/db`` (Hypothesis's
    ``RedisExampleDatabase``, needs the ``redis`` package: ``pip install memspec[campaign]``)
    or a directory path."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        from hypothesis.extra.redis import RedisExampleDatabase
        from redis import Redis

        return RedisExampleDatabase(Redis.from_url(location))
    return DirectoryBasedExampleDatabase(location)


def backend_flag(backend: Any) -> str:
    """Returns the certify option that names ``backend`` (``--backend`` or ``--backend-cmd``)."""
    command = getattr(backend, "command", None)
    if command is not None:
        return f"--backend-cmd {shlex.quote(command)}"
    return f"--backend {shlex.quote(getattr(backend, 'spec', getattr(backend, 'label', '?')))}"


def search_seed(check_id: str, spec_version: str | None = None) -> int:
    """Returns the seed a derandomized search of check ``check_id`` runs from: a digest of the
    SPEC.md version (``spec_version``, by default the installed one) and the check's id, so the
    same on every machine, whatever memspec's code looks like. What changes it — and so the
    programs ``ci`` explores — is a new version of the spec or a renamed check; what else
    changes them is the check's generators and rules themselves, and Hypothesis' version."""
    version = installed_version().number if spec_version is None else spec_version
    digest = hashlib.sha256(f"memspec search\0{version}\0{check_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class PropertyRun:
    """A PropertyRun is how one check runs Hypothesis: its settings, the seed it runs from (the
    one given, one drawn, or under a derandomized profile :func:`search_seed`; ``None``: the
    example database's run, randomized), its reproduction and budget (``allowance``)."""

    check_id: str
    settings: settings
    seed: int | None
    reproduce: str
    allowance: Allowance | None = None
    draws_shown: bool = True
    """Whether a failure shows the values the test drew from ``st.data()`` (Hypothesis' "Draw
    N: ..." notes); a check whose draws are a schedule, which its own message shows as a
    timeline, leaves them out."""

    def apply(self, test: Callable[[], None], *, with_settings: bool = True) -> Callable[[], None]:
        """Returns ``test`` (a ``@given`` test) with this run's seed, and its settings unless the
        test already has them (a state machine test gets them when it is built)."""
        test = self.settings(test) if with_settings else test
        return hypothesis_seed(self.seed)(test) if self.seed is not None else test

    def run(self, test: Callable[[], None]) -> None:
        """Runs the Hypothesis ``test`` within the budget (:func:`run_search`); a failure ends
        with the program and the reproduction."""
        with failure_report(self):
            run_search(test, self.allowance)


def plan(ctx: CheckContext, *, shrink: bool = True, **extra: Any) -> PropertyRun:
    """Returns the PropertyRun of the check running under ``ctx`` (its id, profile, seed and
    database); ``extra`` are further Hypothesis settings such as ``stateful_step_count`` or a
    check's own ``max_examples``.

    ``shrink=False`` is for a search whose every example is costly, where a shrink step costs a
    whole example (three processes and a schedule of a hundred steps or more): under a profile
    of fixed work (``smoke``, ``ci``) the first failure found ends the search, Hypothesis'
    shrink phase left out, so Hypothesis replays the failure once and it is reported as found.
    Its blame is the same either way (:class:`~memspec.conformance.core.budgets.SearchWatch`
    keeps the first failure's clauses while shrinking): shrinking only makes the example shown
    smaller. A hunting profile (``thorough``) still shrinks it, within its budget."""
    check_id = ctx.check_id
    if not check_id:
        raise HarnessError("a property check was run without its id: call it as Check.run(ctx)")
    profile = ctx.profile
    derandomize = profile.derandomize and ctx.seed is None
    seed = ctx.seed
    database = ctx.database if not derandomize and seed is None else None
    opened = None
    if database:
        opened = NamespacedDatabase(
            open_database(database), f"memspec:{check_id}:{getattr(ctx.backend, 'label', '')}"
        )
    elif not derandomize and seed is None:
        seed = random.SystemRandom().randrange(2**32)
    # A given or drawn seed is named in the reproduction; a derandomized profile runs from the
    # spec's and the check's seed, which the same command derives again.
    runs_from = search_seed(check_id) if derandomize else seed
    # The loaded Hypothesis profile's phases, but not explain: its notes cost runs; nor shrink
    # for a profile that does not shrink, or a search not shrunk under fixed work: the failure
    # it finds ends it.
    unshrunk = not profile.shrinks or (not shrink and profile.derandomize)
    left_out = {Phase.explain} | ({Phase.shrink} if unshrunk else set())
    chosen = settings(
        **{
            "max_examples": profile.examples,
            "derandomize": derandomize,
            "database": opened,
            "deadline": None,
            "suppress_health_check": HEALTH_CHECKS_OFF,
            "report_multiple_bugs": False,
            "print_blob": False,
            "phases": tuple(phase for phase in settings().phases if phase not in left_out),
            **extra,
        }
    )
    command = f"memspec certify {backend_flag(ctx.backend)} -k {shlex.quote(check_id)}"
    if profile.name != "ci":
        command += f" --profile {profile.name}"
    if seed is not None:
        command += f" --seed {seed}"
    if opened is not None:
        command += f" --hypothesis-db {shlex.quote(str(database))}"
    return PropertyRun(check_id, chosen, runs_from, f"Reproduce with: {command}", ctx.allowance)


@contextmanager
def failure_report(run: PropertyRun) -> Iterator[None]:
    """Turns a failure inside Hypothesis into one readable report: the clause-first message,
    the shrunk program Hypothesis printed as notes, and the one-command reproduction."""
    try:
        yield
    except Violation as error:
        notes = getattr(error, "__notes__", ())
        shown = [note for note in notes if run.draws_shown or not DRAW_NOTE.match(note)]
        parts = [*shown, run.reproduce]
        raise error.extended("\n".join(part for part in parts if part)) from None
    except Exception as error:
        error.add_note(run.reproduce)
        raise
