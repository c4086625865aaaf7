"""report.html: written beside report.md from the same records, opening on the level and its
blockers, every clause by area, each failure with its evidence and character-level diff, and
everything a backend sent escaped (the browser's view is in tests/harness/test_pages_browser.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from memspec.conformance.verdict.findings import Violation
from memspec.conformance.verdict.records import CheckRecord
from memspec.conformance.verdict.report import write_reports
from memspec.conformance.verdict.webpage import diff, script_hash
from memspec.spec.document import installed_spec
from tests.sample_runs import HOSTILE, INFO, example_failure, failed, passed


def written(tmp_path: Path, records: list[CheckRecord]) -> str:
    write_reports(tmp_path, INFO, records)
    return (tmp_path / "report.html").read_text(encoding="utf-8")


def test_the_report_opens_on_the_level_and_what_holds_it_back(tmp_path: Path) -> None:
    records = [example_failure(), passed("READ/x", ("READ-6",))]
    page = written(tmp_path, records)
    level = json.loads((tmp_path / "report.json").read_text())["level"]
    # the level line states the level report.json holds, before any clause
    shown = re.search(r'<p id="level"[^>]*>conformance level: (\w+)</p>', page)
    assert shown is not None and shown.group(1) == level["name"]
    assert page.index('id="level"') < page.index('id="clauses"')
    # every blocker of report.json is listed, linked to its clause
    blockers = page[page.index('id="blockers"') : page.index("</ul>", page.index('id="blockers"'))]
    for blocker in level["blocked_by"]:
        clause = blocker.split()[0]
        assert f'href="#c-{clause}"' in blockers


def test_every_clause_is_listed_by_area_with_its_verdict(tmp_path: Path) -> None:
    page = written(tmp_path, [example_failure(), passed("READ/x", ("READ-6",))])
    rows = json.loads((tmp_path / "report.json").read_text())["clauses"]
    assert len(rows) == len(installed_spec().clauses)
    for row in rows:
        found = re.search(rf'id="c-{row["clause"]}" data-verdict="([^"]*)"', page)
        assert found is not None and found.group(1) == row["status"], row["clause"]
    # a verdict is a symbol and a word, never a colour alone
    assert '<span class="mark v-fail">✗ fail</span>' in page
    assert '<span class="mark v-pass">✓ pass</span>' in page


def test_a_failure_expands_to_its_evidence_and_its_diff(tmp_path: Path) -> None:
    page = written(tmp_path, [example_failure()])
    start = page.index('id="c-FORMAT-4"')
    clause = page[start : page.index('<div class="clause"', start + 1)]
    assert "<details>" in clause and "<dt>received</dt>" in clause
    # the clause text comes from the parsed spec
    assert "A store writes only the canonical form" in clause
    # the byte order mark is shown as the terminal shows it, and marked as what was added
    assert "<ins>\\ufeff</ins>" in clause
    assert "first difference at code point 0" in clause


def test_everything_a_backend_sent_is_escaped(tmp_path: Path) -> None:
    error = Violation("READ-6", HOSTILE)
    record = failed("READ/x", ("READ-6",), error, f"READ-6: {HOSTILE}")
    page = written(tmp_path, [record])
    # the one script is the page's own, allowed by its hash; the backend's text is text
    assert page.count("<script") == 1 and "<img" not in page
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in page
    own = re.search(r"<script>(.*)</script>", page, re.S)
    assert own is not None and script_hash(own.group(1)) in page


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    page = written(tmp_path, [example_failure()])
    # no external script, style, font or image: nothing the page could fetch
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page


def test_the_diff_is_character_level_and_only_between_values_of_one_kind() -> None:
    shown = diff(["a\u00a0b", "c"], ["a b", "c"])
    assert "<del>\\u00a0</del>" in shown and "<ins> </ins>" in shown
    assert diff("same", "same") == "" and diff({"ok": True}, "E_LIMIT") == ""


def test_evidence_survives_report_json(tmp_path: Path) -> None:
    record = example_failure()
    back = CheckRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back.evidence == record.evidence
    assert back.evidence is not None and back.evidence.received == "\ufeffUser prefers tabs"


def test_a_page_stays_light_however_much_fails(tmp_path: Path) -> None:
    # every clause failed by a check of its own with a long message: the page shows the
    # messages up to a budget, then their heads, and stays under 1 MiB
    records = [
        failed(f"{c.area}/{c.id}", (c.id,), Violation(c.id, "x"), f"{c.id}: " + "ab\n" * 10_000)
        for c in installed_spec().clauses
    ]
    page = written(tmp_path, records)
    assert len(page.encode("utf-8")) < 1024 * 1024
    rows = json.loads((tmp_path / "report.json").read_text())["clauses"]
    failing = [row for row in rows if row["status"] == "fail"]
    assert page.count("more characters in report.json)") == len(failing) > 80
    # the first messages are shown at length (6,000 characters), the last ones by their heads
    left = [int(n) for n in re.findall(r"\((\d+) more characters in report\.json\)", page)]
    assert min(left) < 30_000 - 5_000 and max(left) > 30_000 - 1_000


def test_a_long_value_gives_its_first_difference_alone() -> None:
    long = "a" * 5000
    assert diff(long + "b", long + "c") == (
        "<p>first difference at code point 5000: expected &#x27;…aaaaaaaaaaaab&#x27;, "
        "received &#x27;…aaaaaaaaaaaac&#x27;</p>"
    )
