"""Real Hermes releases as backends: the adapter, the cached environments, matrix and timeline.

The adapter's mapping and feature detection are tested on fakes (no network); the adapter
process is run against a fake ``tools.memory_tool`` to prove that Hermes' exceptions end the
session as defects and that an unknown answer is an adapter gap, never a guessed code. A real
release from the package index is certified in ``tests/integration/test_hermes_release.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes import adapter as hermes_adapter
from memspec.conformance.hermes.matrix import (
    Column,
    Matrix,
    render_html,
    render_markdown,
    render_timeline_markdown,
    timeline,
)
from memspec.conformance.hermes.releases import Release, versions_between
from memspec.conformance.verdict.standing import ClauseVerdict, clause_verdict
from memspec.spec.errors import UsageError

PROJECT = Path(__file__).resolve().parents[2]
REFERENCE = "memspec.reference_impl:open_store"

# Refusal texts of the released memory tools (hermes-agent 0.13.0 to 0.19.0, async 0.20.x).
REFUSALS = [
    ("Invalid target 'notes'. Use 'memory' or 'user'.", "E_TARGET"),
    ("Blocked: content matches threat pattern 'prompt_injection'. Content is ...", "E_THREAT"),
    ("Operation 2: Blocked: content contains invisible unicode character U+200B", "E_THREAT"),
    ("Content cannot be empty.", "E_EMPTY"),
    ("Content is required for 'add' action.", "E_EMPTY"),
    ("'remove' needs old_text -- a short unique substring of the entry", "E_EMPTY"),
    ("operations list is empty.", "E_EMPTY"),
    ("Operation 1 (add): content is required. No operations were applied", "E_EMPTY"),
    ("Unknown action ''. Use: add, replace, remove", "E_INVALID"),
    ("Operation 3 (merge): unknown action. Use add, replace, or remove.", "E_INVALID"),
    ("No entry matched 'tabs'. Check current_entries below and retry", "E_NOMATCH"),
    ("Operation 1 (remove): no entry matched 'x'. No operations were applied", "E_NOMATCH"),
    ("Multiple entries matched 'User'. Be more specific.", "E_AMBIGUOUS"),
    ("Operation 1 (replace): 'a' matched multiple distinct entries -- be more", "E_AMBIGUOUS"),
    ("Memory at 2,190/2,200 chars. Adding this entry (30 chars) would exceed", "E_LIMIT"),
    ("Replacement would put memory at 18/10 chars. Shorten the new content", "E_LIMIT"),
    ("After applying all 2 operations, memory would be at 50/40 chars", "E_LIMIT"),
    ("Refusing to write MEMORY.md: file on disk has content that wouldn't", "E_DRIFT"),
    ("Refusing to write USER.md: the file exists on disk but could not be read", "E_UNREADABLE"),
]


@pytest.mark.parametrize(("error", "code"), REFUSALS)
def test_every_hermes_refusal_maps_to_its_code(error: str, code: str) -> None:
    outcome = hermes_adapter.classify({"success": False, "error": error})
    # CONTRACT-4: each refusal answers its code, with ok false.
    assert (outcome["ok"], outcome["code"]) == (False, code)


def test_success_duplicate_matches_and_backup_are_carried() -> None:
    added = hermes_adapter.classify({"success": True, "message": "Entry added.", "usage": "1%"})
    duplicate = hermes_adapter.classify(
        {"success": True, "message": "Entry already exists (no duplicate added)."}
    )
    ambiguous = hermes_adapter.classify(
        {"success": False, "error": "Multiple entries matched 'a'.", "matches": ["ab", "ac"]}
    )
    drift = hermes_adapter.classify(
        {"success": False, "error": "Refusing to write MEMORY.md: file on disk has content",
         "drift_backup": "/r/MEMORY.md.bak.1"}
    )  # fmt: skip
    assert added == {"ok": True, "code": "OK", "message": "Entry added.", "usage": "1%"}
    assert duplicate["duplicate"] is True
    assert ambiguous["matches"] == ["ab", "ac"]
    assert drift["backup"] == "/r/MEMORY.md.bak.1"


@pytest.mark.parametrize(
    "result",
    [
        {"success": False, "error": "Memory consolidation failed 4 times this turn."},
        {"success": False},
        {"success": True, "staged": True, "pending_id": "x"},
    ],
)
def test_an_unknown_answer_is_an_adapter_gap(result: dict[str, Any]) -> None:
    # Never a guessed code: the adapter says it cannot map the answer.
    with pytest.raises(hermes_adapter.Unmapped):
        hermes_adapter.classify(result)


class _LockedRenamingStore:
    def _file_lock(self) -> None: ...

    def _detect_external_drift(self) -> None: ...

    def apply_batch(self) -> None: ...

    def add(self) -> None:
        _scan_memory_content = print
        _scan_memory_content()

    @staticmethod
    def _write_file(path: Path) -> None:
        tmp = str(path) + ".tmp"
        os.replace(tmp, path)


class _InPlaceStore:
    def add(self) -> None: ...

    @staticmethod
    def _write_file(path: Path) -> None:
        path.write_text("")


def _tool(action: str = "", operations: Any = None) -> str:
    return ""


def _tool_without_batch(action: str = "") -> str:
    return ""


def test_features_follow_the_mechanisms_the_release_has() -> None:
    full = hermes_adapter.detect_features(_LockedRenamingStore, _tool, fence=print)
    bare = hermes_adapter.detect_features(_InPlaceStore, _tool_without_batch, fence=None)
    # CONTRACT-19: a mechanism is claimed only where the release has it.
    assert full == [
        "core", "batch", "fence", "multi-process", "crash-safe", "drift-guard", "threat-scan"
    ]  # fmt: skip
    assert bare == ["core"]
    # No release fsyncs the directory, so durable is never claimed.
    assert "durable" not in full


def test_tool_is_claimed_only_where_the_agent_parses_argument_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before 0.19.0 the agent checks argument text inline and retries the model on invalid
    # JSON: no one result to serve, so no claim (a tool call would be an adapter gap).
    monkeypatch.setattr(hermes_adapter, "tool_schema", lambda module: {"name": "memory"})
    assert "tool" in hermes_adapter.detect_features(_InPlaceStore, _tool, None, parses=True)
    assert "tool" not in hermes_adapter.detect_features(_InPlaceStore, _tool, None, parses=False)


FAKE_TOOL = """
import json

def get_memory_dir():
    raise AssertionError("the adapter must point get_memory_dir at the session's root")

class MemoryStore:
    def __init__(self, memory_char_limit=2200, user_char_limit=1375):
        self.memory_entries, self.user_entries = [], []

    def load_from_disk(self):
        path = get_memory_dir() / "MEMORY.md"
        self.memory_entries = path.read_text().split("\\n§\\n") if path.exists() else []

    def format_for_system_prompt(self, target):
        return None

    def add(self, target, content):
        if content == "boom":
            raise RuntimeError("Failed to write memory file")
        if content == "odd":
            return {"success": False, "error": "Something this adapter has never seen"}
        self.memory_entries.append(content)
        (get_memory_dir() / "MEMORY.md").write_text("\\n§\\n".join(self.memory_entries))
        return {"success": True, "message": "Entry added."}

def memory_tool(action=None, target="memory", content=None, old_text=None, store=None):
    return json.dumps(store.add(target, content))
"""


def _serve_fake(tmp_path: Path, *contents: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    fake = tmp_path / "fake"
    (fake / "tools").mkdir(parents=True)
    (fake / "tools" / "__init__.py").write_text("")
    (fake / "tools" / "memory_tool.py").write_text(textwrap.dedent(FAKE_TOOL))
    root = tmp_path / "root"
    root.mkdir()
    lines = [{"id": 0, "op": "open", "root": str(root)}, {"id": 1, "op": "load"}]
    lines += [
        {"id": 2 + i, "op": "add", "target": "memory", "content": c} for i, c in enumerate(contents)
    ]
    lines.append({"id": 99, "op": "entries", "target": "memory"})
    result = subprocess.run(
        [sys.executable, str(Path(hermes_adapter.__file__))],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(fake)},
        check=False,
    )
    return result, root


def test_adapter_serves_the_memory_tool_on_the_root(tmp_path: Path) -> None:
    result, root = _serve_fake(tmp_path, "User prefers tabs")
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0, result.stderr
    # CONTRACT-13: features follow the fake's mechanisms (none), ids are echoed.
    assert answers[0]["features"] == ["core"]
    assert answers[2] == {"id": 2, "ok": True, "code": "OK", "message": "Entry added."}
    assert answers[-1]["entries"] == ["User prefers tabs"]
    assert (root / "MEMORY.md").read_text() == "User prefers tabs"


def test_an_exception_escaping_hermes_is_a_defect(tmp_path: Path) -> None:
    result, _ = _serve_fake(tmp_path, "boom", "never reached")
    # CONTRACT-6: the session ends without answering; stderr has the traceback.
    assert result.returncode == hermes_adapter.EXIT_DEFECT
    assert len(result.stdout.splitlines()) == 2
    assert "RuntimeError: Failed to write memory file" in result.stderr


def test_an_unknown_refusal_stops_the_adapter(tmp_path: Path) -> None:
    result, _ = _serve_fake(tmp_path, "odd")
    assert result.returncode == hermes_adapter.EXIT_ADAPTER_GAP
    assert "ADAPTER GAP" in result.stderr and "never seen" in result.stderr


def test_release_and_cache_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="must be a distribution name"):
        Release("hermes agent", "0.19.0")
    with pytest.raises(UsageError, match="expected a version"):
        Release("hermes-agent", "0.19; rm")
    monkeypatch.setenv("MEMSPEC_CACHE_DIR", str(tmp_path / "a"))
    assert cache_dir() == tmp_path / "a"
    assert cache_dir(str(tmp_path / "b")) == tmp_path / "b"
    monkeypatch.delenv("MEMSPEC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "memspec"
    versions = ["0.9.0", "0.13.0", "0.15.10", "0.15.2", "0.19.0", "0.20.0"]
    assert versions_between(versions, "0.13.0", "0.19.0") == [
        "0.13.0",
        "0.15.2",
        "0.15.10",
        "0.19.0",
    ]


def _check(cid: str, clauses: list[str], status: str, message: str = "", **extra: Any) -> Any:
    return {"id": cid, "clauses": clauses, "status": status, "message": message, **extra}


def _report(directory: Path, features: list[str], checks: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True)
    run = {"backend": "b", "name": directory.name, "version": "1", "features": features}
    payload = {"run": {**run, "profile": "smoke"}, "checks": checks}
    (directory / "report.json").write_text(json.dumps(payload))
    return directory


SKIP_FEATURE = "needs feature drift-guard, which the backend does not claim"
SKIP_PYTHON = "needs a Python backend (--backend MODULE:FACTORY): it runs ..."


def test_a_clause_never_passes_when_its_mechanism_is_missing(tmp_path: Path) -> None:
    column = Column.load(
        _report(
            tmp_path / "r",
            ["core"],
            [
                _check("DRIFT/example", ["DRIFT-5"], "passed"),
                _check(
                    "DRIFT/drift.check",
                    ["DRIFT-5"],
                    "skipped",
                    SKIP_FEATURE,
                    kind="unsupported",
                    missing_features=["drift-guard"],
                ),
                _check("ATOMIC/example", ["ATOMIC-4"], "passed"),
                _check("ATOMIC/faults", ["ATOMIC-4"], "skipped", SKIP_PYTHON, kind="unsupported"),
            ],
        )
    )
    # CONTRACT-20: a feature skip demotes the clause; an interposition skip does not.
    assert clause_verdict("DRIFT-5", column.checks).status == "skip"
    assert "drift-guard" in clause_verdict("DRIFT-5", column.checks).reason
    assert clause_verdict("ATOMIC-4", column.checks).reason == "1 of 2 checks skipped"
    assert clause_verdict("FENCE-6", column.checks).status == "n/a"


MACHINE_FAILURE = "[gw0] linux\nx.py:1: in run\nE   AssertionError: DRIFT-5: rewrote\n"
EXAMPLE_FAILURE = "E   AssertionError: example batch-empty (BATCH-5), SPEC.md line 1\n"
EXAMPLE_REASON = 'example batch-empty: batch "memory" [] → expected code E_EMPTY, got E_INVALID'


def test_failures_are_attributed_and_explained(tmp_path: Path) -> None:
    checks = [
        _check("CONTRACT/machine", ["CONTRACT-8", "DRIFT-5"], "failed", MACHINE_FAILURE,
               kind="violation", blamed="DRIFT-5", reason="DRIFT-5: rewrote"),
        _check("CONTRACT/example", ["CONTRACT-8"], "passed"),
        _check("BATCH/batch-empty", ["BATCH-5"], "failed", EXAMPLE_FAILURE,
               kind="violation", reason=EXAMPLE_REASON),
        _check("LIMIT/property", ["LIMIT-1"], "failed", "E   BackendDefect: exited",
               kind="defect", blamed="CONTRACT-6", reason="backend defect: exited"),
        _check("SCAN/scan.x", ["SCAN-5"], "failed", "E   TypeError: oops",
               kind="harness-error", reason="TypeError: oops"),
        _check("SCAN/example", ["SCAN-5"], "passed"),
        _check("READ/old", ["READ-1"], "failed", "E   AssertionError: READ-1: glued\nmore"),
    ]  # fmt: skip
    column = Column.load(_report(tmp_path / "r", ["core", "batch", "threat-scan"], checks))
    # A failure blames the clause its verdict names, not every clause its check cites.
    assert clause_verdict("DRIFT-5", column.checks).status == "fail"
    assert clause_verdict("CONTRACT-8", column.checks).status == "pass"
    assert "stopped on DRIFT-5" in clause_verdict("CONTRACT-8", column.checks).reason
    # A named check stopped by a crash blames CONTRACT-6, not the clauses it was exploring.
    assert clause_verdict("LIMIT-1", column.checks) == ClauseVerdict(
        "skip", "not verified: LIMIT/property stopped on CONTRACT-6", ("LIMIT/property",)
    )
    assert clause_verdict("BATCH-5", column.checks).reason == f"BATCH/batch-empty: {EXAMPLE_REASON}"
    # A harness error is never a failure of the backend.
    assert clause_verdict("SCAN-5", column.checks).status == "pass"
    scan = clause_verdict("SCAN-5", column.checks)
    assert "SCAN/scan.x stopped on a harness error" in scan.reason
    # A report of an older memspec, with no verdict fields, blames every cited clause.
    assert clause_verdict("READ-1", column.checks).status == "fail"
    assert clause_verdict("READ-1", column.checks).reason.endswith("AssertionError: READ-1: glued")


def test_matrix_pages_and_timeline(tmp_path: Path) -> None:
    old = _report(tmp_path / "0.13.0", ["core"], [_check("READ/x", ["READ-6"], "passed")])
    new = _report(
        tmp_path / "0.15.0", ["core"], [_check("READ/x", ["READ-6"], "failed", EXAMPLE_FAILURE)]
    )
    matrix = Matrix.build([Column.load(old, "0.13.0"), Column.load(new, "0.15.0")])
    changes = timeline(matrix)
    assert [(c.clause, c.release, c.before.status, c.after.status) for c in changes] == [
        ("READ-6", "0.15.0", "pass", "fail")
    ]
    markdown = render_markdown(matrix)
    assert "| READ-6 | MUST | pass | **FAIL** |" in markdown
    assert "- **READ-6** pass → fail in 0.15.0" in render_timeline_markdown(matrix, changes)
    page = render_html(matrix)
    assert page.startswith("<!doctype html>") and "<script" not in page and 'class="fail"' in page


def _memspec(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memspec.conformance", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["hermes", "--version", "0.19;x"], "expected a version such as 0.19.0"),
        (["matrix", "--out", "m"], "name at least one backend or --from-report DIR"),
        (["matrix", "--out", "m", "--from-report", "nowhere"], "cannot read nowhere/report.json"),
        (["sweep", "--out", "s", "--package", "not a name"], "must be a distribution name"),
        (["sweep", "--out", "s", "--then", "not a name==1.0"], "must be a distribution name"),
        (["hermes", "--wheel", "nowhere.whl"], "expected a wheel (.whl) or a source directory"),
        (["hermes", "--source", "x", "--version", "1.0"], "not with --wheel/--source"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args: list[str], error: str) -> None:
    result = _memspec(*args)
    assert result.returncode == 2
    assert error in result.stderr and "Traceback" not in result.stderr


def test_hermes_certifies_through_the_library_certify_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memspec hermes`` builds the settings and calls the library function ``memspec certify``
    and ``memspec.certify()`` call, never the certify command line; a release waits longer for
    an answer, and the output is certify's."""
    from memspec.conformance.commands import certify as library
    from memspec.conformance.commands import cli
    from memspec.conformance.core.waits import RELEASE_CALL_TIMEOUT
    from memspec.conformance.hermes import cli as hermes_cli

    serve = f"{sys.executable} -m memspec.conformance serve --backend {REFERENCE}"
    monkeypatch.setattr(hermes_cli, "hermes_command", lambda build, cache, python: serve)
    main = cli.main
    monkeypatch.setattr(cli, "main", lambda argv=None: pytest.fail("hermes re-entered the CLI"))
    seen: list[Any] = []

    def recording(settings: Any) -> Any:
        seen.append(settings)
        return run(settings)

    run = library.run_certification
    monkeypatch.setattr(library, "run_certification", recording)
    report = tmp_path / "report"
    argv = ["hermes", "--source", str(tmp_path), "--profile", "smoke", "-k", "FORMAT", "-q"]
    assert main([*argv, "--report", str(report)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2].startswith("conformance level: ")
    assert lines[-1].endswith(" 0 failed, 0 skipped")
    (settings,) = seen
    assert settings.timeout == RELEASE_CALL_TIMEOUT and settings.backend.label == serve
    assert (settings.quiet, settings.select, settings.profile.name) == (True, "FORMAT", "smoke")
    assert json.loads((report / "report.json").read_text(encoding="utf-8"))["summary"]["passed"]


def test_matrix_certifies_backends_and_shows_a_broken_one(tmp_path: Path) -> None:
    out = tmp_path / "m"
    result = _memspec(
        "matrix", "--out", str(out), "--profile", "smoke",
        "--backend", "memspec.reference_impl:open_store",
        "--backend", "tests.backends.naive_broken:ModeReset",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    markdown = (out / "matrix.md").read_text()
    # FILES-2: the reference keeps a file's mode; the broken store resets it.
    assert "| FILES-2 | MUST | pass | **FAIL** |" in markdown
    assert (out / "matrix.html").read_text().count('class="fail"') >= 1


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "ERROR: Could not find a version that satisfies the requirement hermes-agent==9 "
            "(from versions: 0.18.0, 0.19.0)\nERROR: No matching distribution found",
            "hermes-agent 9 is not on the package index; it has 0.18.0, 0.19.0",
        ),
        (
            "ERROR: Could not find a version (from versions: none)",
            "the package index lists no release of hermes-agent: is it reachable",
        ),
        ("WARNING: Retrying after connection broken by NewConnectionError", "is it reachable"),
        ("ERROR: disk full\n", "pip failed installing hermes-agent==9: ERROR: disk full"),
    ],
)
def test_pip_failures_read_as_one_line(output: str, expected: str) -> None:
    from memspec.conformance.hermes.releases import _pip_problem

    message = _pip_problem("hermes-agent", "9", output)
    assert expected in message and "\n" not in message


def test_only_a_failure_a_search_found_is_marked_in_the_timeline(tmp_path: Path) -> None:
    # A feature claimed from a release on is a change of the claims, not of a search: no mark;
    # a failure a property found is marked, since an earlier release may hide it unfound.
    rows = {
        "0.13.0": [_check("LIMIT/properties.limits_hold", ["LIMIT-2"], "passed")],
        "0.17.0": [
            _check("LIMIT/properties.limits_hold", ["LIMIT-2"], "failed", "LIMIT-2: lost"),
        ],
    }
    columns = [
        Column.load(_report(tmp_path / release, ["core"], checks), release)
        for release, checks in rows.items()
    ]
    (change,) = timeline(Matrix.build(columns))
    assert (change.clause, change.generated) == ("LIMIT-2", True)
    assert "LIMIT-2** pass → fail in 0.17.0 †" in render_timeline_markdown(
        Matrix.build(columns), [change]
    )
    skipped = _check(
        "BATCH/machine.memory_machine", ["BATCH-3"], "skipped", "needs feature batch",
        kind="unsupported", missing_features=["batch"],
    )  # fmt: skip
    passed = _check("BATCH/machine.memory_machine", ["BATCH-3"], "passed")
    claims = [
        Column.load(_report(tmp_path / "b0", ["core"], [skipped]), "0.16.0"),
        Column.load(_report(tmp_path / "b1", ["core", "batch"], [passed]), "0.17.0"),
    ]
    assert [
        (c.before.status, c.after.status, c.generated) for c in timeline(Matrix.build(claims))
    ] == [("skip", "pass", False)]


def test_a_ready_file_of_an_earlier_memspec_is_read(tmp_path: Path) -> None:
    """An environment an earlier memspec built says only its build, as text: it reads as one
    without the agent's imports (added on its next use), never as an error."""
    from memspec.conformance.hermes.releases import READY, read_ready

    assert read_ready(tmp_path) is None
    (tmp_path / READY).write_text("hermes-agent==0.19.0\n", encoding="utf-8")
    assert read_ready(tmp_path) == {"build": "hermes-agent==0.19.0"}
    (tmp_path / READY).write_text('{"build": "b", "agent": ""}\n', encoding="utf-8")
    assert read_ready(tmp_path) == {"build": "b", "agent": ""}
