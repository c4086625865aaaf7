"""Findings: why a check stopped short of passing, as data (kind, blamed clause, reason), and
what the verdicts add up to: the conformance level a backend reached.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from memspec.conformance.core.errors import MemspecError, bug_message
from memspec.spec.clauses import CLAUSE_ID, Clause

if TYPE_CHECKING:
    from memspec.conformance.core.records import CheckRecord


class Kind(StrEnum):
    """How a check that did not pass ended (the module docstring); ``NONE`` for one that
    passed, ``STALE`` for a listed expected failure that passed. The values are those of
    ``report.json``."""

    NONE = ""
    VIOLATION = "violation"
    DEFECT = "defect"
    HARNESS_ERROR = "harness-error"
    UNSUPPORTED = "unsupported"
    UNVERIFIED = "unverified"
    STALE = "stale"


DEFECT_CLAUSE = "CONTRACT-6"
ADAPTER_GAP_MARK = "ADAPTER GAP"
"""How the reason of a check stopped by an adapter gap starts (``transport/jsonlines.py``)."""
REASON_WIDTH = 240


class Finding(MemspecError):
    """The root of every way a check can stop short of passing (see the module docstring)."""

    kind = Kind.HARNESS_ERROR


class HarnessError(Finding):
    """A bug in memspec, not in the backend: a check's, a strategy's or a worker's own mistake,
    or a broken install, wherever it is raised. Its message opens with "BUG IN MEMSPEC: "; it is
    counted apart from the backend's failures and never blames a clause."""

    def __init__(self, message: str) -> None:
        super().__init__(bug_message(message))


class Unverified(Finding):
    """The check could not establish what it needs to judge its clauses — a mutation it builds
    on was refused, a scanner does not know its test string — so it judged nothing: its clauses
    read "not verified" with the reason, never failed. What went wrong first is another
    clause's business, which its own checks judge."""

    kind = Kind.UNVERIFIED


class Violation(Finding, AssertionError):
    """The backend broke ``clause``; the message says how."""

    kind = Kind.VIOLATION

    def __init__(self, clause: str, message: str) -> None:
        super().__init__(f"{clause}: {message}")
        self.clause = clause


class Mismatch(Finding, AssertionError):
    """The backend's answers differ from what an example expects; ``summary`` is the one line
    that says where (the step and the difference), the message the whole account. ``blamed``
    are the clauses that own the difference (empty: every clause the example cites) and
    ``completed`` whether the example ran to its end."""

    kind = Kind.VIOLATION

    def __init__(
        self,
        message: str,
        summary: str,
        blamed: Sequence[str] = (),
        completed: bool = False,
        reasons: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.summary = summary
        self.blamed = tuple(blamed)
        self.completed = completed
        self.reasons = dict(reasons or {})
        """Each blamed clause's own one-line reason, when the example found several
        differences (the header's SNAP-6, a refusal's LIMIT-4); a clause without one has
        ``summary``."""


class Refusal(Finding):
    """The backend answered ``E_UNSUPPORTED`` to an action of ``core`` (CONTRACT-2), as the 0.22
    Hermes line refuses ``replace``. That breaks ``clauses`` (CONTRACT-2 and REPLACE-1 or REMOVE-1)
    and stops the check, whose other clauses read "not verified"; :meth:`keep_going` lets it
    through."""

    kind = Kind.VIOLATION

    def __init__(self, action: str, clauses: Sequence[str], text: str) -> None:
        super().__init__(f"{clauses[0]}: {text}")
        self.action = action
        self.clauses = tuple(clauses)
        self.text = text


@dataclass(frozen=True)
class ClauseFailure:
    """A ClauseFailure is one clause a check found broken ("" for every clause it cites) and
    one line saying how."""

    clause: str
    reason: str


class ClauseFailures(Finding, AssertionError):
    """A check found one or more clauses broken, and went on after each where the next
    assertion did not depend on it; ``completed`` says whether it ran to its end (every clause
    it cites and did not find broken was then verified by it)."""

    kind = Kind.VIOLATION

    def __init__(self, errors: Sequence[BaseException], completed: bool) -> None:
        firsts: dict[str, tuple[str, BaseException]] = {}
        counts: dict[str, int] = {}
        for error in errors:
            verdict = verdict_of(error)
            for failure in verdict.failures or (ClauseFailure(verdict.blamed, verdict.reason),):
                firsts.setdefault(failure.clause, (failure.reason, error))
                counts[failure.clause] = counts.get(failure.clause, 0) + 1
        self.failures = tuple(
            ClauseFailure(clause, reason + _more(counts[clause] - 1))
            for clause, (reason, _) in firsts.items()
        )
        self.completed = completed
        shown: dict[int, str] = {}  # an error that broke two clauses is shown once
        for clause, (_, error) in firsts.items():
            shown.setdefault(id(error), str(error) + _more(counts[clause] - 1))
        ended = "the check ran to its end" if completed else "the check stopped at the last one"
        text = "\n\n".join(shown.values())
        super().__init__(f"{text}\n\n({len(firsts)} clause(s) found broken; {ended})")


def _more(count: int) -> str:
    return f" (and {count} more failure(s) of this clause)" if count else ""


@dataclass(frozen=True)
class Verdict:
    """A Verdict is how a check that did not pass ended: its kind, the clause it blames ("" for
    every clause the check cites), one line saying why, and the features it lacked; for a check
    that went on after a failure, every clause it found broken (``failures``) and whether it ran
    to its end (``completed``)."""

    kind: Kind
    blamed: str = ""
    reason: str = ""
    missing_features: tuple[str, ...] = ()
    failures: tuple[ClauseFailure, ...] = ()
    completed: bool = False

    def to_json(self) -> dict[str, Any]:
        """Returns the verdict's fields as JSON-ready built-in types (``report.json``'s)."""
        return {**asdict(self), "kind": str(self.kind)}

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> Verdict:
        """Returns the verdict whose fields a mapping holds (a check of ``report.json``, where a
        report of an older memspec may lack some)."""
        return cls(
            Kind(fields.get("kind") or ""),
            fields.get("blamed") or "",
            fields.get("reason") or "",
            tuple(fields.get("missing_features") or ()),
            tuple(ClauseFailure(**failure) for failure in fields.get("failures") or ()),
            bool(fields.get("completed")),
        )


def blamed_clauses(check: CheckRecord) -> tuple[str, ...]:
    """Returns the clauses a check's record blames: those of its ``failures`` when it went on
    after one, else its ``blamed`` clause — CONTRACT-6 for a backend defect, and every clause
    the check cites when the failure names none."""
    named = [f.clause for f in check.failures] or [check.blamed]
    if check.kind == Kind.DEFECT and named == [""]:
        named = [DEFECT_CLAUSE]
    if "" in named:
        return check.clauses
    return tuple(dict.fromkeys(named))


def fails_clause(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record is a failure of the backend on ``clause``: it failed (or failed
    as listed), blaming that clause or none in particular; never a harness error, nor a listed
    failure that passed (``stale``). The one rule the reports, the matrix and the sweep share."""
    return (
        check.status in ("failed", "xfailed")
        and check.kind not in (Kind.HARNESS_ERROR, Kind.STALE)
        and clause in blamed_clauses(check)
    )


def bears_on(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record counts in ``clause``'s verdict: the check cites the clause, or
    its failure blames it (an example whose mutation was acknowledged but not written fails
    ATOMIC-5, which it does not cite)."""
    return clause in check.clauses or fails_clause(check, clause)


def verifies_clause(check: CheckRecord, clause: str) -> bool:
    """Whether a check's record shows ``clause`` held: the check passed (or is a listed failure
    that passed), or it ran to its end, finding other clauses broken but not this one."""
    if check.status == "passed" or check.kind == Kind.STALE:
        return True
    return (
        check.completed
        and check.status in ("failed", "xfailed")
        and not fails_clause(check, clause)
    )


def shorten(text: str) -> str:
    """Returns ``text`` on one line of at most :data:`REASON_WIDTH` characters."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"


def leading_clause(message: str) -> str:
    """Returns the clause id an assertion message opens with (``"LOCK-3: lost"``, or a checker's
    ``"LOCK-3 (linearizability checker, violation): lost"``), or ""."""
    head, sep, _ = message.partition(": ")
    head = head.split(" (", 1)[0] if head.endswith(")") else head
    return head if sep and CLAUSE_ID.fullmatch(head) else ""


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _backend_detail(error: BaseException) -> str:
    """Returns the last words of the broken backend behind ``error`` ("" if none): the
    ``detail`` of the error itself or of the backend defect it was raised from."""
    for cause in (error, error.__cause__, error.__context__):
        detail = getattr(cause, "detail", "")
        if isinstance(detail, str) and detail:
            return detail
    return ""


def verdict_of(error: BaseException) -> Verdict:
    """Returns the verdict of a check that raised ``error``: a group of failures is judged by its
    first finding or assertion; any other exception is a bug in the check, a harness error."""
    if isinstance(error, BaseExceptionGroup):
        members = [e for e in error.exceptions if isinstance(e, Finding | AssertionError)]
        return verdict_of(members[0] if members else error.exceptions[0])
    summary = getattr(error, "summary", None)
    reason = summary if isinstance(summary, str) else _first_line(error)
    detail = _backend_detail(error)
    reason = shorten(f"{reason} ({detail})" if detail and detail not in reason else reason)
    if isinstance(error, ClauseFailures):
        first = error.failures[0]
        return Verdict(
            Kind.VIOLATION, first.clause, first.reason, (), error.failures, error.completed
        )
    if isinstance(error, Mismatch) and error.blamed:
        failures = tuple(
            ClauseFailure(clause, shorten(error.reasons.get(clause, reason)))
            for clause in error.blamed
        )
        return Verdict(Kind.VIOLATION, error.blamed[0], reason, (), failures, error.completed)
    if isinstance(error, Refusal):
        failures = tuple(ClauseFailure(clause, reason) for clause in error.clauses)
        return Verdict(Kind.VIOLATION, error.clauses[0], reason, (), failures, completed=False)
    if isinstance(error, Violation):
        return Verdict(Kind.VIOLATION, error.clause, reason)
    if isinstance(error, Finding):
        defect = error.kind == Kind.DEFECT
        blamed = getattr(error, "clause", DEFECT_CLAUSE) if defect else ""
        return Verdict(error.kind, blamed, shorten(("backend defect: " if defect else "") + reason))
    if isinstance(error, AssertionError):
        return Verdict(Kind.VIOLATION, leading_clause(str(error)), reason)
    return Verdict(Kind.HARNESS_ERROR, "", shorten(f"{type(error).__name__}: {reason}"))


@dataclass(frozen=True)
class Blame:
    """A Blame is what one failure holds against the backend: its kind and the clauses it blames
    (those of its ``failures``, else its ``blamed`` clause; "" for every clause the check
    cites). Two failures with equal blames read the same in a report, however their messages
    differ."""

    kind: Kind
    clauses: frozenset[str]

    @classmethod
    def of(cls, error: BaseException) -> Blame:
        """Returns the blame of the failure ``error``, from its verdict (:func:`verdict_of`)."""
        verdict = verdict_of(error)
        named = frozenset(failure.clause for failure in verdict.failures)
        return cls(verdict.kind, named or frozenset({verdict.blamed}))


LEVELS = ("none", "safe", "core", "full")
"""The conformance levels, lowest first (SPEC.md, "Conformance levels")."""
SHOWN_BLOCKERS = 5


def scope_skip(clause: Clause, claimed: Collection[str]) -> str | None:
    """Returns why ``clause`` is not judged for a backend that claims ``claimed`` — it binds only
    a backend claiming a feature this one does not claim (SPEC.md, "Scope") — or ``None``."""
    if clause.feature is not None and clause.feature not in claimed:
        return f"binds only a backend that claims {clause.feature}, not claimed"
    return None


def _feature_skip(check: CheckRecord) -> bool:
    return check.status == "skipped" and bool(check.missing_features)


def clause_standing(clause: Clause, cited: Sequence[CheckRecord], *, strict: bool = False) -> str:
    """Returns how ``clause`` stands on the records of the checks that cite it, for a level:
    ``fails`` (:func:`fails_clause`); ``needs a feature`` (with ``strict``, a citing check skipped
    for a missing feature); ``passes`` (:func:`verifies_clause`, or ``Checked by:``); ``not
    verifiable`` (every citing check that counts was skipped as not applicable to this transport);
    ``not verified`` otherwise."""
    if any(fails_clause(c, clause.id) for c in cited):
        return "fails"
    if strict and any(_feature_skip(c) for c in cited):
        return "needs a feature"
    if any(verifies_clause(c, clause.id) for c in cited):
        return "passes"
    if not cited and clause.checked_by:
        return "passes"
    counted = [c for c in cited if not _feature_skip(c)]
    if counted and all(c.status == "skipped" and c.kind != Kind.UNVERIFIED for c in counted):
        return "not verifiable"
    return "not verified"


@dataclass(frozen=True)
class Level:
    """A Level is the conformance level a certification reached, computed from the clause verdicts,
    never the claims (SPEC.md, "Conformance levels"): ``name``, ``blocked_by`` (clause ids with
    their standing; empty at ``full``) and ``not_verifiable``."""

    name: str
    blocked_by: tuple[str, ...] = ()
    not_verifiable: tuple[str, ...] = ()

    @property
    def next(self) -> str | None:
        """The level above this one, or ``None`` at ``full``."""
        index = LEVELS.index(self.name)
        return LEVELS[index + 1] if index + 1 < len(LEVELS) else None

    def headline(self) -> str:
        """Returns the level as one line: ``conformance level: core (full needs: ...)``."""
        line = f"conformance level: {self.name}"
        notes = []
        if self.next is not None and self.blocked_by:
            shown = ", ".join(self.blocked_by[:SHOWN_BLOCKERS])
            more = len(self.blocked_by) - SHOWN_BLOCKERS
            notes.append(f"{self.next} needs: {shown}" + (f" and {more} more" if more > 0 else ""))
        if self.not_verifiable:
            notes.append("not verifiable over this transport: " + ", ".join(self.not_verifiable))
        return line + (f" ({'; '.join(notes)})" if notes else "")

    def to_json(self) -> dict[str, Any]:
        """Returns the level as the ``level`` object of ``report.json``."""
        return {
            "name": self.name,
            "next": self.next,
            "blocked_by": list(self.blocked_by),
            "not_verifiable": list(self.not_verifiable),
        }


def conformance_level(clauses: Iterable[Clause], checks: Iterable[CheckRecord]) -> Level:
    """Returns the conformance level that the check records ``checks`` reach over the MUST clauses
    of ``clauses``, the one rule for the report, the certify summary and the matrix (a backend
    claiming no ``batch`` is ``core``, blocked by ``BATCH-2 needs a feature``).

        safe  every data-protecting clause passes (or is not verifiable here)
        core  safe, and every clause that binds every backend passes
        full  core, and every clause of every optional feature passes, no check of any MUST
              clause skipped for a feature the backend lacks
        none  otherwise
    """
    records = list(checks)
    must = [clause for clause in clauses if clause.level == "MUST"]
    cited = {clause.id: [c for c in records if bears_on(c, clause.id)] for clause in must}
    groups = {
        "safe": [c for c in must if c.protects_data],
        "core": [c for c in must if c.feature is None],
        "full": must,
    }
    reached, unverifiable = "none", ()
    for name in LEVELS[1:]:
        strict = name == "full"
        standing = {c.id: clause_standing(c, cited[c.id], strict=strict) for c in groups[name]}
        held = ("passes", "not verifiable")
        # Failures first: they are what a backend author fixes; then what was not shown.
        order = sorted(standing.items(), key=lambda item: item[1] != "fails")
        blocked = tuple(f"{cid} {how}" for cid, how in order if how not in held)
        if blocked:
            return Level(reached, blocked, unverifiable)
        reached = name
        unverifiable = tuple(cid for cid, how in standing.items() if how == "not verifiable")
    return Level(reached, (), unverifiable)
