"""What an example found: the step that went wrong, what was sent and received, what the spec
allows, and the clauses that own the difference (:class:`ExampleFailure`), with the helpers that
show a step and its values as a person reads them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from memspec.conformance.transport.wire import Fields
from memspec.conformance.verdict.diffs import visible
from memspec.spec.codec import (
    decode,
    parse_text,
)
from memspec.spec.examples import Example, Step
from memspec.spec.requests import OP_FIELDS


@dataclass(frozen=True)
class ExampleFailure:
    """An ExampleFailure says which step of which example went wrong, and how.

    ``sent`` is the request, ``received`` the answer, ``expected`` what the spec allows.
    """

    example: str
    clauses: tuple[str, ...]
    line: int
    step: str
    sent: Any
    received: Any
    expected: Any
    reason: str
    detail: str = ""
    """For a backend that broke (raised, died), the last line it printed, e.g. its exception."""
    blamed: tuple[str, ...] = ()
    """The clauses that own the difference, when a part of the expectation says so (a snapshot
    header's usage is SNAP-8's); empty: every clause the example cites."""
    completed: bool = False
    """Whether the example ran to its end, so that its clauses not blamed held."""
    stops: bool = False
    """Whether the example stops at this failure, its blamed clauses failed and the rest not
    verified (a refusal leaves the later steps nothing to show); else it goes on."""
    given: bool = False
    """Whether the failure is at a ``given`` step: the state the example judges was never set
    up, so none of its clauses is judged (the example reads not verified)."""
    unless_raised_anyway: tuple[str, ...] = ()
    """The clauses a raise also fails when the same kind of call does not raise on a fresh root
    (the raise is then the step's own, as on an undecodable file), for :func:`run_on_backend`
    to tell."""
    shown_threats: tuple[tuple[str, str], ...] = ()
    """The ``(target, entry)`` threats a snapshot blamed on SCAN-6 showed as they are; when the
    backend's own patterns accept one in a plain ``add``, the scan at load is not verified by
    them (:func:`run_on_backend` tells)."""
    clause_reasons: tuple[tuple[str, str], ...] = ()
    """Each blamed clause with the one line of the first difference that blamed it, when the
    example found several (:func:`_found_before`)."""
    unless_refused_alone: tuple[str, str, Fields] | None = None
    """For a refusal an example of the order of conditions expected and did not get: the clause
    that decides it, its code, and a request that meets that condition alone, on a fresh root;
    when the backend does not refuse that one either, the condition is missing altogether and
    its own clause fails, not the order (:func:`run_on_backend` tells)."""
    unless_within_limits: str = ""
    """For an ``E_LIMIT`` an example of the order of conditions got where it expected an earlier
    refusal: the clause that decides the expected one. When the example, run again with limits
    no step reaches, answers that step otherwise than the expected refusal too, the condition is
    missing altogether and that clause fails, not the order (:func:`run_on_backend` tells)."""

    def to_json(self) -> dict[str, Any]:
        """Returns the failure as a JSON-ready record."""
        return {
            "example": self.example,
            "clauses": list(self.clauses),
            "line": self.line,
            "step": self.step,
            "sent": plain(self.sent),
            "received": plain(self.received),
            "expected": plain(self.expected),
            "reason": self.reason,
        }

    def summary(self) -> str:
        """Returns the failure on one line: the example, the step and what went wrong."""
        detail = f" ({self.detail})" if self.detail else ""
        headline = self.reason.splitlines()[0] if self.reason else ""
        return f"example {self.example}: {self.step} → {headline}{detail}"

    def render(self) -> str:
        """Returns the failure as labelled blocks a person can act on."""
        return "\n".join(
            [
                f"example {self.example} ({', '.join(self.clauses)}), SPEC.md line {self.line}",
                f"  step:     {self.step}",
                f"  sent:     {show(self.sent)}",
                f"  received: {show(self.received)}",
                f"  expected: {show(self.expected)}",
                f"  why:      {self.reason}",
                *(
                    [f"  blames:   {', '.join(self.blamed)} alone (the rest of the example held)"]
                    if self.blamed and self.completed
                    else []
                ),
            ]
        )


def show(value: Any) -> str:
    """Returns ``value`` as readable JSON, every invisible or ambiguous character escaped
    (:func:`~memspec.conformance.verdict.diffs.visible`)."""
    return visible(json.dumps(plain(value), ensure_ascii=False))


def plain(value: Any) -> Any:
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
        return text if text.encode("utf-8") == value else {"hex": value.hex()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def step_fields(step: Step) -> Fields:
    """Returns a store step's arguments under their protocol field names (CONTRACT-13)."""
    return cast(Fields, dict(zip(OP_FIELDS.get(step.op, ()), step.args, strict=False)))


def describe(step: Step) -> str:
    """Returns a step as one readable line."""
    prefix = "" if step.session == "a" else f"@{step.session} "
    args = " ".join(show(a) for a in step.args)
    return f"{prefix}{step.op} {args}".rstrip()


Fail = Callable[[Any, Any, Any, str], ExampleFailure]


def failure_factory(example: Example, step: Step) -> Fail:
    def fail(sent: Any, received: Any, expected: Any, reason: str) -> ExampleFailure:
        return ExampleFailure(
            example.id, example.clauses, step.line, describe(step), sent, received, expected, reason
        )

    return fail


def model_entries(data: bytes | None) -> list[str] | None:
    """Returns the entries a tolerant reader finds in ``data`` (``None`` if undecodable)."""
    text = None if data is None else decode(data)
    return None if text is None else parse_text(text)
