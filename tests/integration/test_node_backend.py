"""The Node.js backend (``backends/node``) passes ``memspec certify`` through JSON Lines.

This proves that nothing in the harness assumes Python: a second, independent implementation of
SPEC.md in another language is certified through ``--backend-cmd`` only (CONTRACT-12). True
defects of that backend, if any, are listed one id per line in
``backends/node/expected-failures.txt``; a listed id that passes fails the run (CONTRACT-18).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from tests.integration.certify_command import assert_certified

PROJECT = Path(__file__).resolve().parents[2]
BACKEND = PROJECT / "backends" / "node" / "memspec_backend.js"
EXPECTED_FAILURES = PROJECT / "backends" / "node" / "expected-failures.txt"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None,
    reason="node is not on PATH: the Node.js backend (backends/node) cannot be started",
)


def test_node_backend_is_certified() -> None:
    # A relative path, as a user types it in the project folder.
    command = f"node {shlex.quote(str(BACKEND.relative_to(PROJECT)))}"
    assert_certified(command, EXPECTED_FAILURES)


def test_node_names_an_unknown_batch_item_member_as_one_to_drop(tmp_path: Path) -> None:
    # TOOL-6: the same words as the reference: the member to drop, not a member to send.
    import json

    from memspec.conformance.transport.jsonlines import CommandBackend

    session = CommandBackend(f"node {BACKEND}", timeout=30).open(tmp_path, {})
    try:
        session.request("load")
        text = json.dumps({"target": "memory", "operations": [
            {"action": "remove", "old_text": "a", "matched_entry": "a"}]})  # fmt: skip
        result = json.loads(session.request("tool_call", arguments=text)["result"])
    finally:
        session.close()
    assert result["success"] is False
    assert result["error"].startswith("operations[0]: unknown member 'matched_entry'; drop it.")
