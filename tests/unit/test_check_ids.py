"""Check ids, their clauses and features, and the suite's test ids do not change by accident.

Users write check ids in expected-failures files and ``-k``; the ids key the Hypothesis example
database and the repro commands. ``tests/data/check_ids.json`` is the list as it stands; a check
added, removed or renamed on purpose updates it in the same commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memspec.conformance.core.registry import CHECKS, all_checks, check

RECORDED = Path(__file__).parents[1] / "data" / "check_ids.json"


def _area(clauses: tuple[str, ...]) -> str:
    return clauses[0].rsplit("-", 1)[0]


def test_registered_checks_are_the_recorded_ones() -> None:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    registered = {
        name: {
            "test_id": f"{_area(item.clauses)}/{name}",
            "clauses": list(item.clauses),
            "features": list(item.features),
        }
        for name, item in all_checks().items()
    }
    assert sorted(registered) == sorted(recorded)
    assert registered == recorded
    assert all(item.id == name for name, item in all_checks().items())


def test_suite_test_ids_are_area_and_check_id() -> None:
    from memspec.conformance.suite import test_conformance

    params = test_conformance._check_params()
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    assert sorted(param.id for param in params) == sorted(v["test_id"] for v in recorded.values())


def test_a_check_needs_a_well_formed_id() -> None:
    with pytest.raises(TypeError):
        check("READ-7")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"group\.name"):
        check("READ-7", id="no dot")
    name = next(iter(all_checks()))
    with pytest.raises(ValueError, match="registered twice"):
        check("READ-7", id=name)(lambda ctx: None)
    assert CHECKS[name].id == name


def test_a_check_module_that_fails_to_import_is_a_harness_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib import metadata

    from memspec.conformance.core import registry

    broken = metadata.EntryPoint("broken", "memspec.conformance.no_such_module", "memspec.checks")
    home = metadata.EntryPoint("conformance", registry.HOME_MODULE, "memspec.checks")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [home, broken])
    with pytest.raises(registry.HarnessError, match=r"memspec\.conformance\.no_such_module"):
        registry.all_checks()
    monkeypatch.setattr(metadata, "entry_points", lambda group: [])
    with pytest.raises(registry.HarnessError, match="reinstall"):
        registry.all_checks()


def test_every_check_lives_in_the_module_its_id_names() -> None:
    """``area.name`` is defined in a module called ``area`` (of ``conformance/checks`` or of
    ``fuzz``), so that a reader finds a check from its id."""
    from memspec.conformance.core import registry

    misplaced = {
        check_id: check.function.__module__
        for check_id, check in registry.all_checks().items()
        if check.function.__module__.rsplit(".", 1)[-1] != check_id.split(".")[0]
    }
    assert not misplaced, misplaced


def test_a_retired_id_names_a_registered_check_and_keeps_its_expected_failures(
    tmp_path: Path,
) -> None:
    from memspec.conformance.core.registry import RETIRED_IDS
    from memspec.conformance.core.settings import read_expected_failures

    checks = all_checks()
    assert RETIRED_IDS
    assert all(old not in checks and new in checks for old, new in RETIRED_IDS.items())
    listed = tmp_path / "expected.txt"
    listed.write_text("fence.arbitrary_recalled_text  # a known FENCE-2 gap\nREAD-7\n", "utf-8")
    assert read_expected_failures(listed) == {"properties.fence_escape", "READ-7"}
