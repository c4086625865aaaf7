"""The benchmark commands refuse bad input with one clear line and exit status 2, before any
long work starts (``benchmarks/bench.py``, ``benchmarks/certify_time.py``,
``benchmarks/mutation.py``, ``tests/zoo.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from benchmarks import bench, certify_time, mutation
from tests import zoo


def _refused(main: Callable[[Sequence[str]], int], argv: list[str], capsys) -> str:
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's parser.error
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "records",
    [[1, 2], [{"area": "x"}], {"area": "x"}, [{"area": "x", "wall": "9", "to_first_failure": 1}]],
)
def test_bench_refuses_a_zoo_file_it_cannot_read(tmp_path: Path, records: object, capsys) -> None:
    path = tmp_path / "zoo.json"
    path.write_text(json.dumps(records))
    err = _refused(bench.main, ["--only", "zoo", "--zoo", str(path)], capsys)
    assert "is not the JSON that python -m tests.zoo --json writes" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--only", "lin", "--lin", "0x5"],
        ["--only", "lin", "--lin", "4x"],
        ["--only", "nope"],
        ["--rounds", "0"],
        ["--only", "zoo"],
        ["--only", "lin", "--json", "/nonexistent-dir/figures.json"],
    ],
)
def test_bench_refuses_bad_arguments(argv: list[str], capsys) -> None:
    _refused(bench.main, argv, capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["--repeat", "0"],
        ["-n", "0"],
        ["--serve-runs", "x"],
        ["--page", "/nonexistent-dir/p.md"],
        ["--json", "/nonexistent-dir/runs.json"],
        ["--before", "/nonexistent-dir/runs.json"],
    ],
)
def test_certify_time_refuses_bad_arguments(argv: list[str], capsys) -> None:
    _refused(certify_time.main, argv, capsys)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '["a list"]',
        '{"format": 2, "runs": {}}',
        '{"format": 1, "runs": {"x": []}}',
        '{"format": 1, "runs": {"x": [{"seconds": "10", "summary": "1 passed"}]}}',
    ],
)
def test_certify_time_refuses_a_before_file_it_did_not_write(text: str, tmp_path, capsys) -> None:
    before = tmp_path / "before.json"
    before.write_text(text, encoding="utf-8")
    _refused(certify_time.main, ["--before", str(before)], capsys)


def test_the_runs_json_saves_are_the_before_of_a_later_page(tmp_path) -> None:
    """What --json saves, --before reads back; the page sets each backend's first runs side by
    side, for the backends both runs have."""
    old = {"ref": [certify_time.Run(34.4, (0.1, 1.0), "199 passed, 0 failed, 2 skipped", ())]}
    new = {
        "ref": [certify_time.Run(30.2, (0.2, 0.9), "199 passed, 0 failed, 2 skipped", ())],
        "node": [certify_time.Run(400.0, (0.2, 0.9), "201 passed, 0 failed, 0 skipped", ())],
    }
    saved = tmp_path / "before.json"
    saved.write_text(json.dumps(certify_time.runs_json("python -m benchmarks.certify_time", old)))
    section = certify_time.render_before(certify_time.read_before(str(saved)), new)
    assert "| `ref` | 34 s, 199 passed, 0 failed, 2 skipped | 30 s, 199 passed" in section
    assert "`node`" not in section
    assert "Before: `python -m benchmarks.certify_time` at `" in section


@pytest.mark.parametrize("argv", [["--work", "{file}/under", "--groups", "0"], ["--groups", "7"]])
def test_mutation_refuses_bad_arguments(tmp_path: Path, argv: list[str], capsys) -> None:
    (tmp_path / "file").write_text("")
    argv = [a.format(file=tmp_path / "file") for a in argv]
    if "--work" not in argv:
        argv += ["--work", str(tmp_path / "work")]
    _refused(mutation.main, argv, capsys)
    assert not (tmp_path / "work").exists()


def test_zoo_refuses_a_json_path_it_cannot_write(capsys) -> None:
    err = _refused(zoo.main, ["-k", "trailing", "--json", "/nonexistent-dir/zoo.json"], capsys)
    assert "no such directory" in err


def test_zoo_renders_a_member_certified_again_over_an_earlier_run(tmp_path: Path, capsys) -> None:
    # A member certified again after a fix (-k NAME --json) replaces its detection in the
    # whole run's, the later file winning; every other member stays as the earlier run found it.
    def detection(clauses: list[str], wall: float) -> dict[str, object]:
        return {"backend": "tests.backends.naive_broken:trailing_newline", "area": "format",
                "clauses": ["FORMAT-4"], "verdict": "caught", "wall": wall, "status": 1,
                "failures": [["FORMAT/format-writer-is-canonical", clauses]],
                "to_first_failure": 0.5, "note": ""}  # fmt: skip

    earlier, again, out = tmp_path / "run.json", tmp_path / "again.json", tmp_path / "out.json"
    earlier.write_text(json.dumps([detection(["FORMAT-4", "FORMAT-5"], 9.0)]))
    again.write_text(json.dumps([detection(["FORMAT-4"], 3.0)]))
    argv = ["-k", "trailing_newline", "--from-json", str(earlier), "--from-json", str(again)]
    assert zoo.main([*argv, "--json", str(out)]) == 0
    (kept,) = json.loads(out.read_text())
    assert kept["failures"] == [["FORMAT/format-writer-is-canonical", ["FORMAT-4"]]]
    assert kept["wall"] == 3.0
    capsys.readouterr()


@pytest.mark.parametrize("text", ['{"a": 1}', "[1]", "not json"])
def test_zoo_refuses_a_detections_file_it_cannot_read(tmp_path: Path, text: str, capsys) -> None:
    (tmp_path / "run.json").write_text(text)
    err = _refused(zoo.main, ["-k", "trailing", "--from-json", str(tmp_path / "run.json")], capsys)
    assert "--from-json" in err


def test_the_scaling_section_measures_each_size_and_its_growth() -> None:
    from benchmarks.scaling import growth, render_scale, section_scale
    from memspec.conformance.commands.site import render_benchmarks

    assert growth([1, 10], [2.0, 200.0]) == pytest.approx(2.0)  # quadratic reads as 2
    assert growth([1, 10], [3.0, 30.0]) == pytest.approx(1.0)
    scale = section_scale(1, sizes=(400, 4_000))
    small, large = scale["sizes"]["400"], scale["sizes"]["4000"]
    assert large["entries"] > 5 * small["entries"] and large["bytes"] > 5 * small["bytes"]
    assert set(scale["growth"]) >= {"load_ms", "add_ms", "add_peak_kib", "parse_ms"}
    assert scale["foreign"]["bytes"] >= 1_048_576 and scale["foreign"]["remove_ms"] > 0
    assert "| 4,000 |" in render_scale(scale) and "quadratic" in render_scale(scale)
    page = render_benchmarks({"cpus": 2, "load": 0.5, "scale": scale})
    assert "By the size of the memory file" in page
    assert "<svg" in page or "matplotlib" in page  # the chart, or how to get it


def test_the_hermes_timing_script_writes_nothing_in_the_home(tmp_path: Path, monkeypatch) -> None:
    # Hermes makes its home (~/.hermes) when its memory tool is imported: the benchmark's
    # in-process rounds run with every home Hermes reads in a scratch directory
    from tests.hermes_env import hermes_python

    python = hermes_python()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    figures = bench.hermes_in_process(python, 2)
    assert figures["ops_per_s"] > 0
    assert list(home.iterdir()) == []
