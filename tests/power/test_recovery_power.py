"""Spec v2, issue 15 items 2 and 3, proven on backends: the recovery checks pass on correct
stores, and each backend broken on purpose against the new rules (``tests/backends/
naive_broken.py``, section drift) is caught on its clause — the spec v1 drift guard that refuses
the repairing remove (DRIFT-7), a repair of a foreign file without a backup (DRIFT-2), an ``OK``
that never names its backup (DRIFT-5), and a store with no drift guard that claims none, which
fails DRIFT-5 through certification, with hermes-agent #26045 named, instead of skipping it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memspec
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.examples.probes import run_on_backend
from memspec.conformance.transport.backend import Backend, InProcessBackend
from memspec.spec.document import installed_spec
from tests.budgeted import run_in_budget
from tests.power.test_checks_power import assert_fails_on

BROKEN = "tests.backends.naive_broken"
EXAMPLES = {example.id: example for example in list(installed_spec().examples)}
CHECKS = all_checks()


def run_check(check_id: str, backend: Backend | str, tmp_path: Path) -> None:
    """Runs one named check directly, at the ci profile, on a fresh root."""
    if isinstance(backend, str):
        backend = InProcessBackend(backend, 30.0)
    root = tmp_path / "root"
    root.mkdir()
    run_in_budget(CHECKS[check_id], CheckContext(backend, root, tmp_path, PROFILES["ci"]))


RECOVERY_CHECKS = [
    "recovery.lowered_limit_is_recoverable",
    "recovery.unreadable_file_says_how_to_repair",
]


@pytest.mark.parametrize("check_id", RECOVERY_CHECKS)
@pytest.mark.parametrize(
    "backend",
    ["memspec.reference_impl:open_store", "tests.backends.naive:open_store",
     f"{BROKEN}:no_drift_guard_keeps_bytes"],
)  # fmt: skip
def test_correct_stores_pass_the_recovery_checks(
    check_id: str, backend: str, tmp_path: Path
) -> None:
    run_check(check_id, backend, tmp_path)


# --- item 2 and 3: backends broken on purpose ------------------------------------------------

CAUGHT = [
    ("refuses_repair_on_foreign", "recovery.lowered_limit_is_recoverable", "DRIFT-7"),
    ("refuses_repair_on_foreign", "drift_properties.external_edits_are_kept", "DRIFT-7"),
    ("rewrites_foreign_without_backup", "recovery.lowered_limit_is_recoverable", "DRIFT-2"),
    ("rewrites_foreign_without_backup", "drift_properties.external_edits_are_kept", "DRIFT-2"),
    ("backup_not_named", "drift.external_bytes_survive_rewrite", "DRIFT-5"),
    ("backup_not_named", "recovery.lowered_limit_is_recoverable", "DRIFT-2"),
    ("no_drift_guard", "drift.external_bytes_survive_rewrite", "DRIFT-5"),
    ("no_drift_guard", "drift_properties.external_edits_are_kept", "DRIFT-5"),
]


@pytest.mark.parametrize(("factory", "check_id", "clause"), CAUGHT)
def test_a_broken_backend_is_caught_on_its_clause(
    factory: str, check_id: str, clause: str, tmp_path: Path
) -> None:
    assert_fails_on(f"{clause}:", check_id, f"{BROKEN}:{factory}", tmp_path)


@pytest.mark.parametrize(
    ("factory", "example", "clauses"),
    [
        ("refuses_repair_on_foreign", "drift-limit-lowered-below-the-file", ("DRIFT-7",)),
        ("rewrites_foreign_without_backup", "drift-pasted-entry-removed-with-a-backup",
         ("DRIFT-5", "DRIFT-7")),
        ("refuses_repair_on_foreign", "scan-placeholder-advice-followed", ("SCAN-7", "DRIFT-2")),
    ],
)  # fmt: skip
def test_a_broken_backend_fails_the_recovery_examples(
    factory: str, example: str, clauses: tuple[str, ...], tmp_path: Path
) -> None:
    failure = run_on_backend(EXAMPLES[example], InProcessBackend(f"{BROKEN}:{factory}"), tmp_path)
    assert failure is not None and failure.clauses == clauses


def test_a_backend_without_the_mechanism_fails_and_never_skips(tmp_path: Path) -> None:
    """Certified through the plugin, a backend that claims no drift guard and keeps no backup
    fails DRIFT-5 with hermes-agent #26045 named: the check needs no feature (item 3)."""
    result = memspec.certify(
        f"{BROKEN}:no_drift_guard", profile="smoke", select="external_bytes", report=tmp_path
    )
    (record,) = result.records
    assert "drift-guard" not in InProcessBackend(f"{BROKEN}:no_drift_guard").open(tmp_path).features
    assert (record.status, record.blamed) == ("failed", "DRIFT-5")
    assert "hermes-agent #26045" in record.reason
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    row = next(row for row in report["clauses"] if row["clause"] == "DRIFT-5")
    assert row["status"] == "fail"
