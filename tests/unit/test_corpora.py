"""The two corpora of SCAN-2 and the Unicode sets of ``spec/data/unicode.json``, as data.

The model (spec/) accepts every ordinary entry and refuses every attack, each attack is blamed on
the clause it tests, and the published sets are the ones SPEC.md lists again in ENTRY-1 and
SCAN-4. The checks that run the corpora against backends are proven in
``tests/power/test_corpus_checks.py``; the Node.js backend and Node's own Unicode data in
``tests/integration/test_node_corpora.py``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from memspec.spec import codes
from memspec.spec.clauses import parse_clauses
from memspec.spec.codec import (
    WHITESPACE,
    has_delimiter_line,
    normalize_content,
    parse_text,
    serialize,
)
from memspec.spec.corpora import ATTACKS, ORDINARY, CorpusItem, load_corpus
from memspec.spec.document import installed_spec
from memspec.spec.rules import content_error
from memspec.spec.threats import (
    INVISIBLE_CHARACTERS,
    INVISIBLE_CONTENT,
    THREAT_PATTERN_NAMES,
    find_threats,
    has_invisible_threat,
    normalize_for_scan,
)
from memspec.spec.unicode_sets import (
    DATA,
    INVISIBLE_CONTENT_RANGES,
    INVISIBLE_THREAT_RANGES,
    UNICODE_VERSION,
    WHITE_SPACE_RANGES,
)

PROJECT = Path(__file__).resolve().parent.parent.parent
CLAUSES = {clause.id: clause for clause in parse_clauses(installed_spec().text)}


def _ids(items: tuple[CorpusItem, ...]) -> list[str]:
    return [item.id for item in items]


# --- the corpora as data ------------------------------------------------------------------------


def test_the_corpora_are_large_enough_and_their_ids_stable() -> None:
    # At least 40 ordinary entries and 30 attacks, each with a unique kebab-case id and a reason.
    assert len(ORDINARY) >= 40 and len(ATTACKS) >= 30
    for items in (ORDINARY, ATTACKS):
        assert len(set(_ids(items))) == len(items)
        assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", item.id) for item in items)
        assert all(item.why and item.text for item in items)
    assert load_corpus("ordinary") == ORDINARY


def test_every_item_is_one_valid_entry_of_assigned_characters() -> None:
    # Each text is stored as one entry as it is: no whitespace to strip (ENTRY-1), no delimiter
    # line or leading U+FEFF (ENTRY-3), and only characters assigned in the Unicode version of
    # this Python, so that NFKC of any version from 14.0 on treats it alike (SCAN-3).
    for item in ORDINARY + ATTACKS:
        assert normalize_content(item.text) == item.text, item.id
        assert not has_delimiter_line(item.text) and not item.text.startswith("\ufeff"), item.id
        unassigned = [c for c in item.text if unicodedata.category(c) == "Cn"]
        assert set(unassigned) <= INVISIBLE_CONTENT, (item.id, unassigned)
    assert parse_text(serialize([item.text for item in ORDINARY])) == [i.text for i in ORDINARY]


def test_the_corpora_cover_the_scripts_and_disguises_of_the_rule() -> None:
    # Every invisible character the rule singles out appears on the side it belongs to.
    ordinary = "".join(item.text for item in ORDINARY)
    for char in "\u200b\u200c\u200d\u200f\u061c\u00ad\u180e\ufe0f\U000e0100\U000e007f":
        assert char in ordinary, hex(ord(char))
    attacks = "".join(item.text for item in ATTACKS)
    for char in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\U000e0001\U000e0020":
        assert char in attacks, hex(ord(char))
    assert {item.pattern for item in ATTACKS} == set(THREAT_PATTERN_NAMES)


# --- the model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("item", ORDINARY, ids=_ids(ORDINARY))
def test_the_model_accepts_every_ordinary_entry(item: CorpusItem) -> None:
    # SCAN-2, SCAN-4: ordinary text matches no pattern and is stored as given.
    assert find_threats(item.text) == ()
    assert content_error(item.text) is None


@pytest.mark.parametrize("item", ATTACKS, ids=_ids(ATTACKS))
def test_the_model_refuses_every_attack_with_its_pattern(item: CorpusItem) -> None:
    # SCAN-2: each attack matches the pattern it names and is refused with E_THREAT.
    assert item.pattern in find_threats(item.text)
    error = content_error(item.text)
    assert error is not None and error.code == codes.E_THREAT


@pytest.mark.parametrize("item", ATTACKS, ids=_ids(ATTACKS))
def test_each_attack_is_blamed_on_the_clause_it_tests(item: CorpusItem) -> None:
    # SCAN-2: a pattern as written; SCAN-4: an invisible threat; SCAN-3: a disguise of a SCAN-2
    # item that the scan form undoes (invisible content removed, NFKC, case folded).
    plain = {attack.id: attack for attack in ATTACKS}.get(item.disguises or "")
    if item.clause == "SCAN-2":
        assert plain is None and normalize_for_scan(item.text) == item.text
        assert not has_invisible_threat(item.text)
    elif item.clause == "SCAN-4":
        assert plain is None and has_invisible_threat(item.text)
    else:
        assert item.clause == "SCAN-3" and plain is not None and plain.clause == "SCAN-2"
        assert normalize_for_scan(item.text).casefold() == plain.text.casefold() != item.text
        assert not has_invisible_threat(item.text) and plain.pattern == item.pattern


def test_an_ordinary_entry_is_blamed_on_scan_4_when_it_holds_an_invisible_character() -> None:
    for item in ORDINARY:
        invisible = any(c in INVISIBLE_CHARACTERS for c in item.text)
        assert item.clause == ("SCAN-4" if invisible else "SCAN-2"), item.id


def test_the_data_file_names_the_clause_of_each_attack() -> None:
    # The clause is written in attacks.json for ports, and is the one the checks blame.
    path = PROJECT / "spec" / "data" / "attacks.json"
    written = {item["id"]: item["clause"] for item in json.loads(path.read_text())["items"]}
    assert written == {item.id: item.clause for item in ATTACKS}


# --- the Unicode sets ---------------------------------------------------------------------------


def _listed(text: str) -> set[int]:
    """Returns the code points ``text`` lists as ``U+XXXX`` or ``U+XXXX–U+YYYY``."""
    found: set[int] = set()
    for low, high in re.findall(r"U\+([0-9A-F]{4,6})(?:–U\+([0-9A-F]{4,6}))?", text):
        found |= set(range(int(low, 16), int(high or low, 16) + 1))
    return found


def _codes(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    """Returns every code point of ``ranges``."""
    return {code for low, high in ranges for code in range(low, high + 1)}


def test_spec_md_lists_the_published_sets() -> None:
    # ENTRY-1 lists White_Space; SCAN-4 lists both kinds of invisible characters and the flag;
    # SCAN-3 names the Unicode version. The clauses and the data file say the same.
    entry_1 = CLAUSES["ENTRY-1"].text
    listing = entry_1[entry_1.index("White_Space") : entry_1.index("U+3000") + 6]
    assert _listed(listing) == _codes(WHITE_SPACE_RANGES) == {ord(c) for c in WHITESPACE}
    flag = {0x1F3F4, 0xE007F, 0xE0061, 0xE007A, 0xE0030, 0xE0039}
    threats, content = _codes(INVISIBLE_THREAT_RANGES), _codes(INVISIBLE_CONTENT_RANGES)
    assert _listed(CLAUSES["SCAN-4"].text) == threats | content | flag
    assert "Unicode " + ".".join(UNICODE_VERSION.split(".")[:2]) in CLAUSES["SCAN-3"].text
    assert f"{len(threats | content):,} code points" in CLAUSES["SCAN-4"].text


def test_white_space_is_what_python_calls_space_minus_the_information_separators() -> None:
    # Python's str.strip() strips White_Space and U+001C-U+001F (ENTRY-1 names the difference).
    python_space = {chr(code) for code in range(0x110000) if chr(code).isspace()}
    assert python_space - set(WHITESPACE) == set("\x1c\x1d\x1e\x1f")
    assert set(WHITESPACE) <= python_space and len(WHITESPACE) == 25


def test_no_character_normalises_into_the_invisible_set() -> None:
    # Removing invisible characters before NFKC leaves none after it, so the scan form is
    # final (SCAN-3); the only NFKC mappings out of the set stay inside it.
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or char in INVISIBLE_CHARACTERS:
            continue
        normal = unicodedata.normalize("NFKC", char)
        assert not INVISIBLE_CHARACTERS & set(normal), hex(code)


def test_the_data_file_names_its_clauses() -> None:
    # Every set in spec/data/unicode.json says which clauses use it, and they exist.
    for key in ("white_space", "invisible_threats", "invisible_content", "emoji_tag_sequence"):
        assert DATA[key]["clauses"] and set(DATA[key]["clauses"]) <= set(CLAUSES)


def test_every_scan_2_example_is_in_the_corpora() -> None:
    """The two corpora fix what SCAN-2 means (SCAN-2): each add an example of SCAN-2 alone expects
    refused with E_THREAT is an attack of the corpus, and each it expects OK an ordinary entry, so
    a port that covers the corpora passes the examples too."""
    attacks = {item.text for item in ATTACKS}
    ordinary = {item.text for item in ORDINARY}
    missing = [
        (example.id, step.args[1])
        for example in installed_spec().examples
        if example.clauses == ("SCAN-2",)
        for step in example.steps
        if step.op == "add"
        and step.args[1] not in (attacks if step.expect.get("code") == codes.E_THREAT else ordinary)
    ]
    assert missing == []
