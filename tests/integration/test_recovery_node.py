"""The Node.js backend (``backends/node``) is recoverable from any readable state: it passes
the recovery checks and runs the recovery examples of SPEC.md (DRIFT-2, DRIFT-5, DRIFT-7,
SCAN-7) through JSON Lines. Skipped, with the reason, where ``node`` is missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.examples.probes import run_on_backend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.spec.document import installed_spec
from tests.budgeted import run_in_budget

PROJECT = Path(__file__).resolve().parent.parent.parent
NODE = PROJECT / "backends" / "node" / "memspec_backend.js"
EXAMPLES = {example.id: example for example in list(installed_spec().examples)}
RECOVERY_CHECKS = [
    "recovery.lowered_limit_is_recoverable",
    "recovery.unreadable_file_says_how_to_repair",
]


@pytest.fixture
def node_backend() -> Iterator[CommandBackend]:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: the Node.js backend cannot be started")
    yield CommandBackend(f"node {NODE}", timeout=20)


@pytest.mark.parametrize("check_id", RECOVERY_CHECKS)
def test_the_node_backend_passes_the_recovery_checks(
    check_id: str, node_backend: CommandBackend, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    run_in_budget(
        all_checks()[check_id], CheckContext(node_backend, root, tmp_path, PROFILES["ci"])
    )


@pytest.mark.parametrize(
    "example",
    ["drift-limit-lowered-below-the-file", "drift-pasted-entry-removed-with-a-backup",
     "drift-foreign-shrinking-replace-goes-through", "scan-placeholder-advice-followed"],
)  # fmt: skip
def test_the_node_backend_runs_the_recovery_examples(
    example: str, node_backend: CommandBackend, tmp_path: Path
) -> None:
    assert run_on_backend(EXAMPLES[example], node_backend, tmp_path) is None
