"""The two normative corpora of the threat scan: what it must accept and what it must refuse.

``spec/data/ordinary.json`` holds ordinary entries every backend must accept and store as given;
``spec/data/attacks.json`` holds attacks every backend claiming ``threat-scan`` must refuse with
``E_THREAT`` (SCAN-2). Each item is ``{"id", "text", "why"}``; an attack also names its ``pattern``
and the ``clause`` a backend accepting it violates: SCAN-2, SCAN-4 for an invisible threat, or
SCAN-3 for a disguise, which names in ``disguises`` the SCAN-2 item it hides. An ordinary item is
blamed on SCAN-4 when it holds an invisible character, else on SCAN-2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Final

from memspec.spec.threats import INVISIBLE_CHARACTERS, has_invisible_threat


@dataclass(frozen=True)
class CorpusItem:
    """A CorpusItem is one entry of a corpus: its stable ``id``, the ``text`` a test adds, why it
    is there, and for an attack the ``pattern`` it matches and, for a disguise, the id of the
    plain attack it ``disguises``."""

    id: str
    text: str
    why: str
    pattern: str | None = None
    disguises: str | None = None

    @property
    def clause(self) -> str:
        """The clause a backend violates when it answers this item the wrong way: SCAN-4 for an
        invisible threat (an attack) or an invisible character (an ordinary entry), SCAN-3 for a
        disguise, SCAN-2 otherwise. An attack's ``clause`` in the data file says the same."""
        if has_invisible_threat(self.text):
            return "SCAN-4"
        if self.disguises:
            return "SCAN-3"
        if self.pattern is None and any(c in INVISIBLE_CHARACTERS for c in self.text):
            return "SCAN-4"
        return "SCAN-2"


def load_corpus(name: str) -> tuple[CorpusItem, ...]:
    """Returns the items of ``spec/data/<name>.json`` (``ordinary`` or ``attacks``), in file
    order (SCAN-2)."""
    path = resources.files("memspec.spec").joinpath("data").joinpath(f"{name}.json")
    items = json.loads(path.read_text(encoding="utf-8"))["items"]
    fields = ("id", "text", "why", "pattern", "disguises")
    return tuple(CorpusItem(**{key: item[key] for key in fields if key in item}) for item in items)


ORDINARY: Final = load_corpus("ordinary")
"""Entries every backend accepts and stores as given (SCAN-2, SCAN-4)."""
ATTACKS: Final = load_corpus("attacks")
"""Entries every backend claiming ``threat-scan`` refuses with ``E_THREAT`` (SCAN-2, SCAN-3,
SCAN-4)."""
