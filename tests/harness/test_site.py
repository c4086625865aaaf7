"""``memspec site``: the results pages rendered from the JSON their commands save (``matrix
--json``, ``sweep --json``, ``tests.zoo --json``, ``tests.providers_sweep --json``,
``benchmarks.bench --json``), the grid judged again from the saved records by the rules of a
report; a page without its JSON is listed with the command that saves it; bad input is a usage
error (the browser's view is in tests/integration/test_pages_browser.py)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from memspec.conformance.commands import cli
from memspec.conformance.hermes.matrix import Column, Matrix, columns_from_json
from memspec.spec.document import installed_spec
from tests import providers_sweep
from tests.sample_runs import SLOW, TURN, sample_providers_run, sample_results


def test_the_site_renders_each_saved_run(tmp_path: Path, capsys) -> None:
    results = sample_results(tmp_path / "results")
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "site")]) == 0
    written = sorted(p.name for p in (tmp_path / "site").iterdir())
    assert written == ["benchmarks.html", "index.html", "matrix.html", "providers.html", "zoo.html"]
    assert "page: " in capsys.readouterr().out
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    # the sweep saved no JSON here: the index says which command saves it
    assert "memspec sweep … --json docs/results/sweep.json" in index
    matrix = (tmp_path / "site" / "matrix.html").read_text(encoding="utf-8")
    assert "Measured by <code>memspec matrix --page docs/results/matrix.md</code>" in matrix


def test_the_grid_holds_the_verdict_of_every_clause_and_backend(tmp_path: Path) -> None:
    results = sample_results(tmp_path / "results")
    saved = json.loads((results / "matrix.json").read_text(encoding="utf-8"))
    matrix = Matrix.build(columns_from_json(saved, "matrix.json"))
    cli.main(["site", "--results", str(results), "--out", str(tmp_path / "site")])
    page = (tmp_path / "site" / "matrix.html").read_text(encoding="utf-8")
    grid = page[page.index('id="grid"') :]
    symbols = {"pass": "✓", "fail": "✗", "skip": "–", "n/a": "○"}
    assert len(matrix.clauses) == len(installed_spec("store").clauses)
    for clause, row in zip(matrix.clauses, matrix.cells, strict=True):
        found = re.search(rf'id="c-{clause.id}">.*?</tr>', grid)
        assert found is not None, clause.id
        cells = re.findall(r'<td class="v-([a-z]+)"[^>]*>([^<]*)</td>', found.group())
        want = [("na" if v.status == "n/a" else v.status, symbols[v.status]) for v in row]
        assert cells == want, clause.id
    # the levels of the backends are the report's
    assert "<td>sample 1</td><td>none</td>" in page and "<td>clean 1</td><td>full</td>" in page


def test_the_sweep_page_compares_each_later_line_with_its_base(tmp_path: Path) -> None:
    # sweep --json with --then saves the base release; a fork that fails what its base fails
    # shows no change, though the fork before it passed
    from memspec.conformance.hermes.matrix import matrix_json

    results = sample_results(tmp_path / "results")
    saved = json.loads((results / "matrix.json").read_text(encoding="utf-8"))
    sample, clean = columns_from_json(saved, "matrix.json")
    columns = [sample, Column("clean==1", clean.run, clean.checks), sample]
    columns[2] = Column("again==1", sample.run, sample.checks)
    sweep = matrix_json(Matrix.build(columns), "Release sweep", sample.label)
    (results / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "sweep.html").read_text(encoding="utf-8")
    assert "in clean==1 (against sample 1)" in page
    assert "again==1" not in page.split("<h2>Verdicts that changed</h2>", 1)[1].split("</ul>")[0]
    # each later line's own base, as the sweep saves it, is the one it is compared with
    sweep["bases"] = {"again==1": "clean==1"}
    (results / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "site2")]) == 0
    page = (tmp_path / "site2" / "sweep.html").read_text(encoding="utf-8")
    assert "in again==1 (against clean==1)" in page


def test_matrix_saves_the_json_the_site_renders(tmp_path: Path, monkeypatch) -> None:
    # matrix --json keeps the records; read back they judge every clause as the reports do
    saved = tmp_path / "saved"
    saved.mkdir()
    for name, failing in (("a", ["FORMAT-4"]), ("b", [])):
        checks = [{"id": f"X/{c}", "clauses": [c], "status": "failed", "message": "E\nboom",
                   "kind": "violation", "blamed": c, "reason": "E"} for c in failing]  # fmt: skip
        checks.append({"id": "X/ok", "clauses": ["FORMAT-2"], "status": "passed", "message": ""})
        run = {"backend": "b", "name": name, "version": "1", "features": ["core"], "profile": "ci"}
        (saved / name).mkdir()
        (saved / name / "report.json").write_text(json.dumps({"run": run, "checks": checks}))
    monkeypatch.setattr("sys.argv", ["pytest"])
    argv = ["matrix", "--from-report", str(saved / "a"), "--from-report", str(saved / "b")]
    target = tmp_path / "matrix.json"
    assert cli.main([*argv, "--out", str(tmp_path / "out"), "--json", str(target)]) == 0
    columns = columns_from_json(json.loads(target.read_text()), str(target))
    again = Matrix.build(columns)
    original = Matrix.build([Column.load(saved / "a"), Column.load(saved / "b")])
    assert again.cells == original.cells and [c.label for c in columns] == ["a 1", "b 1"]
    # a passed check is saved as its id, clauses and status: nothing at its default
    passed = json.loads(target.read_text())["columns"][1]["checks"][0]
    assert set(passed) <= {"id", "clauses", "status", "features", "duration"}, passed


def test_bad_input_is_a_usage_error(tmp_path: Path, capsys) -> None:
    results = sample_results(tmp_path / "results")
    (results / "zoo.json").write_text('{"not": "a zoo"}', encoding="utf-8")
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "s")]) == 2
    assert "zoo.json is not the JSON python -m tests.zoo --json writes" in capsys.readouterr().err
    (results / "zoo.json").unlink()
    (results / "matrix.json").write_text("[1]", encoding="utf-8")
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "s")]) == 2
    assert "is not a saved matrix" in capsys.readouterr().err
    assert cli.main(["site", "--results", str(tmp_path / "nowhere"), "--out", "x"]) == 2
    assert "no such directory" in capsys.readouterr().err
    missing = str(tmp_path / "no" / "m.json")
    assert cli.main(["matrix", "--from-report", str(results), "--json", missing]) == 2
    assert "--json" in capsys.readouterr().err


def _text(markup: str) -> str:
    """Returns what a person reads of ``markup``: its text, tags gone, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_the_providers_page_shows_the_sweep(tmp_path: Path, capsys) -> None:
    # the JSON is the one the sweep writes for a kept run (--from): holographic fails PLUGIN-11
    # (argued by its note) and PLUGIN-3 (argued by none); hermes-local-memory timed out
    run = sample_providers_run(tmp_path / "run")
    results = tmp_path / "results"
    results.mkdir()
    saved = results / "providers.json"
    # a note not matched by a failure, and a failure without its note, are left to settle: 1
    assert providers_sweep.main(["--from", str(run), "--json", str(saved)]) == 1
    assert f"wrote {saved}" in capsys.readouterr().out
    assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "providers.html").read_text(encoding="utf-8")
    # the grid row of holographic: each PLUGIN clause's verdict of its report, symbol and colour
    rows = json.loads((run / "holographic" / "report.json").read_text())["clauses"]
    symbols = {"pass": "✓", "fail": "✗"}
    row = re.search(r'id="p-holographic">.*?</tr>', page)
    assert row is not None
    cells = re.findall(r'<td class="v-([a-z]+)" title="([^"]*)">([^<]*)</td>', row.group())
    assert [(css, symbol) for css, _, symbol in cells] == [
        (r["status"], symbols[r["status"]]) for r in rows
    ]
    assert [r["clause"] for r in rows] == [
        c.id for c in installed_spec().of_subject("provider").clauses
    ]
    # a failing cell's title holds what failed
    assert any(css == "fail" and html.escape(TURN) in title for css, title, _ in cells)
    # its summary: level, counts and the time the certification took
    report = json.loads((run / "holographic" / "report.json").read_text())
    summary = (
        f"<td>holographic (bundled with hermes-agent 0.19.0)</td><td>{report['level']['name']}"
    )
    assert summary + f"</td><td>{report['summary']['passed']}</td><td>2</td>" in page
    assert "<td>46 s</td>" in page
    # the provider with no report says so, in its row and in its section
    shown = _text(page)
    assert "hermes-local-memory 0.3.1no report: timed out" in shown
    # each failing clause with what failed and its note, or that none argues it yet
    note = providers_sweep.NOTES[("holographic", "PLUGIN-11")]
    assert f"✗ fail PLUGIN-11 {TURN}{note.replace('`', '')}" in shown
    assert f"✗ fail PLUGIN-3 {SLOW}? unchecked not argued yet" in shown
    # the providers not certified, each with why
    certified = shown[shown.index("Not certified here") :]
    for package, why in providers_sweep.ELSEWHERE:
        assert f"{package}{why.replace('`', '')}" in certified
    for package, why in providers_sweep.NOT_YET:
        assert f"{package}{why.replace('`', '')}" in certified


def test_the_providers_not_certified_yet_each_say_why() -> None:
    from memspec.conformance.commands.site import render_providers

    saved = {"clauses": [], "subjects": [], "elsewhere": []}
    page = render_providers({**saved, "not_yet": [{"package": "a 1.0", "why": "needs `x`"}]})
    assert "<td>a 1.0</td><td>needs <code>x</code></td>" in page
    # a run saved before the reasons were kept lists bare names: their reason is that one
    page = render_providers({**saved, "not_yet": ["b 2.0"]})
    assert "<td>b 2.0</td><td>its installation and its code not read yet</td>" in page


def test_providers_json_is_the_one_the_sweep_writes(tmp_path: Path, capsys) -> None:
    results = sample_results(tmp_path / "results")
    saved = json.loads((results / "providers.json").read_text(encoding="utf-8"))
    failing = {s["key"]: s["failing"] for s in saved["subjects"]}
    assert failing["holographic"] == [
        {"clause": "PLUGIN-3", "failure": SLOW, "note": None},
        {"clause": "PLUGIN-11", "failure": TURN,
         "note": providers_sweep.NOTES[("holographic", "PLUGIN-11")]},
    ]  # fmt: skip
    # what the command writes not being there is a usage error, in one line
    for bad in ('{"not": "providers"}', '{"clauses": [], "subjects": [{"key": "x"}], '
                '"elsewhere": [], "not_yet": []}', "[1, 2]"):  # fmt: skip
        (results / "providers.json").write_text(bad, encoding="utf-8")
        assert cli.main(["site", "--results", str(results), "--out", str(tmp_path / "s")]) == 2
        err = capsys.readouterr().err
        assert "providers.json is not the JSON python -m tests.providers_sweep writes" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # so is a --json or a --from the sweep cannot use, before anything is certified
    run = sample_providers_run(tmp_path / "run")
    for argv, said in (
        (["--from", str(run), "--json", str(tmp_path / "no" / "p.json")], "no such directory"),
        (["--from", str(run), "--json", str(tmp_path)], "is a directory"),
        (["--from", str(tmp_path / "nowhere"), "--json", str(tmp_path / "p.json")], "cannot read"),
    ):
        assert providers_sweep.main(argv) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    for kept in ("[1]", '{"holographic": "done"}'):
        (run / "sweep.json").write_text(kept, encoding="utf-8")
        assert providers_sweep.main(["--from", str(run), "--json", str(tmp_path / "p.json")]) == 2
        err = capsys.readouterr().err
        assert "cannot read the run" in err and len(err.strip().splitlines()) == 1


def test_a_chart_keeps_matplotlibs_font_cache_in_memspecs_cache(tmp_path: Path) -> None:
    # matplotlib builds a font cache on its first chart: under the cache directory memspec
    # documents, never a folder of matplotlib's own in the home or the user cache directory
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    environment = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(cache)}
    environment.pop("MPLCONFIGDIR", None)
    environment.pop("MEMSPEC_CACHE_DIR", None)
    script = (
        "from memspec.conformance.commands.site import bar_chart; bar_chart('t', ['a'], [1], 's')"
    )
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, timeout=120)
    assert list((cache / "memspec" / "matplotlib").glob("fontlist-*.json"))
    assert sorted(p.name for p in cache.iterdir()) == ["memspec"] and not any(home.iterdir())
