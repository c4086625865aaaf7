"""The clauses of SPEC.md: stable ids, levels and text (see "How to read this").

A clause is a line that starts ``**AREA-N** (MUST|SHOULD|MAY)``; its text runs to the end of
the paragraph. Ids are stable: a clause may be reworded or withdrawn, never renumbered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CLAUSE_ID = re.compile(r"[A-Z]+-[1-9][0-9]*")
CLAUSE_LINE = re.compile(
    r"^\*\*(?P<id>[A-Z]+-[1-9][0-9]*)\*\*\s+\((?P<level>MUST|SHOULD|MAY)\)\s*(?P<text>.*)$"
)

CHECKED_BY = re.compile(r"Checked by: ((?:`[^`]+`(?:, )?)+)")
TEST_REFERENCE = re.compile(r"`([^`:]+)::([A-Za-z_][A-Za-z0-9_]*)`")

Level = Literal["MUST", "SHOULD", "MAY"]


class ClauseSyntaxError(ValueError):
    """SPEC.md states a clause twice or malformed: a bug in the spec, not in a backend."""


@dataclass(frozen=True)
class Clause:
    """A Clause is one citable rule of SPEC.md."""

    id: str
    level: Level
    text: str
    line: int

    @property
    def checked_by(self) -> tuple[tuple[str, str], ...]:
        """The project tests a ``Checked by:`` line names, as (file, test function) pairs.

        Only clauses that the backend contract cannot observe (the agent around a store, the
        harness itself) carry one.
        """
        found = CHECKED_BY.search(self.text)
        return tuple(TEST_REFERENCE.findall(found.group(1))) if found else ()

    @property
    def area(self) -> str:
        """The area prefix of the id, e.g. ``DELIM`` for ``DELIM-3``."""
        return self.id.rsplit("-", 1)[0]


def parse_clauses(text: str) -> list[Clause]:
    """Returns every clause of a SPEC.md text, in document order."""
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
        level: Level = match.group("level")  # type: ignore[assignment]
        clauses.append(Clause(match.group("id"), level, " ".join(body).strip(), number))
    seen: dict[str, int] = {}
    for clause in clauses:
        if clause.id in seen:
            raise ClauseSyntaxError(
                f"SPEC.md line {clause.line}: {clause.id} is already stated "
                f"at line {seen[clause.id]}"
            )
        seen[clause.id] = clause.line
    return clauses


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
