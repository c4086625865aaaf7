"""Property fuzzing of memory backends through the contract, with Hypothesis.

Importing this package registers its checks with :mod:`memspec.conformance.core.registry`; ``memspec
certify`` finds its modules through the ``memspec.checks`` entry points and never imports it by
name. The strategies are public for other harnesses to reuse.
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
