"""Findings: why a check stopped short of passing, as data (kind, blamed clause, reason).

Every way a check can end other than passing is an exception under one root, :class:`Finding`,
or a plain ``AssertionError`` (checks assert with messages that open with the clause they
blame, ``"DRIFT-5: ..."``). :func:`verdict_of` turns the exception a check raised into the
record's verdict, once, where the exception is still an object; the reports, the matrix, the
sweep and the zoo read its fields and never parse failure text.

The kinds:

- ``violation``: the backend broke a clause. ``blamed`` names it when the failure says which
  (a :class:`Violation`, or an assertion message opening with a clause id), else ``""``: the
  failure counts against every clause the check cites.
- ``defect``: the backend raised, hung, died or answered something that is not an answer
  (:class:`~memspec.conformance.backend.BackendDefect`); it blames CONTRACT-6.
- ``harness-error``: memspec itself is wrong (a bug in a check, a broken install): never counted
  against the backend.
- ``unsupported``: the check does not apply (it needs a Python backend, or a feature the
  backend does not claim, listed in ``missing_features``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from memspec.spec.clauses import CLAUSE_ID

VERDICT_PROPERTY = "memspec_verdict"
"""The pytest user property that carries a check's verdict (JSON) from the test to its record."""
KINDS = ("violation", "defect", "harness-error", "unsupported")
DEFECT_CLAUSE = "CONTRACT-6"
REASON_WIDTH = 240


class Finding(Exception):
    """The root of every way a check can stop short of passing (see the module docstring)."""

    kind = "harness-error"


class Violation(Finding, AssertionError):
    """The backend broke ``clause``; the message says how."""

    kind = "violation"

    def __init__(self, clause: str, message: str) -> None:
        super().__init__(f"{clause}: {message}")
        self.clause = clause


class Mismatch(Finding, AssertionError):
    """The backend's answers differ from what an example expects; ``summary`` is the one line
    that says where (the step and the difference), the message the whole account."""

    kind = "violation"

    def __init__(self, message: str, summary: str) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass(frozen=True)
class Verdict:
    """A Verdict is how a check that did not pass ended: its kind, the clause it blames ("" for
    every clause the check cites), one line saying why, and the features it lacked."""

    kind: str
    blamed: str = ""
    reason: str = ""
    missing_features: tuple[str, ...] = ()

    def to_property(self) -> tuple[str, str]:
        """Returns the pytest user property that carries this verdict to the record."""
        return VERDICT_PROPERTY, json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_property(cls, value: str | None) -> Verdict | None:
        """Returns the verdict a user property carried, or None."""
        if not value:
            return None
        fields: dict[str, Any] = json.loads(value)
        fields["missing_features"] = tuple(fields.get("missing_features", ()))
        return cls(**fields)


def fails_clause(status: str, kind: str, blamed: str, clause: str) -> bool:
    """Whether a check's record is a failure of the backend on ``clause``: it failed (or failed
    as listed), blaming that clause or none in particular; never a harness error, nor a listed
    failure that passed (``stale``). The one rule the reports, the matrix and the sweep share."""
    return (
        status in ("failed", "xfailed")
        and kind not in ("harness-error", "stale")
        and blamed in ("", clause)
    )


def shorten(text: str) -> str:
    """Returns ``text`` on one line of at most :data:`REASON_WIDTH` characters."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"


def leading_clause(message: str) -> str:
    """Returns the clause id an assertion message opens with (``"LOCK-3: lost"``), or ""."""
    head, sep, _ = message.partition(": ")
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
    """Returns the verdict of a check that raised ``error`` (kinds in the module docstring).

    A group of failures (Hypothesis reports several distinct bugs as one) is judged by its
    first member that is a finding or an assertion. Any other exception escaping a check is a
    bug in the check: a harness error.
    """
    if isinstance(error, BaseExceptionGroup):
        members = [e for e in error.exceptions if isinstance(e, Finding | AssertionError)]
        return verdict_of(members[0] if members else error.exceptions[0])
    summary = getattr(error, "summary", None)
    reason = summary if isinstance(summary, str) else _first_line(error)
    detail = _backend_detail(error)
    reason = shorten(f"{reason} ({detail})" if detail and detail not in reason else reason)
    if isinstance(error, Violation):
        return Verdict("violation", error.clause, reason)
    if isinstance(error, Finding):
        blamed = DEFECT_CLAUSE if error.kind == "defect" else ""
        prefix = "backend defect: " if error.kind == "defect" else ""
        return Verdict(error.kind, blamed, shorten(prefix + reason))
    if isinstance(error, AssertionError):
        return Verdict("violation", leading_clause(str(error)), reason)
    return Verdict("harness-error", "", shorten(f"{type(error).__name__}: {reason}"))
