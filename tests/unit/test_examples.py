"""Every SPEC.md example holds for the spec's own model and for the reference store."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.core.examples import run_on_backend, run_on_model
from memspec.conformance.transport.backend import InProcessBackend
from memspec.spec.examples import Example, load_examples

EXAMPLES = load_examples()
REFERENCE = InProcessBackend("memspec.reference_impl:open_store")


def test_spec_has_examples() -> None:
    assert len(EXAMPLES) >= 60


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_on_model(example: Example) -> None:
    # A disagreement here is a bug in SPEC.md or the model, never in a backend.
    failure = run_on_model(example)
    assert failure is None, failure.render()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_on_reference(example: Example, tmp_path: Path) -> None:
    failure = run_on_backend(example, REFERENCE, tmp_path)
    assert failure is None, failure.render()
