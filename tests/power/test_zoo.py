"""Every zoo member (``tests/zoo.py``) fails on its own clause ids, and the zoo command reports it.

A member that a power test already asserts (``test_checks_power.py``,
``test_process_checks.py``, ``test_fuzz_power.py`` beside this file) is not run again here: this
file checks that the power test asserts the zoo's proof on one of the zoo's clauses. Every other
member runs its proof — a SPEC.md example or a named check, at the ``ci`` profile — and must fail
it on one of its clauses. The whole-harness detection table is the command's job
(``python -m tests.zoo``); here it runs on two members with one check each, to keep CI short.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
from memspec.conformance.examples.probes import run_on_backend
from memspec.conformance.transport.backend import BackendDefect, InProcessBackend
from memspec.conformance.verdict.findings import Kind, verdict_of
from memspec.conformance.verdict.records import CheckRecord
from memspec.spec.clauses import parse_clauses
from memspec.spec.document import installed_spec
from tests.budgeted import run_in_budget
from tests.power import test_agent_power, test_checks_power, test_fuzz_power, test_process_checks
from tests.zoo import (
    AGENT,
    AREAS,
    NAIVE,
    PROCS,
    ZOO,
    Detection,
    Member,
    blamed_clauses,
    catch_rate,
    certify_member,
    main,
    render_beyond,
    render_table,
)

EXAMPLES = {example.id: example for example in list(installed_spec().examples)}
CHECKS = all_checks()


def asserted_elsewhere() -> dict[tuple[str, str], str]:
    """(backend, check) -> the clause prefix a power test asserts its failure opens with."""
    found = {(f"{NAIVE}:{v}", check): c for v, check, c in test_checks_power.CAUGHT}
    found |= {(f"{PROCS}:{f}", check): c for f, check, c, _ in test_process_checks.CAUGHT}
    found |= {(backend, check): c for backend, check, c in test_fuzz_power.CAUGHT}
    found |= {(f"{AGENT}:{f}", check): c for f, check, c in test_agent_power.CAUGHT}
    return found


ELSEWHERE = asserted_elsewhere()
OWN = [m for m in ZOO if (m.backend, m.proof) not in ELSEWHERE]


def test_the_zoo_is_large_and_spans_every_area() -> None:
    assert len(ZOO) >= 30
    assert sorted({m.area for m in ZOO}) == sorted(AREAS)
    assert len({m.backend for m in ZOO}) == len(ZOO), "a backend is listed twice"
    stated = {clause.id for clause in parse_clauses(installed_spec().text)}
    for member in ZOO:
        assert set(member.clauses) <= stated, member
        assert member.proof in EXAMPLES or member.proof in CHECKS, member


def test_power_tests_assert_the_zoo_clauses() -> None:
    """A member proven by a power test is proven there on one of the zoo's clauses."""
    proven = [m for m in ZOO if (m.backend, m.proof) in ELSEWHERE]
    assert len(proven) >= 20
    for member in proven:
        prefix = ELSEWHERE[(member.backend, member.proof)]
        assert any(c.startswith(prefix) for c in member.clauses), (member, prefix)


def failure_clauses(member: Member, tmp_path: Path) -> tuple[str, ...]:
    """Runs the member's proof; returns the clauses its failure names (``()`` if it passed)."""
    backend = InProcessBackend(member.backend, 10.0)
    root = tmp_path / "root"
    root.mkdir()
    try:
        if member.proof in EXAMPLES:
            failure = run_on_backend(EXAMPLES[member.proof], backend, root)
            return failure.clauses if failure is not None else ()
        run_in_budget(CHECKS[member.proof], CheckContext(backend, root, tmp_path, PROFILES["ci"]))
    except (BackendDefect, AssertionError) as failure:
        verdict = verdict_of(failure)
        clauses = CHECKS[member.proof].clauses
        return blamed_clauses(CheckRecord("x", clauses, (), "failed", "", 0, **vars(verdict)))
    return ()


@pytest.mark.parametrize("member", OWN, ids=[m.name for m in OWN])
def test_member_fails_its_proof_on_its_clauses(member: Member, tmp_path: Path) -> None:
    named = failure_clauses(member, tmp_path)
    assert named, f"{member.backend} passed {member.proof}"
    assert set(named) & set(member.clauses), f"{member.backend}: {member.proof} named {named}"


def test_the_reference_passes_every_example_proof(tmp_path: Path) -> None:
    backend = InProcessBackend("memspec.reference_impl:open_store", 10.0)
    for index, proof in enumerate(sorted({m.proof for m in OWN if m.proof in EXAMPLES})):
        root = tmp_path / f"r{index}"
        root.mkdir()
        assert run_on_backend(EXAMPLES[proof], backend, root) is None, proof


@pytest.mark.parametrize(
    ("name", "checks", "first"),
    [
        ("stuck_when_full", "limit", ("LIMIT/limit-over-limit-file-from-others", ("LIMIT-4",))),
        # A backend that claims no core skips every core check: the claim check still runs.
        ("misnamed_core", "CONTRACT", ("CONTRACT/contract.claimed_features_are_known",
                                       ("CONTRACT-19",))),
    ],
)  # fmt: skip
def test_certify_catches_a_member(
    name: str, checks: str, first: tuple[str, tuple[str, ...]], tmp_path: Path
) -> None:
    """The command's certification path: the member is caught on its clause, in run order."""
    member = next(m for m in ZOO if m.name == name)
    found = certify_member(member, "smoke", tmp_path, checks=checks)
    assert found.verdict == "caught", (found.failures, found.note)
    assert found.failures[0] == first
    assert found.to_first_failure is not None and 0 < found.to_first_failure <= found.wall
    assert (tmp_path / name / "report.json").is_file()


def test_certify_passes_the_reference() -> None:
    reference = Member("memspec.reference_impl:open_store", "none", "none", ("LIMIT-4",), "-")
    passed = certify_member(reference, "smoke", None, checks="limit")
    assert passed.status == 0 and passed.verdict == "missed" and not passed.note


def test_the_table_and_the_rate() -> None:
    caught = Detection(ZOO[0], 1, [("FORMAT/x", ("FORMAT-4",)), ("LOCK/y", ("LOCK-3",))], 1.5)
    elsewhere = Detection(ZOO[1], 1, [("SNAP/z", ("SNAP-1",))], 0.2)
    missed = Detection(ZOO[2], 0)
    table = render_table([caught, elsewhere, missed], "ci")
    assert [caught.verdict, elsewhere.verdict, missed.verdict] == ["caught", "elsewhere", "missed"]
    assert "| **FORMAT-4**, LOCK-3 | 1 | `FORMAT/x` | 1.5 s |" in table
    assert table.endswith("caught on their own clauses: 1/3 (33.3 %); failed certification: 2/3; "
                          "profile ci")  # fmt: skip
    assert catch_rate([caught, missed]) == 0.5
    beyond = render_beyond([caught, elsewhere, missed])
    assert beyond.startswith("2 clause verdicts beyond the members' own over 3 members; 1 ")
    assert f"| `{ZOO[0].name}` | LOCK-3 | " in beyond


def test_blamed_clauses_follow_the_verdict() -> None:
    record = CheckRecord.from_json(
        {"id": "x", "status": "failed", "clauses": ["LOCK-1", "LOCK-3"], "kind": "violation",
         "blamed": "LOCK-3"}
    )  # fmt: skip
    assert blamed_clauses(record) == ("LOCK-3",)
    assert blamed_clauses(replace(record, blamed="")) == ("LOCK-1", "LOCK-3")
    assert blamed_clauses(replace(record, kind=Kind.DEFECT, blamed="")) == ("CONTRACT-6",)


def test_the_command_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-k", "no-such-member"]) == 2
    assert main(["--jobs", "0"]) == 2
    assert "error" in capsys.readouterr().err


def test_the_command_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "zoo.json"
    status = main(["-k", "trailing_newline", "--profile", "smoke", "--checks", "format",
                   "--json", str(out)])  # fmt: skip
    (record,) = json.loads(out.read_text(encoding="utf-8"))
    assert status == 0 and record["verdict"] == "caught" and record["to_first_failure"] > 0
    # The page again from the saved detections, certifying nothing.
    page = tmp_path / "zoo.md"
    again = main(["-k", "trailing_newline", "--from-json", str(out), "--page", str(page)])
    assert again == 0 and "`trailing_newline` | format |" in page.read_text(encoding="utf-8")
    assert main(["-k", "counts_bytes", "--from-json", str(out)]) == 2  # not in the file
