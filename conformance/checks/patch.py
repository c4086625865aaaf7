"""Checks of the optional ``patch`` operation that the examples cannot state: what a backend that
does not claim it answers binds every backend (PATCH-11)."""

from __future__ import annotations

from memspec.conformance.checks._disk import put
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.verdict.findings import Violation
from memspec.spec import codes

STORED = b"User prefers tabs"


@check("PATCH-11", "CONTRACT-14", features=(), id="patch.unsupported_without_the_feature")
def unsupported_without_the_feature(ctx: CheckContext) -> None:
    """A backend that does not claim ``patch`` answers a patch ``E_UNSUPPORTED`` and writes
    nothing; one that claims it answers an Outcome, never ``E_UNSUPPORTED`` (PATCH-11). Both
    transports: the in-process one answers for a Python store that does not claim the feature,
    a command backend answers itself."""
    path = put(ctx.root, "memory", STORED)
    with ctx.session() as session:
        session.request("load")
        claimed = "patch" in session.features
        sent = {"target": "memory", "old_text": "tabs", "content": "spaces"}
        answer = session.request("patch", **sent)
        after = path.read_bytes()
    if not claimed:
        # PATCH-11: a backend that does not claim patch answers E_UNSUPPORTED, ok false.
        if not (answer["ok"], answer["code"]) == (False, codes.E_UNSUPPORTED):
            raise Violation(
                "PATCH-11",
                f"the backend does not claim 'patch', yet patch {sent} answered {answer}; "
                "expected ok false with E_UNSUPPORTED (claim 'patch' if it is implemented)",
            )
        # PATCH-11: and it writes nothing.
        if after != STORED:
            raise Violation(
                "PATCH-11",
                f"an unsupported patch {sent} changed MEMORY.md from {STORED!r} to {after!r}",
            )
        return
    # PATCH-11, CONTRACT-2: a claimed op answers an Outcome code, never E_UNSUPPORTED.
    if answer["code"] not in codes.OUTCOME_CODES:
        raise Violation(
            "PATCH-11",
            f"the backend claims 'patch', yet patch {sent} answered {answer}; a claimed "
            "operation answers one of the Outcome codes, never E_UNSUPPORTED",
        )
