"""The conformance level a certification reached is stated where users read it: the line
before certify's summary, ``CertifyResult.level``, ``report.json``'s ``level`` and the headline
of ``report.md`` — one function, ``conformance_level``, for all of them (SPEC.md, "Conformance
levels")."""

from __future__ import annotations

import json
from pathlib import Path

import memspec


def test_certify_states_the_level(tmp_path: Path) -> None:
    result = memspec.certify(
        "memspec.reference_impl:open_store", profile="smoke", select="recovery", report=tmp_path
    )
    assert result.ok and result.level.name == "none"  # two checks verify little
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["level"] == result.level.to_json()
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"**{result.level.headline()}**" in markdown
