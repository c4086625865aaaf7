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
from memspec.spec.threats import INVISIBLE_THREATS
from memspec.spec.unicode_sets import (
    INVISIBLE_CONTENT_RANGES,
    INVISIBLE_THREAT_RANGES,
    WHITE_SPACE_RANGES,
)
from tests.power.test_checks_power import run_check

PROJECT = Path(__file__).resolve().parent.parent.parent
NODE_BACKEND = PROJECT / "backends" / "node" / "memspec_backend.js"

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
