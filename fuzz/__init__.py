"""Property fuzzing of memory backends through the contract, with Hypothesis (BRIEF section 3).

Importing this package registers its checks with :mod:`memspec.conformance.core.registry`: the
delimiter round trip, the limits, the frozen snapshot, the fence escape
(:mod:`memspec.fuzz.properties`), external drift (:mod:`memspec.fuzz.drift_properties`), the
stateful differential test against the spec model (:mod:`memspec.fuzz.machine`) and random
schedules of concurrent sessions (:mod:`memspec.fuzz.interleavings`). The conformance harness
never imports this package: ``memspec certify`` finds these modules through the ``memspec.checks``
entry points in ``pyproject.toml``, and runs their checks like any other. Everything here uses
Hypothesis; the strategies are public for other harnesses to reuse.
"""

from memspec.conformance.core.search import PropertyRun, open_database, plan
from memspec.fuzz import (  # noqa: F401 - importing registers the checks
    drift_properties,
    interleavings,
    machine,
    properties,
)
from memspec.fuzz.ledger import DriftLedger
from memspec.fuzz.oracle import allowed_answers, snapshot_problem
from memspec.fuzz.strategies import (
    contents,
    cosmetic_edits,
    entry_texts,
    external_edits,
    fence_payloads,
    requests,
)

__all__ = [
    "DriftLedger",
    "PropertyRun",
    "allowed_answers",
    "contents",
    "cosmetic_edits",
    "entry_texts",
    "external_edits",
    "fence_payloads",
    "open_database",
    "plan",
    "requests",
    "snapshot_problem",
]
