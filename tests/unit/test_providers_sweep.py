"""The sweep of real providers (``tests/providers_sweep.py``) on a report of its own making: what
fails is read from the report's checks, a failing clause without its note and a note whose
clause passes are both for a person to settle, and the page shows each note beside its
failure."""

from __future__ import annotations

from typing import Any

import pytest

from tests import providers_sweep
from tests.providers_sweep import Outcome, Subject, render_page, unsettled

SUBJECT = Subject("demo", "demo-provider 1.0", "`--package`", package="demo-provider==1.0")


def report(failing: dict[str, str]) -> dict[str, Any]:
    checks = [
        {
            "id": f"PLUGIN/check-{clause}",
            "status": "failed",
            "blamed": clause,
            "reason": f"{clause}: {why}\n\nmore",
            "failures": [],
            "figures": {"initialize_s": 0.25},
        }
        for clause, why in failing.items()
    ]
    clauses = [
        {"clause": c, "status": "fail" if c in failing else "pass", "why": []}
        for c in ("PLUGIN-9", "PLUGIN-11")
    ]
    clauses.append({"clause": "PLUGIN-12", "status": "unchecked", "why": []})
    return {
        "run": {"name": "demo", "features": ["recall"]},
        "summary": {"passed": 1, "failed": len(failing)},
        "level": {"name": "safe"},
        "checks": checks,
        "clauses": clauses,
    }


def test_failures_notes_and_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome = Outcome(SUBJECT, 1, 12.0, "", report({"PLUGIN-11": "sync_turn() raised"}))
    assert outcome.failing == {"PLUGIN-11": "sync_turn() raised"}
    assert outcome.unjudged == {"PLUGIN-12": "unchecked: not judged"}
    assert outcome.figure("initialize_s") == 0.25
    monkeypatch.setattr(providers_sweep, "NOTES", {})
    assert unsettled([outcome]) == ["demo: PLUGIN-11 fails, no note"]
    notes = {("demo", "PLUGIN-11"): "demo.py:7 takes no messages.", ("demo", "PLUGIN-9"): "x"}
    monkeypatch.setattr(providers_sweep, "NOTES", notes)
    # a note whose clause passes is stale: the code or the judge changed
    assert unsettled([outcome]) == ["demo: the note on PLUGIN-9 is stale (it no longer fails)"]
    page = render_page([outcome], "ci")
    assert "| demo-provider 1.0 | safe | 1 | 1 | 1 | PLUGIN-11 | 0.25 s |" in page
    assert "- **PLUGIN-11** fails: sync_turn() raised\n  demo.py:7 takes no messages." in page
    # each provider not certified yet says why
    for package, why in providers_sweep.NOT_YET:
        assert f"| {package} | {why} |" in page
    # a subject that left no report is said so, never read as passing
    lost = Outcome(SUBJECT, None, 0.0, "timed out")
    assert unsettled([lost]) == ["demo: no report (timed out)"]


def test_a_rendered_run_keeps_the_date_and_machine_it_was_certified_on(tmp_path) -> None:
    import datetime as dt

    from memspec.conformance.core.results_page import PageRun

    certified = PageRun("python -m tests.providers_sweep --out X", dt.date(2026, 12, 1), "M 11.5")
    providers_sweep.save_run([Outcome(SUBJECT, 1, 30.0, "", report({}))], tmp_path, certified)
    rendering = PageRun("python -m tests.providers_sweep --from X", dt.date(2026, 12, 6), "M 0.4")
    stamped = providers_sweep.rendered_from(tmp_path, rendering)
    assert (stamped.command, stamped.date, stamped.machine) == (
        rendering.command,
        certified.date,
        certified.machine,
    )
    (tmp_path / "run.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"run\.json"):
        providers_sweep.rendered_from(tmp_path, rendering)
    (tmp_path / "run.json").unlink()
    assert providers_sweep.rendered_from(tmp_path, rendering) is rendering


def test_a_run_with_some_subjects_adds_to_the_run_kept_there(tmp_path) -> None:
    import datetime as dt

    from memspec.conformance.core.results_page import PageRun

    run = PageRun("python -m tests.providers_sweep --out X", dt.date(2026, 12, 1), "M")
    other = Subject("other", "other-provider 2.0", "`--package`", package="other-provider==2.0")
    providers_sweep.save_run([Outcome(SUBJECT, 1, 30.0, "", report({}))], tmp_path, run)
    providers_sweep.save_run([Outcome(other, 0, 12.0, "", report({}))], tmp_path, run)
    read = providers_sweep.read_run(tmp_path, (SUBJECT, other))
    assert [(o.subject.key, o.status, o.wall) for o in read] == [
        ("demo", 1, 30.0),
        ("other", 0, 12.0),
    ]


def test_a_subject_built_with_its_own_python(tmp_path) -> None:
    import sys
    import venv
    from pathlib import Path

    from memspec.spec.errors import UsageError

    # its interpreter is given to memspec provider, which builds the environment with it
    own = Subject("own", "own 1.0", "`--package`", package="own==1.0", python="/usr/bin/python3")
    arguments = providers_sweep.certify_arguments(own, Path(sys.executable), tmp_path)
    assert arguments == ["--package", "own==1.0", "--python", "/usr/bin/python3"]
    assert providers_sweep.certify_arguments(SUBJECT, Path(sys.executable), tmp_path) == [
        "--package",
        "demo-provider==1.0",
    ]
    # an environment of the cache built with another interpreter is said, never used
    venv.create(tmp_path / "env", with_pip=False)
    built = tmp_path / "env" / "bin" / "python"
    providers_sweep.built_with(built, sys.executable)
    other = tmp_path / "other-python"
    other.write_text("#!/bin/sh\necho /elsewhere\n", encoding="utf-8")
    other.chmod(0o755)
    with pytest.raises(UsageError, match=r"was built with the Python of .*, not .*other-python"):
        providers_sweep.built_with(built, str(other))
