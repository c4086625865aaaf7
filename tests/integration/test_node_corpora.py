"""The Node.js backend passes both corpus checks of SCAN-2, and Node's own Unicode data agrees
with the published sets of ``spec/data/unicode.json``.

Node has its own ICU, of its own Unicode version (14.0 or later): a second runtime that says
what Default_Ignorable_Code_Point and White_Space are, independently of this Python.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.spec.threats import INVISIBLE_THREATS, find_threats
from memspec.spec.unicode_sets import (
    INVISIBLE_CONTENT_RANGES,
    INVISIBLE_THREAT_RANGES,
    WHITE_SPACE_RANGES,
)
from tests.power.test_checks_power import run_check

PROJECT = Path(__file__).resolve().parent.parent.parent
NODE_BACKEND = PROJECT / "backends" / "node" / "memspec_backend.js"
CORPORA = [PROJECT / "spec" / "data" / name for name in ("ordinary.json", "attacks.json")]
SPLICED = ("é", "ß", "ж", "中", "پ", "क", "ש", "٣", "𝐀", "_", "7", "\u2019", "🙂")
"""Letters and digits of other scripts, one outside the BMP, and their ASCII neighbours: the
Node.js scan matches each non-ASCII letter or digit as one stand-in letter. Not `ı` or `İ`,
which Python's ``re.IGNORECASE`` alone takes for `i` (SCAN-3 lets a store refuse that)."""

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not on PATH: the Node.js backend cannot start"
)


def _codes(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    """Returns every code point of ``ranges``."""
    return {code for low, high in ranges for code in range(low, high + 1)}


@pytest.mark.parametrize("name", ["scan.ordinary_text_corpus", "scan.attack_corpus"])
def test_the_node_backend_passes_both_corpus_checks(name: str, tmp_path: Path) -> None:
    # The second implementation accepts every ordinary entry and refuses every attack.
    run_check(name, CommandBackend(f"node {NODE_BACKEND}", timeout=30), tmp_path)


def test_the_published_sets_are_unicode_properties_in_another_runtime() -> None:
    # Node's ICU (its own Unicode version, 14.0 or later) agrees: threats and content together
    # are exactly Default_Ignorable_Code_Point, and the whitespace set is White_Space.
    script = (
        "const out = {};"
        "for (const p of ['Default_Ignorable_Code_Point', 'White_Space']) {"
        "  const re = new RegExp(`^\\\\p{${p}}$`, 'u'); out[p] = [];"
        "  for (let c = 0; c <= 0x10ffff; c++) {"
        "    if (c >= 0xd800 && c <= 0xdfff) continue;"
        "    if (re.test(String.fromCodePoint(c))) out[p].push(c);"
        "  }"
        "}"
        "out.unicode = process.versions.unicode;"
        "console.log(JSON.stringify(out));"
    )
    result = subprocess.run(
        ["node", "-e", script], capture_output=True, text=True, timeout=120, check=True
    )
    properties = json.loads(result.stdout)
    assert tuple(int(n) for n in properties["unicode"].split(".")[:2]) >= (14, 0)
    dicp = set(properties["Default_Ignorable_Code_Point"])
    assert dicp == _codes(INVISIBLE_THREAT_RANGES) | _codes(INVISIBLE_CONTENT_RANGES)
    assert set(properties["White_Space"]) == _codes(WHITE_SPACE_RANGES)
    assert {ord(c) for c in INVISIBLE_THREATS} <= dicp


def _strings(value: object) -> list[str]:
    """Returns every string in a JSON value, depth first."""
    if isinstance(value, str):
        return [value]
    children = value.values() if isinstance(value, dict) else value
    return [text for child in children for text in _strings(child)] if children else []


def _spliced(text: str) -> list[str]:
    """Returns ``text`` with each of :data:`SPLICED` before it, after it, for its spaces and
    inside its first word."""
    inside = next((i for i in range(1, len(text)) if text[i - 1 : i + 1].isalpha()), 0)
    variants = [text]
    for char in SPLICED:
        variants += [char + text, text + char, text.replace(" ", char)]
        variants.append(text[:inside] + char + text[inside:])
    return variants


def test_the_node_scan_names_the_threats_the_spec_names() -> None:
    # SCAN-2 to SCAN-4 in a second runtime: every corpus text, with letters and digits of other
    # scripts spliced next to and into its words, gets the spec's threat names from Node's scan.
    texts = [variant for corpus in CORPORA for text in _strings(json.loads(corpus.read_text()))
             for variant in _spliced(text)]  # fmt: skip
    script = (
        f"const {{ findThreats }} = require({json.dumps(str(NODE_BACKEND))});"
        "const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(texts.map((text) => findThreats(text))));"
    )
    result = subprocess.run(
        ["node", "-e", script], input=json.dumps(texts), capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    found = json.loads(result.stdout)
    expected = [sorted(find_threats(text)) for text in texts]
    wrong = [(text, names, spec) for text, names, spec in zip(texts, found, expected, strict=True)
             if sorted(names) != spec]  # fmt: skip
    assert sum(1 for names in found if names) > 1000
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, first: {wrong[0]}"
