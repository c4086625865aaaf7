"""The version of SPEC.md: the number its version line states, and its changelog.

SPEC.md states its version once, in a line of its own near the top, and records every clause it
added, changed or withdrew under ``## Changes``, one ``### Version N`` section per version. That
line is the one source of the version (``memspec.spec.SPEC_VERSION``, ``Spec.version``),
which reports and ``--dump-json`` carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memspec.spec.errors import SpecError

NUMBER = r"(?P<number>[1-9][0-9]*(?:\.[0-9]+)?)"
DATE = r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})"
VERSION_LINE = re.compile(rf"^Version {NUMBER} \({DATE}\)", re.MULTILINE)
"""The version line of SPEC.md: ``Version N (YYYY-MM-DD)`` or ``Version N.M (YYYY-MM-DD)`` at
the start of a line."""
CHANGES_HEADING = "## Changes"
CHANGELOG_SECTION = re.compile(rf"^### Version {NUMBER}(?: \({DATE}\))?\s*$", re.MULTILINE)
"""A section of the changelog: ``### Version N``, with the version's date when it has one."""


class VersionSyntaxError(SpecError):
    """SPEC.md states no version, or more than one: a bug in the spec. Fix its version line."""


@dataclass(frozen=True)
class SpecVersion:
    """A SpecVersion is the number and date of the version line of SPEC.md."""

    number: str
    date: str


def parse_version(text: str) -> SpecVersion:
    """Returns the version a SPEC.md text states in its one version line (raises
    VersionSyntaxError when it has none, or several)."""
    found = list(VERSION_LINE.finditer(text))
    if len(found) != 1:
        raise VersionSyntaxError(
            f"SPEC.md must state its version in exactly one line 'Version N (YYYY-MM-DD)'; "
            f"found {len(found)}"
        )
    return SpecVersion(found[0].group("number"), found[0].group("date"))


def changelog_sections(text: str) -> dict[str, str | None]:
    """Returns the versions the changelog (``## Changes``) has a section for, with their dates
    (``None`` for a section without one)."""
    start = text.find("\n" + CHANGES_HEADING + "\n")
    if start < 0:
        return {}
    body = text[start + len(CHANGES_HEADING) + 2 :]
    following = re.search(r"^## ", body, re.MULTILINE)
    body = body[: following.start()] if following else body
    return {m.group("number"): m.group("date") for m in CHANGELOG_SECTION.finditer(body)}


def version_problems(text: str) -> list[str]:
    """Returns what is wrong with the version of a SPEC.md text: no version line (or several),
    or a changelog without a section for the version it states, or with another date."""
    try:
        version = parse_version(text)
    except VersionSyntaxError as error:
        return [str(error)]
    sections = changelog_sections(text)
    if version.number not in sections:
        return [
            f"SPEC.md states version {version.number}, but its changelog ({CHANGES_HEADING}) has "
            f"no section '### Version {version.number} ({version.date})'"
        ]
    date = sections[version.number]
    if date is not None and date != version.date:
        return [
            f"SPEC.md's version line dates version {version.number} {version.date}, but its "
            f"changelog section says {date}"
        ]
    return []
