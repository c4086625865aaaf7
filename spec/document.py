"""One SPEC.md as a run uses it: read and parsed once, then handed to everything that reads its
clauses, its examples or its version.

A run certifies against one spec: the installed SPEC.md, or a file given instead (the pytest
plugin's ``memspec_spec`` option, certify's ``--spec``). :func:`read_spec` parses a file once per
path and content, so every part of a run that asks for the same file gets the same value. A run
certifies one subject, a store or a provider (SPEC.md, "Subjects"), and judges by the view of the
spec :meth:`Spec.of_subject` gives: that subject's clauses and examples alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from memspec.spec.clauses import Clause, parse_clauses
from memspec.spec.errors import SpecError, UsageError
from memspec.spec.examples import Example, parse_examples
from memspec.spec.versions import SpecVersion, parse_version


@dataclass(frozen=True)
class Spec:
    """A Spec is one SPEC.md, parsed: where it was read from (``path``; ``None`` for text given
    directly), its ``clauses`` and ``examples`` in the order of the text, and the ``version``
    its version line states (``None`` when it states none). ``subject`` is ``None`` for the
    whole text, or the subject whose view it is (:meth:`of_subject`): its clauses and examples
    are then that subject's, and ``elsewhere`` holds the ids of the other subjects' clauses."""

    path: Path | None
    text: str = field(repr=False)
    clauses: tuple[Clause, ...] = field(repr=False)
    examples: tuple[Example, ...] = field(repr=False)
    version: str | None
    subject: str | None = None
    elsewhere: frozenset[str] = field(default=frozenset(), repr=False)

    @functools.cached_property
    def _by_id(self) -> dict[str, Clause]:
        return {clause.id: clause for clause in self.clauses}

    def clause(self, clause_id: str) -> Clause | None:
        """Returns the clause ``clause_id`` states, or ``None``."""
        return self._by_id.get(clause_id)

    def of_subject(self, subject: str) -> Spec:
        """Returns the view of this spec that a certification of ``subject`` judges by: the
        clauses of that subject, and the examples that cite one of them or no clause of
        another subject (SPEC.md, "Subjects")."""
        whole = self if self.subject is None else self.whole()
        clauses = tuple(c for c in whole.clauses if c.subject == subject)
        elsewhere = frozenset(c.id for c in whole.clauses if c.subject != subject)
        view = replace(whole, clauses=clauses, subject=subject, elsewhere=elsewhere)
        examples = tuple(e for e in whole.examples if view.judges(e.clauses))
        return replace(view, examples=examples)

    def whole(self) -> Spec:
        """Returns the whole text's spec, every subject's clauses and examples."""
        return self if self.subject is None else parse_spec(self.text, self.path)

    def judges(self, clause_ids: Iterable[str]) -> bool:
        """Whether an example or check citing ``clause_ids`` is part of a run by this spec: it
        cites a clause of the spec's subject, or none of another subject's."""
        cited = list(clause_ids)
        return not cited or any(clause not in self.elsewhere for clause in cited)


def parse_spec(text: str, path: Path | None = None) -> Spec:
    """Returns the spec a SPEC.md text states (raises SpecError when a clause or an example is
    malformed)."""
    try:
        version: str | None = parse_version(text).number
    except SpecError:
        version = None
    return Spec(path, text, tuple(parse_clauses(text)), tuple(parse_examples(text)), version)


def installed_path() -> Path:
    """Returns the path of the installed SPEC.md."""
    return Path(str(resources.files("memspec.spec").joinpath("SPEC.md")))


def installed_text() -> str:
    """Returns the text of the installed SPEC.md, unparsed (``memspec spec --check`` reports what
    is malformed in it)."""
    return installed_path().read_text(encoding="utf-8")


@functools.cache
def installed_spec(subject: str | None = None) -> Spec:
    """Returns the installed SPEC.md, parsed (once per process), or the view of ``subject``
    (:meth:`Spec.of_subject`)."""
    if subject is not None:
        return installed_spec().of_subject(subject)
    return parse_spec(installed_text(), installed_path())


@functools.lru_cache(maxsize=8)
def _read(path: Path, text: str) -> Spec:
    return parse_spec(text, path)


def read_spec(path: Path | None = None) -> Spec:
    """Returns the SPEC.md at ``path`` (``None``: the installed one), parsed once per path and
    content. A file that cannot be read, or that states no clause, is a UsageError naming it;
    a malformed one raises SpecError."""
    if path is None:
        return installed_spec()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the spec {path}: {error}") from None
    spec = _read(path.resolve(), text)
    if not spec.clauses:
        raise UsageError(f"{path} states no clause (**AREA-N** (MUST) ...): not a SPEC.md")
    return spec


@functools.cache
def installed_version() -> SpecVersion:
    """Returns the version the installed SPEC.md states (raises SpecError when it states none)."""
    return parse_version(installed_spec().text)
