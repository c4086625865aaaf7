"""Running the examples of SPEC.md: against the pure model, or against a backend.

One interpreter (:mod:`.steps`) runs the steps in a driver (:mod:`.world`): the spec model, where
a disagreement is a bug in SPEC.md, or fresh sessions on a root through the contract, reading the
files from the disk (:mod:`.drivers`); a failure on a backend is then probed on fresh roots
before it is blamed (:mod:`.probes`).
"""

from memspec.conformance.examples.failure import ExampleFailure, describe, show
from memspec.conformance.examples.probes import run_on_backend, run_on_model
from memspec.conformance.examples.steps import run_example

__all__ = ["ExampleFailure", "describe", "run_example", "run_on_backend", "run_on_model", "show"]
