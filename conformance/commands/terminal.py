"""What ``memspec certify`` and ``memspec hermes`` print of a certification, and nothing else.

Both commands build their settings, call the one library function
(:func:`~memspec.conformance.commands.certify.run_certification`) and print its result here: the
failing clauses by the level they block, the notes, the conformance level and the counts.
"""

from __future__ import annotations

import sys

from memspec.conformance.commands.certify import CertifyResult
from memspec.conformance.core.settings import Settings
from memspec.conformance.verdict.summary import failing_summary


def counts_line(passed: int, failed: int, skipped: int) -> str:
    """Returns the last line of a run: ``N passed, N failed, N skipped``."""
    return f"{passed} passed, {failed} failed, {skipped} skipped"


def print_start(settings: Settings) -> None:
    """Prints what the settings found out before the run: the shape of a ``--hermes-class``."""
    if settings.backend_shape is not None:
        print(f"hermes-class: {settings.backend_shape}", flush=True)


def print_result(result: CertifyResult) -> int:
    """Prints ``result`` as certify's terminal output and returns its exit status: a backend that
    could not be started is one error line; otherwise the failing clauses by the level they
    block, the notes, the level and the counts."""
    if not result.started:
        for note in result.notes:
            print(f"memspec: error: {note}", file=sys.stderr)
        return result.status
    if result.records:
        lines = failing_summary(result.records, result.level, result.claimed, result.spec)
        print("\n".join(["", *lines]))
    for line in result.notes:
        print(line)
    if result.records:
        print(result.level.headline())
    counts = result.counts
    print(counts_line(counts["passed"], counts["failed"], counts["skipped"]))
    return result.status
