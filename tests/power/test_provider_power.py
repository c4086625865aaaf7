"""The PLUGIN checks can fail: each provider of ``tests/backends/providers_broken.py``, one
defect each, is certified with every check and fails its own clause and no other, while the sound
provider it is built from (``tests/backends/providers.py``) fails nothing and reaches ``full``.
Run in the environment of hermes-agent 0.19.0 (skipped, with the reason, where it cannot be
built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memspec.conformance.commands.certify import CertifyResult, run_certification, settings_for
from memspec.conformance.verdict.standing import clause_verdict
from tests.hermes_env import PROJECT, provider_cmd

BROKEN = {
    "HangsInPrefetch": "PLUGIN-9",
    "RaisesInSyncTurn": "PLUGIN-11",
    "FencesItsRecall": "PLUGIN-10",
    "WritesOutsideHome": "PLUGIN-7",
    "TakesACoreToolName": "PLUGIN-4",
    "AnswersPlainText": "PLUGIN-5",
    "WritesInEveryContext": "PLUGIN-8",
    "WritesThroughAnOpenFile": "PLUGIN-8",
    "LoosensItsFiles": "PLUGIN-8",
    "HangsInShutdown": "PLUGIN-17",
    "LeavesAThread": "PLUGIN-18",
    "ForgetsTurns": "PLUGIN-13",
    "ChecksTheNetwork": "PLUGIN-3",
}
"""Each broken provider, by class name, and the one clause it must fail."""


WAITING = {"HangsInPrefetch", "HangsInShutdown"}
"""Providers whose checks spend their time waiting out a hook's budget (every check's session
ends with the hung call): their checks run four at a time, the waits side by side."""


def certified(target: str, report: Path) -> CertifyResult:
    workers = 4 if target.rpartition(":")[2] in WAITING else None
    settings = settings_for(
        base=PROJECT, provider_cmd=provider_cmd(target), profile="ci", report=report, quiet=True,
        workers=workers,
    )  # fmt: skip
    return run_certification(settings)


def failing(result: CertifyResult) -> set[str]:
    return {
        clause.id
        for clause in result.spec.clauses
        if clause_verdict(clause, result.records, result.claimed).status == "fail"
    }


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_provider_fails_its_own_clause_alone(name: str, tmp_path: Path) -> None:
    result = certified(f"tests.backends.providers_broken:{name}", tmp_path)
    assert result.status == 1, result.summary + result.output[-3000:]
    assert failing(result) == {BROKEN[name]}, result.summary
    # every check ran: a provider's run is the PLUGIN checks, no example and no store check
    assert {r.id.split("/")[0] for r in result.records} == {"PLUGIN"}
    assert len(result.records) == 18


def test_the_sound_provider_passes_every_clause(tmp_path: Path) -> None:
    result = certified("tests.backends.providers:FileProvider", tmp_path)
    assert result.status == 0, result.summary + result.output[-3000:]
    assert result.counts["passed"] == 18 and not failing(result)
    assert result.level.name == "full"
    assert result.claimed == frozenset({"provider-tools", "recall", "mirror"})
