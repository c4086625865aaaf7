"""``memspec doctor`` on memory directories written by real Hermes: hermes-agent 0.19.0's own
``MemoryStore``, in the environment ``memspec hermes`` builds for it (skipped, with the reason,
when the package index cannot be reached). Hermes' directory reads healthy; damaged, each state
is reported by its clause, and after ``--fix`` Hermes writes the file again where its drift
guard had refused it, with the damaged bytes in the backup doctor names.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memspec.conformance.core.errors import UsageError
from memspec.conformance.core.locations import cache_dir
from memspec.conformance.hermes.releases import Release, ensure_venv
from tests.harness.test_doctor import backups, clauses, diagnosis, doctor

HERMES = """
import json, os, sys
from tools.memory_tool import MemoryStore
store = MemoryStore(memory_char_limit=int(sys.argv[1]), user_char_limit=1375)
store.load_from_disk()
print(json.dumps([store.add(target, text) for target, text in json.loads(sys.argv[2])]))
"""


@pytest.fixture(scope="module")
def hermes() -> Path:
    try:
        return ensure_venv(Release("hermes-agent", "0.19.0"), cache_dir())
    except UsageError as error:
        pytest.skip(f"hermes-agent 0.19.0 cannot be installed here: {error}")


def hermes_adds(python: Path, home: Path, adds: list[tuple[str, str]], limit: int = 2200) -> list:
    result = subprocess.run(
        [str(python), "-c", HERMES, str(limit), json.dumps(adds)],
        env={"HERMES_HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def hermes_entries(python: Path, home: Path) -> list[str]:
    """The entries Hermes' store reads from the profile's MEMORY.md."""
    script = "from tools.memory_tool import MemoryStore as S; s = S(); s.load_from_disk()\n"
    script += "import json; print(json.dumps(s.memory_entries))"
    result = subprocess.run(
        [str(python), "-c", script], env={"HERMES_HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def home(hermes: Path, tmp_path: Path) -> Path:
    home = tmp_path / "hermes-home"
    answers = hermes_adds(
        hermes, home,
        [("memory", "User prefers tabs over spaces"), ("memory", "Project uses Go 1.22 — 日本語"),
         ("user", "Name: Ada; works in London")],
    )  # fmt: skip
    assert all(answer["success"] for answer in answers), answers
    return home


def test_what_hermes_wrote_is_healthy(home: Path) -> None:
    found = diagnosis(home / "memories")
    assert found["healthy"], found["problems"]
    assert [t["entries"] for t in found["targets"]] == [2, 1]
    assert doctor("--json", home=home).returncode == 0  # the profile's directory by default


def test_what_hermes_misreads_is_reported_and_fixed(hermes: Path, home: Path) -> None:
    # Hermes keeps a byte order mark in the first entry (its scan then blocks that entry) and
    # reads entries around a spaced § line as one; after --fix it reads them as they were.
    memories = home / "memories"
    path = memories / "MEMORY.md"
    damaged = b"\xef\xbb\xbf" + path.read_bytes().replace("\n§\n".encode(), " \n§  \n".encode())
    path.write_bytes(damaged)
    assert clauses(diagnosis(memories)) == {"READ-1", "READ-3"}
    assert hermes_entries(hermes, home) == ["\ufeffUser prefers tabs over spaces \n§  \n"
                                            "Project uses Go 1.22 — 日本語"]  # fmt: skip
    result = doctor(str(memories), "--fix")
    assert result.returncode == 0, result.stdout
    assert damaged in backups(memories).values()
    assert hermes_entries(hermes, home) == ["User prefers tabs over spaces",
                                            "Project uses Go 1.22 — 日本語"]  # fmt: skip
    assert hermes_adds(hermes, home, [("memory", "Editor: helix")])[0]["success"]
    assert diagnosis(memories)["healthy"]


def test_a_lowered_limit_in_the_config_is_read(hermes: Path, home: Path) -> None:
    (home / "config.yaml").write_text("memory:\n  memory_char_limit: 20\n", "utf-8")
    found = diagnosis(home / "memories")
    assert found["limits"]["memory"]["source"].startswith("memory.memory_char_limit in ")
    assert "DRIFT-2" in clauses(found)
