"""Findings: every way a check can stop short of passing, as exceptions that carry their
verdict as data (kind, blamed clause, reason), and :func:`verdict_of`, which reads it.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from memspec.spec.clauses import CLAUSE_ID
from memspec.spec.errors import MemspecError
from memspec.spec.problems import Problem

BUG_PREFIX = "BUG IN MEMSPEC: "


def bug_message(message: str) -> str:
    """Returns ``message`` opening with :data:`BUG_PREFIX` once."""
    return message if message.startswith(BUG_PREFIX) else BUG_PREFIX + message


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
"""How the line starts that memspec's adapter of a store written elsewhere prints on stderr
before it exits with an adapter gap (the adapter's side of the wire,
``transport/jsonlines.py``)."""
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


class AdapterGap(Unverified):
    """memspec's adapter of a store written elsewhere (Hermes' memory tool, a Hermes-shaped
    class) met an answer it cannot map to the contract: the check judged nothing (its clauses
    read "not verified" with the unmapped answer), and the adapter needs a rule for it, not the
    store a fix. Reported apart, first in the summary."""


class NotApplicable(Finding):
    """The check does not apply to this backend over this transport (a protocol check of an
    in-process backend); the suite reports it as skipped with the reason, and its clauses as
    "not verifiable" here, which holds no level back. A check that could not decide — an
    undecided search, a failed precondition — is :class:`Unverified`, never this."""

    kind = Kind.UNSUPPORTED


class Violation(Finding, AssertionError):
    """The backend broke ``clause``; the message says how (what was sent, what came back, what the
    spec allows). Checks raise it — never a bare ``assert`` — so the clause travels as data to the
    record; the message shown opens with the clause id for the reader."""

    kind = Kind.VIOLATION

    def __init__(self, clause: str, message: str) -> None:
        if not CLAUSE_ID.fullmatch(clause):
            raise HarnessError(f"a violation names the clause {clause!r}, not an id like LOCK-3")
        super().__init__(f"{clause}: {message}")
        self.clause = clause
        self.text = message

    def extended(self, more: str) -> Violation:
        """Returns the same violation with ``more`` (the shrunk program, how to reproduce it)
        after its message."""
        return type(self)(self.clause, f"{self.text}\n{more}" if more else self.text)

    @classmethod
    def of(cls, problem: Problem, context: str = "") -> Violation:
        """Returns the violation of what a spec judge found (``problem``), with ``context``
        (what was sent, what the files held) after its text."""
        return cls(problem.clause, f"{problem.text} ({context})" if context else problem.text)


@dataclass(frozen=True)
class Evidence:
    """Evidence is what an example's failing step showed, as JSON values: the ``step`` as a
    person reads it, the request ``sent``, the answer ``received`` and what the spec
    ``expected``. A report renders it as labelled blocks and a character-level diff; the
    verdict never reads it."""

    step: str
    sent: Any
    received: Any
    expected: Any

    @classmethod
    def of(cls, step: str, sent: Any, received: Any, expected: Any) -> Evidence:
        """Returns the evidence of a step, each value made JSON-ready (a value JSON cannot
        carry, as its ``repr``)."""
        ready = [json.loads(json.dumps(v, default=repr)) for v in (sent, received, expected)]
        return cls(step, *ready)

    @classmethod
    def from_json(cls, fields: Mapping[str, Any] | None) -> Evidence | None:
        """Returns the evidence a record's ``evidence`` holds (``None`` when it holds none, or
        something else than evidence)."""
        if not isinstance(fields, Mapping) or not isinstance(fields.get("step"), str):
            return None
        step, sent = fields["step"], fields.get("sent")
        return cls(step, sent, fields.get("received"), fields.get("expected"))


class Mismatch(Finding, AssertionError):
    """The backend's answers differ from what an example expects; ``summary`` is the one line
    that says where (the step and the difference), the message the whole account. ``blamed``
    are the clauses that own the difference (empty: every clause the example cites),
    ``completed`` whether the example ran to its end and ``evidence`` what its step sent,
    received and expected."""

    kind = Kind.VIOLATION

    def __init__(
        self,
        message: str,
        summary: str,
        blamed: Sequence[str] = (),
        completed: bool = False,
        reasons: Mapping[str, str] | None = None,
        evidence: Evidence | None = None,
    ) -> None:
        super().__init__(message)
        self.evidence = evidence
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
    to its end (``completed``); for an example, what its failing step showed (``evidence``)."""

    kind: Kind
    blamed: str = ""
    reason: str = ""
    missing_features: tuple[str, ...] = ()
    failures: tuple[ClauseFailure, ...] = ()
    completed: bool = False
    adapter_gap: bool = False
    evidence: Evidence | None = None

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
            bool(fields.get("adapter_gap")),
            Evidence.from_json(fields.get("evidence")),
        )


def shorten(text: str) -> str:
    """Returns ``text`` on one line of at most :data:`REASON_WIDTH` characters."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"


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
    """Returns the verdict of a check that raised ``error``, read from the finding's fields, never
    from its message: a group of failures is judged by its first finding; any other exception —
    a bare ``AssertionError`` included, which only memspec's own invariants raise — is a bug in
    the check, a harness error."""
    if isinstance(error, BaseExceptionGroup):
        members = [e for e in error.exceptions if isinstance(e, Finding)]
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
        return Verdict(
            Kind.VIOLATION, error.blamed[0], reason, (), failures, error.completed,
            evidence=error.evidence,
        )  # fmt: skip
    if isinstance(error, Mismatch):
        return Verdict(Kind.VIOLATION, "", reason, evidence=error.evidence)
    if isinstance(error, Refusal):
        failures = tuple(ClauseFailure(clause, reason) for clause in error.clauses)
        return Verdict(Kind.VIOLATION, error.clauses[0], reason, (), failures, completed=False)
    if isinstance(error, Violation):
        return Verdict(Kind.VIOLATION, error.clause, reason)
    if isinstance(error, AdapterGap):
        return Verdict(Kind.UNVERIFIED, "", reason, adapter_gap=True)
    if isinstance(error, Finding):
        defect = error.kind == Kind.DEFECT
        blamed = getattr(error, "clause", DEFECT_CLAUSE) if defect else ""
        return Verdict(error.kind, blamed, shorten(("backend defect: " if defect else "") + reason))
    # a bare assertion is memspec's own invariant: a check states a verdict as a Violation
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
