"""Which release of Hermes a later line copied its memory from: the release whose memory modules
(``imports.MEMORY_MODULES``) share the most lines with the later line's. A sweep compares each
later line's verdicts with that release's, so that a fork of 0.16.0 is not charged with what 0.19.0
changed since."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memspec.conformance.hermes.imports import MEMORY_MODULES

Sources = Mapping[str, Sequence[str]]
"""The lines of each memory module an environment holds, by its path in the distribution."""


@dataclass(frozen=True)
class Base:
    """A later line's base: the release ``label`` and the share of lines their memory modules
    have in common (1.0: the same modules)."""

    label: str
    shared: float


def memory_sources(python: Path) -> dict[str, list[str]]:
    """Returns the lines of each memory module in the environment of the interpreter ``python``
    (``<venv>/bin/python``); an empty mapping when it holds none."""
    venv = python.parent.parent
    found: dict[str, list[str]] = {}
    for packages in sorted(venv.glob("lib/python*/site-packages")):
        for module in MEMORY_MODULES:
            path = packages / module
            if module not in found and path.is_file():
                found[module] = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return found


def shared_lines(one: Sources, other: Sources) -> float:
    """Returns the share of the two sets of modules' lines that match, module by module, in
    order (2 × matching lines / all lines, as :class:`difflib.SequenceMatcher` counts them); a
    module only one side has matches nothing. 0.0 when neither has a line."""
    matched = total = 0
    for module in sorted(one.keys() | other.keys()):
        mine, theirs = list(one.get(module, ())), list(other.get(module, ()))
        total += len(mine) + len(theirs)
        if mine and theirs:
            blocks = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
            matched += 2 * sum(block.size for block in blocks.get_matching_blocks())
    return matched / total if total else 0.0


def nearest_release(line: Sources, releases: Sequence[tuple[str, Sources]]) -> Base | None:
    """Returns the release among ``releases`` (label and sources, oldest first) that shares the
    most lines with ``line``, the latest of those that share as many; ``None`` without
    releases."""
    best: Base | None = None
    for label, sources in releases:
        shared = shared_lines(line, sources)
        if best is None or shared >= best.shared:
            best = Base(label, shared)
    return best
