"""The trail of a clause id: where SPEC.md states it and which code cites it.

A clause is *cited* by a function or class when its id appears in its docstring or a comment inside
it (or in the comment block right above its ``def``); what no ``def`` encloses belongs to the module
(``SNAP-6`` and ``SNAP-7`` in the docstring of ``spec/snapshot.py:usage_label`` are cited by that
function). Citations are read from source text, never imported (:func:`find_citations`,
:func:`package_sources`); checks are found through the registry. :func:`model_citation_problems`
reports a MUST clause nothing in ``spec/`` cites, unless :data:`NOT_DECIDED_BY_THE_MODEL` says why
the model cannot decide it.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import io
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memspec.conformance.core.registry import Check
from memspec.conformance.verdict.findings import HarnessError
from memspec.spec.clauses import CLAUSE_ID, Clause, parse_clauses
from memspec.spec.errors import UsageError
from memspec.spec.examples import parse_examples

CITED_ID = re.compile(r"(?<![A-Za-z0-9_-])([A-Z]+-[1-9][0-9]*)(?![0-9A-Za-z_])")
"""A clause id as cited in prose: ``DRIFT-3``, not part of a longer word."""

PREVENTS = re.compile(r"Prevents:\s*(?P<bug>.*?)\s*(?:Checked by:|$)")

SOURCE_PACKAGES: Mapping[str, str] = {
    "model": "memspec.spec",
    "reference": "memspec.reference_impl",
}
"""The packages whose citations a trail lists, by role."""

NOT_DECIDED_BY_THE_MODEL: Mapping[str, str] = {
    # The pure model (spec/) has no file system, no processes, no clock and no transport. These
    # MUST clauses are about exactly those things, so no function of spec/ can decide them; the
    # named checks and the harness's own tests verify them instead. One line each: why.
    "LOCK-3": "how long the lock is held is process behaviour; the model is the sequential spec "
    "that the linearizability checker searches",
    "ATOMIC-2": "what a concurrent reader sees mid-write is file-system behaviour",
    "ATOMIC-3": "directory fsync and power loss are outside the model",
    "ATOMIC-4": "a failing write (ENOSPC, EACCES) is an I/O error the model cannot have",
    "CRASH-1": "a process killed mid-mutation is outside the model",
    "CRASH-3": "a lock left by a dead process is process behaviour",
    "CRASH-4": "power loss and persistence models are judged by the crash-state checks",
    "CRASH-5": "durability across power loss is judged by the crash-state checks",
    "FILES-1": "file modes are file-system metadata",
    "FILES-2": "file modes are file-system metadata",
    "FILES-3": "O_NOFOLLOW on the lock file is file-system behaviour",
    "FILES-4": "symbolic links are file-system objects the model does not hold",
    "CONTRACT-1": "the Python factory's signature is the backend interface, not a rule of state",
    "CONTRACT-6": "raising out of a call is backend behaviour, judged by the transports",
    "CONTRACT-8": "the model keeps no per-session live entries; checks accept both freshnesses",
    "CONTRACT-12": "the JSON Lines process protocol is the transport, not the model",
    "CONTRACT-14": "protocol failures and unsupported ops are transport behaviour",
    "CONTRACT-15": "memspec certify is the harness (Checked by)",
    "CONTRACT-16": "memspec certify's exit status is the harness (Checked by)",
    "CONTRACT-17": "certify's reports are the harness (Checked by)",
    "CONTRACT-18": "expected-failures handling is the harness (Checked by)",
    "CONTRACT-19": "which features a backend claims is its own declaration, read from a session",
    "PATCH-11": "whether a backend answers a patch depends on its claim; the transport answers",
    "AGENT-7": "whether a backend answers the agent ops depends on its claim; the transport says",
    "TOOL-8": "whether a backend answers the tool ops depends on its claim; the transport answers",
}
"""The MUST clauses no function of ``spec/`` decides, each with the reason why it cannot."""


class UnknownClause(UsageError):
    """The id asked for is not a clause id, or SPEC.md does not state it: a usage error."""


@dataclass(frozen=True)
class Citation:
    """A Citation is one clause id in a docstring or comment, and the code that holds it: ``where``
    is ``path:qualified.name``, or the path alone for the module."""

    clause: str
    where: str
    line: int

    def to_json(self) -> dict[str, Any]:
        """Returns the citation as a JSON-ready record."""
        return {"clause": self.clause, "where": self.where, "line": self.line}


@dataclass(frozen=True)
class CheckSite:
    """A CheckSite is a registered check that cites a clause, and where its function lives."""

    id: str
    where: str

    def to_json(self) -> dict[str, Any]:
        """Returns the check as a JSON-ready record."""
        return {"id": self.id, "where": self.where}


@dataclass(frozen=True)
class ClauseTrail:
    """A ClauseTrail is everything that follows from one clause id: the clause, the bug it
    prevents (``None`` when SPEC.md names none), its examples as ``(id, line)`` pairs, and the
    model functions, reference functions and checks that cite it."""

    clause: Clause
    prevents: str | None
    examples: tuple[tuple[str, int], ...]
    model: tuple[Citation, ...]
    reference: tuple[Citation, ...]
    checks: tuple[CheckSite, ...]
    example_texts: tuple[str, ...] = ()
    """The steps of each example, as SPEC.md writes them (in the order of ``examples``)."""

    def texts(self) -> tuple[str, ...]:
        """The text of each example ("" where it was not read)."""
        return self.example_texts or ("",) * len(self.examples)

    def to_json(self) -> dict[str, Any]:
        """Returns the trail as a JSON-ready record."""
        return {
            "id": self.clause.id,
            "level": self.clause.level,
            "line": self.clause.line,
            "text": self.clause.text,
            "prevents": self.prevents,
            "examples": [
                {"id": slug, "line": line, "text": text}
                for (slug, line), text in zip(self.examples, self.texts(), strict=True)
            ],
            "model": [c.to_json() for c in self.model],
            "reference": [c.to_json() for c in self.reference],
            "checks": [c.to_json() for c in self.checks],
        }


def _scopes(tree: ast.AST) -> list[tuple[int, int, int, str]]:
    """Returns ``(first line, def line, last line, qualified name)`` of every def and class,
    where the first line is that of the first decorator."""
    found: list[tuple[int, int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((first, child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _texts(source: str, tree: ast.AST) -> list[tuple[int, str, bool]]:
    """Returns ``(line, text, is_comment)`` of every bare string and every comment."""
    texts: list[tuple[int, str, bool]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            texts.append((node.lineno, node.value.value, False))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            texts.append((token.start[0], token.string, True))
    return texts


def find_citations(source: str, path: str) -> list[Citation]:
    """Returns every clause id cited in ``source`` (the text of the file ``path``), each given to
    the innermost ``def`` or ``class`` that holds it, in line order. Ids are found by shape alone
    (``UTF-8`` looks like one too); callers compare them with SPEC.md's clauses."""
    tree = ast.parse(source, path)
    scopes = _scopes(tree)
    lines = source.split("\n")
    above: dict[int, str] = {}
    for first, _, _, name in scopes:
        row = first - 1
        while row >= 1 and lines[row - 1].lstrip().startswith("#"):
            above[row] = name
            row -= 1
    found: list[Citation] = []
    for start, text, is_comment in _texts(source, tree):
        for match in CITED_ID.finditer(text):
            line = start + text.count("\n", 0, match.start())
            owner = above.get(line) if is_comment else None
            if owner is None:
                holders = [
                    (first, name) for first, head, end, name in scopes if head <= line <= end
                ]
                owner = max(holders)[1] if holders else None
            where = f"{path}:{owner}" if owner else path
            found.append(Citation(match.group(1), where, line))
    return sorted(found, key=lambda c: (c.line, c.clause))


def citations_of(sources: Mapping[str, str]) -> list[Citation]:
    """Returns the citations of every file of ``sources`` (display path -> source text)."""
    return [c for path in sorted(sources) for c in find_citations(sources[path], path)]


def package_sources(package: str) -> dict[str, str]:
    """Returns the ``.py`` files of an installed package, keyed ``folder/relative/path.py`` with
    the package's last name as folder (``memspec.spec`` -> ``spec/codec.py``), read without
    importing the package."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise HarnessError(f"cannot find the installed package {package}; reinstall memspec")
    base = Path(next(iter(found.submodule_search_locations)))
    label = package.rsplit(".", 1)[-1]
    return {
        f"{label}/{path.relative_to(base).as_posix()}": path.read_text(encoding="utf-8")
        for path in sorted(base.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def function_site(function: Any) -> str:
    """Returns ``folder/file.py:qualified_name`` of a function, from :mod:`inspect`: the path
    relative to memspec's package folders (``conformance/checks/drift.py:name``)."""
    function = inspect.unwrap(function)
    module = getattr(function, "__module__", "") or ""
    try:
        file = Path(inspect.getsourcefile(function) or "")
    except TypeError:
        return f"{module}:{function.__qualname__}"
    parts = module.split(".")
    depth = len(parts) - 1 if parts[0] == "memspec" else len(parts)
    if file.name == "__init__.py":
        depth += 1
    relative = "/".join(file.parts[-max(depth, 1) :])
    return f"{relative}:{function.__qualname__}"


def check_sites(checks: Mapping[str, Check]) -> dict[str, list[CheckSite]]:
    """Returns, for each clause id, the checks that cite it with where their functions live."""
    cited: dict[str, list[CheckSite]] = {}
    for item in sorted(checks.values(), key=lambda c: c.id):
        site = CheckSite(item.id, function_site(item.function))
        for clause in item.clauses:
            cited.setdefault(clause, []).append(site)
    return cited


def prevents(clause: Clause) -> str | None:
    """Returns the bug a clause prevents, as its ``Prevents:`` sentence gives it, or ``None``."""
    found = PREVENTS.search(clause.text)
    return found.group("bug") if found else None


def find_clause(clauses: Iterable[Clause], clause_id: str) -> Clause:
    """Returns the clause ``clause_id`` names; raises UnknownClause with what went wrong."""
    wanted = clause_id.strip().upper()
    if not CLAUSE_ID.fullmatch(wanted):
        raise UnknownClause(
            f"{clause_id!r} is not a clause id: clause ids look like AREA-N, e.g. DRIFT-3"
        )
    stated = list(clauses)
    for clause in stated:
        if clause.id == wanted:
            return clause
    area = wanted.rsplit("-", 1)[0]
    same = [c.id for c in stated if c.area == area]
    hint = f"; {area} has {same[0]} to {same[-1]}" if same else f"; SPEC.md has no area {area}"
    raise UnknownClause(f"SPEC.md states no clause {wanted}{hint}")


def clause_trail(
    clause_id: str,
    spec: str,
    model: Iterable[Citation],
    reference: Iterable[Citation],
    checks: Mapping[str, list[CheckSite]],
) -> ClauseTrail:
    """Returns the trail of ``clause_id`` in the SPEC.md text ``spec``, given the citations of
    the model and of the reference and the checks by clause (raises UnknownClause)."""
    clause = find_clause(parse_clauses(spec), clause_id)
    examples = tuple((e.id, e.line) for e in parse_examples(spec) if clause.id in e.clauses)
    return ClauseTrail(
        clause,
        prevents(clause),
        examples,
        tuple(c for c in model if c.clause == clause.id),
        tuple(c for c in reference if c.clause == clause.id),
        tuple(checks.get(clause.id, ())),
        tuple(example_block(spec, line) for _, line in examples),
    )


def example_block(spec: str, line: int) -> str:
    """Returns the steps of the example whose fence opens at ``line`` (1-based) of ``spec``,
    as SPEC.md writes them."""
    lines = spec.splitlines()[line:]
    end = next((i for i, text in enumerate(lines) if text.startswith("```")), len(lines))
    return "\n".join(lines[:end])


def model_citation_problems(
    clauses: Iterable[Clause],
    model: Iterable[Citation],
    allowed: Mapping[str, str] = NOT_DECIDED_BY_THE_MODEL,
) -> list[str]:
    """Returns the problems with the model's citations: a MUST clause that nothing in ``spec/``
    cites and ``allowed`` (:data:`NOT_DECIDED_BY_THE_MODEL`) does not excuse, and an excuse
    that is stale (the clause is cited after all, or is not a MUST clause SPEC.md states)."""
    stated = {c.id: c for c in clauses}
    cited: dict[str, Citation] = {}
    for citation in model:
        cited.setdefault(citation.clause, citation)
    problems = []
    for clause in stated.values():
        if clause.level == "MUST" and clause.id not in cited and clause.id not in allowed:
            problems.append(
                f"{clause.id} (MUST, SPEC.md line {clause.line}) is cited by no function of "
                "spec/: cite it where the model decides it, or say in "
                "NOT_DECIDED_BY_THE_MODEL why the model cannot"
            )
    for cid in sorted(allowed):
        if cid not in stated or stated[cid].level != "MUST":
            problems.append(
                f"NOT_DECIDED_BY_THE_MODEL lists {cid}, which SPEC.md does not state as MUST"
            )
        elif cid in cited:
            problems.append(
                f"NOT_DECIDED_BY_THE_MODEL lists {cid}, but {cited[cid].where} cites it: "
                "drop one of them"
            )
    return problems


def unknown_citations(clauses: Iterable[Clause], citations: Iterable[Citation]) -> list[str]:
    """Returns a problem for each cited id of an area SPEC.md has that SPEC.md does not state
    (a typo such as ``DRIFT-33``); ids of other shapes (``UTF-8``) are not clause ids."""
    stated = {c.id for c in clauses}
    areas = {cid.rsplit("-", 1)[0] for cid in stated}
    problems = []
    for citation in citations:
        if citation.clause not in stated and citation.clause.rsplit("-", 1)[0] in areas:
            problems.append(
                f"{citation.where} (line {citation.line}) cites {citation.clause}, "
                "which SPEC.md does not state"
            )
    return problems
