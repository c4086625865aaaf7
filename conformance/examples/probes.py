"""Running an example on the model or on a backend, and the follow-up probes that tell a
failure's cause on a fresh root before it is blamed: does the backend raise at any call of that
kind, refuse the condition alone, do the same with one session, know the threat at all."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from memspec.conformance.examples.drivers import BackendDriver, ModelDriver
from memspec.conformance.examples.failure import ExampleFailure
from memspec.conformance.examples.steps import run_example
from memspec.conformance.transport.backend import Backend, BackendDefect
from memspec.conformance.transport.wire import Fields
from memspec.conformance.verdict.findings import Unverified
from memspec.spec import codes
from memspec.spec.examples import Example
from memspec.spec.targets import TARGETS
from memspec.spec.threats import find_threats

_ADD_TABS: tuple[str, Fields] = ("add", {"target": "memory", "content": "User prefers tabs"})


CONTROL_CALLS: dict[str, tuple[tuple[str, Fields], ...]] = {
    "load": (),
    "add": (_ADD_TABS,),
    "replace": (_ADD_TABS, ("replace", {"target": "memory", "old_text": "tabs",
                                        "new_content": "User prefers spaces"})),
    "remove": (_ADD_TABS, ("remove", {"target": "memory", "old_text": "tabs"})),
    "patch": (_ADD_TABS, ("patch", {"target": "memory", "old_text": "tabs", "content": "spaces"})),
    "batch": (("batch", {"target": "memory",
                         "operations": [{"action": "add", "content": "User prefers tabs"}]}),),
    "entries": (_ADD_TABS, ("entries", {"target": "memory"})),
    "snapshot": (_ADD_TABS, ("load", {}), ("snapshot", {"target": "memory"})),
    "tool_call": (("tool_call", {"arguments": json.dumps(dict(_ADD_TABS[1], action="add"))}),),
}  # fmt: skip
"""The plain calls that tell whether a backend that raised at a step raises at any call of that
kind: on a fresh root, a load and then these."""


def _raises_anyway(backend: Backend, root: Path, op: str) -> bool:
    """Whether ``backend`` raises at a plain call of kind ``op`` (:data:`CONTROL_CALLS`) on a
    fresh ``root``; an op with no plain call counts as raising anyway."""
    if op not in CONTROL_CALLS:
        return True
    try:
        with _probe(backend, root, {}) as probe:
            for name, fields in CONTROL_CALLS[op]:
                probe.request("a", name, fields.copy())
    except BackendDefect:
        return True
    return False


@contextlib.contextmanager
def _probe(backend: Backend, root: Path, limits: Mapping[str, int]) -> Iterator[BackendDriver]:
    """Yields a driver on the fresh ``root`` (created here) whose session ``a`` has loaded, for a
    call or two that tells how the backend behaves apart from the example; closes it after."""
    root.mkdir()
    probe = BackendDriver(backend, root, dict(limits))
    try:
        probe.request("a", "load", {})
        yield probe
    finally:
        probe.close()


def run_on_model(example: Example) -> ExampleFailure | None:
    """Runs ``example`` against the spec model (a failure is a bug in SPEC.md)."""
    return run_example(example, ModelDriver.for_example(example))


def run_on_backend(
    example: Example, backend: Backend, root: Path | None = None
) -> ExampleFailure | None:
    """Runs ``example`` against ``backend`` on a fresh root (a temporary one by default).

    Raises Unverified when a step that expects a path other than a plain ``add`` (a replace, a
    patch, a batch item) to refuse a threat is let through, and the backend also accepts that
    text in a plain ``add``: its patterns do not know it (SCAN-2's business), so whether the
    path is scanned cannot be told with it."""
    with tempfile.TemporaryDirectory(prefix="memspec-") as scratch:
        failure, driver = _run_once(example, backend, root or Path(scratch))
        cause = driver.unwritten[:1] or driver.stale[:1]
        if failure is not None and cause:  # what followed read a file gone wrong before
            clause = "ATOMIC-5" if driver.unwritten else "LOCK-2"
            reason = f"{cause[0]}; then {failure.reason}"
            failure = replace(failure, reason=reason, blamed=(clause,), completed=False)
        elif failure is not None and failure.unless_raised_anyway:
            sent = failure.sent if isinstance(failure.sent, dict) else {}
            if not _raises_anyway(backend, Path(scratch) / "control", str(sent.get("op"))):
                blamed = (*failure.blamed, *failure.unless_raised_anyway)
                failure = replace(failure, blamed=tuple(dict.fromkeys(blamed)))
        elif failure is not None and failure.unless_refused_alone:
            rule, code, fields = failure.unless_refused_alone
            with _probe(backend, Path(scratch) / "alone", example.limits) as probe:
                alone = probe.request("a", "add", fields.copy())
            if alone.get("code") != code:  # the condition is missing, not out of order
                reason = f"{failure.reason}; alone, add {fields} answered {alone.get('code')} too"
                failure = replace(failure, blamed=(rule,), reason=reason, stops=True)
        elif failure is not None and failure.unless_within_limits:
            failure = _unless_known_within_limits(failure, example, backend, Path(scratch))
        elif failure is not None and failure.given:
            raise Unverified(
                f"example {example.id}: its given step at line {failure.line} ({failure.step}) "
                f"did not set up what the example judges: {failure.reason}; the clauses that own "
                "that step judge it"
            )
        if failure is not None and not cause:
            failure = _unless_the_same_in_one_session(
                failure, example, backend, Path(scratch) / "one-session"
            )
        unknown = _unknown_threat(failure, backend, Path(scratch) / "probe", example)
        if failure is not None and unknown is None:
            failure = _unless_unknown_at_load(failure, backend, Path(scratch) / "load", example)
    if unknown is not None:
        raise Unverified(
            f"example {example.id}: the backend accepts {unknown!r} in a plain add too: its "
            "threat patterns do not know it (SCAN-2), so whether this path is scanned is not "
            "verified"
        )
    return failure


def _run_once(
    example: Example, backend: Backend, root: Path
) -> tuple[ExampleFailure | None, BackendDriver]:
    """Runs ``example`` on ``backend`` at ``root``; returns what it found and the closed driver
    (which keeps what it saw of unwritten and stale files)."""
    model = ModelDriver.for_example(example)
    driver = BackendDriver(backend, root, dict(example.limits), model=model)
    try:
        return run_example(example, driver), driver
    finally:
        driver.close()


ROOMY_LIMIT = 1_000_000
"""A limit no step of an example reaches: what an example shows without its limit condition."""


def _unless_known_within_limits(
    failure: ExampleFailure, example: Example, backend: Backend, scratch: Path
) -> ExampleFailure:
    """Returns ``failure`` blamed on the expected refusal's own clause alone when the example,
    run again on a fresh root with limits no step reaches, answers the failing step without that
    refusal too: the backend does not judge the condition at all, so its order against the limit
    (CONTRACT-5) is not what failed. Otherwise (it refuses as expected, or fails elsewhere) the
    failure stands as found."""
    roomy = replace(example, limits=dict.fromkeys(TARGETS, ROOMY_LIMIT))
    root = scratch / "within-limits"
    root.mkdir()
    again, _ = _run_once(roomy, backend, root)
    received = again.received if again is not None else None
    code = received.get("code") if isinstance(received, dict) else None
    expected = failure.expected if isinstance(failure.expected, dict) else {}
    if again is None or again.line != failure.line or code in (None, expected.get("code")):
        return failure
    reason = (
        f"{failure.reason}; with limits no step reaches, the same step answered {code}: the "
        f"condition is not judged at all ({failure.unless_within_limits}), not judged after "
        "the limit"
    )
    return replace(failure, blamed=(failure.unless_within_limits,), reason=reason)


SESSION_CLAUSES = frozenset({"LOCK-2"})
"""Clauses about what one session does after another session's write: a difference that one
session alone shows too is not about them."""


def _unless_the_same_in_one_session(
    failure: ExampleFailure, example: Example, backend: Backend, root: Path
) -> ExampleFailure:
    """Returns ``failure`` without :data:`SESSION_CLAUSES` when the example, its steps all run in
    one session on a fresh ``root``, fails at the same step with the same answer: the store does
    that with no other session about (a store that never detects a duplicate refuses the
    duplicate of LOCK-2's example for the limit), which the step's own rule judges. Raises
    Unverified when nothing else is blamed."""
    blamed = failure.blamed or failure.clauses
    if not SESSION_CLAUSES & set(blamed) or len({step.session for step in example.steps}) < 2:
        return failure
    alone = replace(example, steps=tuple(replace(step, session="a") for step in example.steps))
    root.mkdir()
    again, _ = _run_once(alone, backend, root)
    if again is None or (again.line, again.received) != (failure.line, failure.received):
        return failure
    kept = tuple(clause for clause in blamed if clause not in SESSION_CLAUSES)
    if not kept:
        raise Unverified(
            f"example {example.id}: {failure.step} → {failure.reason.splitlines()[0]}, and the "
            "same in one session with no other about: not a stale view of another session's "
            "write (LOCK-2); the step's own rule is judged by its own examples"
        )
    return replace(failure, blamed=kept)


def _unless_unknown_at_load(
    failure: ExampleFailure, backend: Backend, root: Path, example: Example
) -> ExampleFailure:
    """Returns ``failure`` without SCAN-6 when a threat it saw shown as it is at load is one the
    backend accepts in a plain add: its patterns do not know it (SCAN-2's business), so whether
    the load scans is not told by it. Raises Unverified when nothing else is blamed."""
    if "SCAN-6" not in failure.blamed or not failure.shown_threats:
        return failure
    with _probe(backend, root, example.limits) as probe:
        unknown = next(
            (
                text for target, text in failure.shown_threats
                if probe.request("a", "add", {"target": target, "content": text}).get("code")
                == codes.OK
            ),
            None,
        )  # fmt: skip
    if unknown is None:
        return failure
    said = (
        f"the backend accepts {unknown!r} in a plain add too: its threat patterns do not know "
        "it (SCAN-2), so whether the scan at load runs is not verified"
    )
    rest = tuple(clause for clause in failure.blamed if clause != "SCAN-6")
    if not rest:
        raise Unverified(f"example {example.id}: {said}")
    return replace(failure, blamed=rest, completed=False, reason=f"{failure.reason}; {said}")


def _unknown_threat(
    failure: ExampleFailure | None, backend: Backend, root: Path, example: Example
) -> str | None:
    """Returns the threat of a failed non-add step that the backend accepts in a plain add: one
    a replace, patch or batch item let through."""
    sent = failure.sent if failure is not None else None
    if not isinstance(sent, dict) or failure is None:
        return None
    expected = failure.expected if isinstance(failure.expected, dict) else {}
    if expected.get("code") == codes.E_THREAT and sent.get("op") not in ("add", None):
        operations = sent.get("operations")
        items = operations if isinstance(operations, list) else [sent]
        texts = [
            text for item in items if isinstance(item, dict)
            for text in (item.get("content"), item.get("new_content"))
            if isinstance(text, str) and find_threats(text)
        ]  # fmt: skip
    else:
        return None
    target = sent.get("target")
    if not isinstance(target, str):  # a request the spec refuses for its target first
        return None
    with _probe(backend, root, example.limits) as probe:
        for text in texts:
            answer = probe.request("a", "add", {"target": target, "content": text})
            if answer.get("code") == codes.OK:
                return text
    return None
