"""The clauses of SPEC.md: stable ids, levels, text and scope (see "How to read this").

A clause is a line that starts ``**AREA-N** (MUST|SHOULD|MAY)``; its text runs to the end of the
paragraph. Ids are stable: a clause may be reworded or withdrawn, never renumbered. The **Subjects**
table of "How to read this" gives areas to a subject other than the store (the row
``| `provider` | PLUGIN |`` makes every PLUGIN clause a provider's); the **Scope** table names the
clauses that bind only a backend claiming a feature (the row ``| `batch` | BATCH-1, BATCH-2 |``
gives them the feature ``batch``); the **Data-protecting clauses** table those that bind every
backend whatever it claims.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from memspec.spec.errors import SpecError

CLAUSE_ID = re.compile(r"[A-Z]+-[1-9][0-9]*")
CLAUSE_LINE = re.compile(
    r"^\*\*(?P<id>[A-Z]+-[1-9][0-9]*)\*\*\s+\((?P<level>MUST|SHOULD|MAY)\)\s*(?P<text>.*)$"
)

CHECKED_BY = re.compile(r"Checked by: ((?:`[^`]+`(?:, )?)+)")
TEST_REFERENCE = re.compile(r"`([^`:]+)::([A-Za-z_][A-Za-z0-9_]*)`")

Level = Literal["MUST", "SHOULD", "MAY"]
LEVELS: dict[str, Level] = {"MUST": "MUST", "SHOULD": "SHOULD", "MAY": "MAY"}
"""Each level by the word that states it in a clause line (``CLAUSE_LINE`` matches only these)."""


class ClauseSyntaxError(SpecError):
    """SPEC.md states a clause twice or malformed: a bug in the spec, not in a backend."""


SUBJECTS_TABLE = "**Subjects.**"
STORE = "store"
"""The subject of every area the Subjects table gives to no other: a store of the contract."""
PROVIDER = "provider"
"""The subject of a Hermes memory provider plugin (the PLUGIN area)."""
AREA_NAME = re.compile(r"[A-Z]+")
SCOPE_TABLE = "**Scope.**"
PROTECTING_TABLE = "**Data-protecting clauses.**"
FEATURE_CELL = re.compile(r"`([a-z][a-z-]*)`")


@dataclass(frozen=True)
class Clause:
    """A Clause is one citable rule of SPEC.md: ``feature`` is the feature whose claim it binds
    (``None``: every backend); ``protects_data`` marks a clause no check or example may gate on a
    feature."""

    id: str
    level: Level
    text: str
    line: int
    feature: str | None = None
    protects_data: bool = False
    subject: str = STORE
    """What the clause judges (SPEC.md, "Subjects"): ``store`` or ``provider``."""

    @property
    def checked_by(self) -> tuple[tuple[str, str], ...]:
        """The project tests a ``Checked by:`` line names, as (file, test function) pairs."""
        found = CHECKED_BY.search(self.text)
        return tuple(TEST_REFERENCE.findall(found.group(1))) if found else ()

    @property
    def area(self) -> str:
        """The area prefix of the id, e.g. ``DELIM`` for ``DELIM-3``."""
        return self.id.rsplit("-", 1)[0]


def table_after(text: str, heading: str) -> list[list[str]]:
    """Returns the body rows (cells stripped) of the first Markdown table after the paragraph
    that starts with ``heading`` (``[]`` when the text has no such paragraph)."""
    start = text.find("\n" + heading)
    if start < 0:
        return []
    rows: list[list[str]] = []
    for line in text[start + 1 :].split("\n")[1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [row for row in rows[1:] if not set("".join(row)) <= set("-: ")]


def _scopes(text: str, stated: dict[str, Clause]) -> tuple[dict[str, str], set[str]]:
    """Returns the feature of each feature-bound clause and the data-protecting clause ids, as
    the two tables state them (raises ClauseSyntaxError for an id SPEC.md does not state, a
    clause given two features, or a data-protecting clause that is not a MUST of every
    backend)."""
    features: dict[str, str] = {}
    for row in table_after(text, SCOPE_TABLE):
        named = FEATURE_CELL.fullmatch(row[0])
        if not named or len(row) < 2:
            raise ClauseSyntaxError(f"SPEC.md: a row of the Scope table is malformed: {row}")
        for clause in CLAUSE_ID.findall(row[1]):
            if clause in features:
                raise ClauseSyntaxError(f"SPEC.md: {clause} is given two features in Scope")
            features[clause] = named.group(1)
    rows = table_after(text, PROTECTING_TABLE)
    protecting = {clause for row in rows for clause in CLAUSE_ID.findall(row[-1])}
    for clause in sorted(set(features) | protecting):
        if clause not in stated:
            raise ClauseSyntaxError(f"SPEC.md: the scope tables name {clause}, which is not stated")
    for clause in sorted(protecting):
        if clause in features or stated[clause].level != "MUST":
            raise ClauseSyntaxError(
                f"SPEC.md: the data-protecting clause {clause} must be a MUST that binds every "
                "backend"
            )
    return features, protecting


def _subjects(text: str) -> dict[str, str]:
    """Returns the subject of each area the Subjects table gives to a subject other than the
    store (raises ClauseSyntaxError for a malformed row or an area given twice)."""
    subjects: dict[str, str] = {}
    for row in table_after(text, SUBJECTS_TABLE):
        named = FEATURE_CELL.fullmatch(row[0])
        areas = [cell.strip() for cell in row[1].split(",")] if len(row) > 1 else []
        if not named or not areas or not all(AREA_NAME.fullmatch(area) for area in areas):
            raise ClauseSyntaxError(f"SPEC.md: a row of the Subjects table is malformed: {row}")
        for area in areas:
            if area in subjects:
                raise ClauseSyntaxError(f"SPEC.md: the area {area} is given two subjects")
            subjects[area] = named.group(1)
    return subjects


def parse_clauses(text: str) -> list[Clause]:
    """Returns every clause of a SPEC.md text, in document order, with its scope."""
    clauses: list[Clause] = []
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        match = CLAUSE_LINE.match(line)
        if not match:
            continue
        body = [match.group("text").strip()]
        for following in lines[number:]:
            if not following.strip() or following.startswith(("```", "#", "**")):
                break
            body.append(following.strip())
        level = LEVELS[match.group("level")]
        clauses.append(Clause(match.group("id"), level, " ".join(body).strip(), number))
    seen: dict[str, int] = {}
    for clause in clauses:
        if clause.id in seen:
            raise ClauseSyntaxError(
                f"SPEC.md line {clause.line}: {clause.id} is already stated "
                f"at line {seen[clause.id]}"
            )
        seen[clause.id] = clause.line
    features, protecting = _scopes(text, {clause.id: clause for clause in clauses})
    subjects = _subjects(text)
    return [
        replace(
            clause,
            feature=features.get(clause.id),
            protects_data=clause.id in protecting,
            subject=subjects.get(clause.area, STORE),
        )
        for clause in clauses
    ]


def uncovered_must_clauses(clauses: Iterable[Clause], covered_ids: Iterable[str]) -> list[Clause]:
    """Returns the MUST clauses that no example, no named check and no named test covers."""
    covered = set(covered_ids)
    return [c for c in clauses if c.level == "MUST" and c.id not in covered and not c.checked_by]


def missing_tests(clauses: Iterable[Clause], project: Path) -> list[str]:
    """Returns the ``Checked by:`` references that name no test function under ``project``."""
    missing = []
    for clause in clauses:
        for filename, function in clause.checked_by:
            path = project / filename
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
            if not re.search(rf"^def {function}\(", text, re.MULTILINE):
                missing.append(f"{clause.id} names {filename}::{function}, which does not exist")
    return missing


def unknown_ids(clauses: Iterable[Clause], cited_ids: Iterable[str]) -> list[str]:
    """Returns cited ids that SPEC.md does not state (a typo in an example or a check)."""
    known = {c.id for c in clauses}
    return sorted(set(cited_ids) - known)


Citer = tuple[str, Iterable[str], Iterable[str]]
"""An example or check that cites clauses: its name, the clause ids, the features it needs."""


def gated_core(clauses: Iterable[Clause], citers: Iterable[Citer]) -> list[str]:
    """Returns the clauses that bind every backend (no feature of their own) yet whose every
    citing example and check needs a feature besides ``core``: a backend that claims no more
    could never verify them, and would never reach ``core`` (SPEC.md, "Conformance levels")."""
    everyone = [c for c in clauses if c.level == "MUST" and c.feature is None and not c.checked_by]
    gates: dict[str, set[str]] = {}
    plain: set[str] = set()
    for _, cited, features in citers:
        needed = set(features) - {"core"}
        for clause in cited:
            if needed:
                gates.setdefault(clause, set()).update(needed)
            else:
                plain.add(clause)
    return [
        f"{clause.id} binds every backend, but every example and check citing it needs "
        f"{', '.join(sorted(gates[clause.id]))}: a backend without it cannot verify {clause.id}"
        for clause in everyone
        if clause.id in gates and clause.id not in plain
    ]


def gated_protections(clauses: Iterable[Clause], citers: Iterable[Citer]) -> list[str]:
    """Returns the examples and checks that cite a data-protecting clause yet need a feature
    besides ``core``: a backend without that feature would skip them, and a data-protecting
    clause is never skipped for a claim (SPEC.md, "Data-protecting clauses")."""
    protecting = {clause.id for clause in clauses if clause.protects_data}
    problems = []
    for name, cited, features in citers:
        needed = sorted(set(features) - {"core"})
        for clause in sorted(protecting & set(cited)):
            if needed:
                problems.append(
                    f"{name} cites the data-protecting clause {clause} but needs "
                    f"{', '.join(needed)}: a backend without it would skip the clause"
                )
    return problems
