"""Saved runs for the tests of memspec's HTML: a certification report written by the one report
writer, and a results directory holding the JSON each results command saves. The records are
made as the plugin makes them (a finding's verdict, an example's evidence), so the pages are
rendered from the same model as a real run's; none of it is a verdict the tests expect."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import cast

from memspec.conformance.core.results_page import stamp
from memspec.conformance.hermes.matrix import Column, Matrix, RunRecord, matrix_json
from memspec.conformance.verdict.findings import Evidence, Mismatch, Violation, verdict_of
from memspec.conformance.verdict.records import CheckRecord, RunInfo, Status
from memspec.conformance.verdict.report import write_reports
from memspec.spec.document import installed_spec

INFO = RunInfo("b:open", "b", "1", ("core",), "ci", None, "linux", "3.11", "ext4", "0", "2")
FEATURES = ("mirror", "provider-tools", "recall")
PROVIDER_INFO = RunInfo("provider holographic", "holographic", "", FEATURES, "ci", None, "linux",
                        "3.11", "ext4", "0", "2")  # fmt: skip
HOSTILE = "</pre><script>alert('owned')</script><img src=x onerror=alert(1)>"
"""A backend's answer that would run a script if a page did not escape it."""
TURN = "sync_turn() of turn 1 raised TypeError: unexpected keyword argument 'messages'"
SLOW = "is_available() took 2.5 s; its budget is 1 s"
"""What the sample provider's two failing checks found."""
WANT, GOT = "User prefers tabs", "\ufeffUser prefers tabs"
"""The file an example expects, and what a backend that writes a byte order mark wrote."""


def failed(check: str, clauses: tuple[str, ...], error: Exception, message: str) -> CheckRecord:
    """Returns the record of a check that raised ``error``, its verdict as the plugin reads it."""
    verdict = verdict_of(error)
    return CheckRecord(check, clauses, ("core",), Status.FAILED, message, 0.1, {}, **vars(verdict))


def passed(check: str, clauses: tuple[str, ...]) -> CheckRecord:
    """Returns the record of a check that passed."""
    return CheckRecord(check, clauses, ("core",), Status.PASSED, "", 0.1)


def example_failure() -> CheckRecord:
    """Returns an example that failed FORMAT-4: the file holds a byte order mark."""
    evidence = Evidence.of('add memory "User prefers tabs"', {"op": "add"}, GOT, WANT)
    message = "example format-canonical: the file differs"
    error = Mismatch(message, "MEMORY.md differs", ["FORMAT-4"], evidence=evidence)
    return failed("FORMAT/format-canonical", ("FORMAT-4",), error, message)


def sample_records() -> list[CheckRecord]:
    """Returns a run's records: every clause of SPEC.md passed by a check of its own, but
    FORMAT-4 (an example's difference) and READ-7 (a message holding markup), which fail."""
    records = [example_failure()]
    records.append(failed("READ/hostile", ("READ-7",), Violation("READ-7", HOSTILE), HOSTILE))
    records += [
        passed(f"{clause.area}/{clause.id.lower()}", (clause.id,))
        for clause in installed_spec().clauses
        if clause.id not in ("FORMAT-4", "READ-7")
    ]
    return records


def sample_report(directory: Path) -> Path:
    """Returns ``report.html`` after writing the reports of :func:`sample_records` to
    ``directory`` with the one report writer."""
    write_reports(directory, INFO, sample_records())
    return directory / "report.html"


def sample_providers_run(directory: Path) -> Path:
    """Returns ``directory`` after writing a run of the providers sweep into it as ``--out``
    keeps one (``sweep.json`` and each subject's reports, written by the one report writer):
    holographic fails PLUGIN-11 (which the sweep's notes argue) and PLUGIN-3 (which they do
    not) and passes every other clause; hermes-local-memory timed out, leaving no report."""
    spec = installed_spec().of_subject("provider")
    records = [
        failed("PLUGIN/sync_turn", ("PLUGIN-11",), Violation("PLUGIN-11", TURN), TURN),
        failed("PLUGIN/available", ("PLUGIN-3",), Violation("PLUGIN-3", SLOW), SLOW),
    ]
    records += [
        passed(f"PLUGIN/{clause.id.lower()}", (clause.id,))
        for clause in spec.clauses
        if clause.id not in ("PLUGIN-11", "PLUGIN-3")
    ]
    write_reports(directory / "holographic", PROVIDER_INFO, records, spec)
    kept = {
        "holographic": {"status": 1, "wall": 46.0, "output": ""},
        "local-memory": {"status": None, "wall": 3600.0, "output": "timed out"},
    }
    (directory / "sweep.json").write_text(json.dumps(kept), encoding="utf-8")
    return directory


def sample_results(directory: Path) -> Path:
    """Returns ``directory`` after writing a results directory into it: the matrix of two
    backends (the sample run, and one that fails nothing) as ``matrix --json`` saves it, a zoo,
    the providers sweep of :func:`sample_providers_run` and benchmark figures as their commands
    save them, each beside a stamped Markdown page."""
    from tests import providers_sweep

    directory.mkdir(parents=True, exist_ok=True)
    clean = [r if r.status == Status.PASSED else passed(r.id, r.clauses) for r in sample_records()]
    run = cast(RunRecord, {"backend": "b", "name": "b", "features": ["core"], "profile": "ci"})
    columns = [
        Column("sample 1", run, tuple(sample_records())),
        Column("clean 1", run, tuple(clean)),
    ]
    saved = matrix_json(Matrix.build(columns), "The clause matrix")
    (directory / "matrix.json").write_text(json.dumps(saved), encoding="utf-8")
    zoo = [
        {"backend": "tests.backends.wrappers:bom", "area": "format", "clauses": ["FORMAT-4"],
         "verdict": "caught", "failures": [["FORMAT/x", ["FORMAT-4"]]], "to_first_failure": 2.5,
         "wall": 40.0, "status": 1, "note": ""},
        {"backend": "tests.backends.wrappers:slow", "area": "lock", "clauses": ["LOCK-3"],
         "verdict": "caught", "failures": [["LOCK/x", ["LOCK-3"]]], "to_first_failure": 31.0,
         "wall": 90.0, "status": 1, "note": ""},
    ]  # fmt: skip
    (directory / "zoo.json").write_text(json.dumps(zoo), encoding="utf-8")
    lin = {"mutations": 40, "samples": 80, "cheap": 0.02, "linearizability": 0.4, "total": 0.5}
    figures = {
        "cpus": 2, "load": 0.5,
        "ops": {"reference, in-process": {"ops_per_s": 1486, "ms_per_op": 0.67,
                "cpu_ms_per_op": 0.32, "add_per_s": 1462, "replace_per_s": 1462,
                "remove_per_s": 1537}},
        "fsync": {"file_ms": 0.3, "file_dir_ms": 0.5, "atomic_ms": 0.6, "reference_ms": 0.67},
        "certify": {"smoke": {"seconds": 40.0, "summary": "198 passed", "status": 0}},
        "lin": {"4x25": lin},
    }  # fmt: skip
    (directory / "benchmarks.json").write_text(json.dumps(figures), encoding="utf-8")
    kept = providers_sweep.read_run(
        sample_providers_run(directory / "providers-run"), providers_sweep.SUBJECTS
    )
    saved_run = providers_sweep.run_json(kept, "ci")
    (directory / "providers.json").write_text(json.dumps(saved_run), encoding="utf-8")
    for name in ("matrix", "zoo", "benchmarks", "sweep", "providers"):
        block = stamp(f"memspec {name} --page docs/results/{name}.md", dt.date(2026, 12, 1), "M")
        (directory / f"{name}.md").write_text(f"# {name}\n\n{block}\nbody\n", encoding="utf-8")
    return directory
