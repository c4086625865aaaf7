"""A campaign on several machines shares one Hypothesis example database in Redis, so that a
failure one campaign process finds replays in every other (``docs/campaigns.md``).

The test starts its own ``redis-server`` on a free loopback port, runs one campaign process —
``memspec certify --profile thorough --hypothesis-db redis://...`` against a backend broken on
purpose — and then a second process that only replays the database (Hypothesis phase ``reuse``,
no generation at all): it fails with the same shrunk example, which it could only have from the
shared database. Before the first process, the same replay finds nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None,
    reason="needs redis-server (apt-get install -y redis-server; .ci/run installs it)",
)
redis = pytest.importorskip(
    "redis", reason="needs the redis package: pip install memspec[campaign]"
)

PROJECT = Path(__file__).resolve().parents[2]
BACKEND = "tests.backends.naive_broken:SinglePassFence"
CHECK = "properties.fence_escape"
REPLAY = """
import sys, tempfile
from pathlib import Path
from hypothesis import Phase, settings
settings.register_profile("replay-only", phases=[Phase.reuse])
settings.load_profile("replay-only")
from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import CheckContext, all_checks
backend, check, database = sys.argv[1:4]
with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch, "root")
    root.mkdir()
    context = CheckContext(InProcessBackend(backend, 10.0), root, Path(scratch),
                           PROFILES["thorough"], None, database)
    try:
        all_checks()[check].run(context)
    except AssertionError as failure:
        print(failure)
        sys.exit(1)
    except BaseException as nothing:  # Hypothesis: no example to run in this phase
        print(f"no failure replayed: {type(nothing).__name__}")
        sys.exit(0)
print("no failure replayed")
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own on a free loopback port, stopped afterwards."""
    port = _free_port()
    server = subprocess.Popen(
        [str(REDIS_SERVER), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"redis-server did not start on port {port}")
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


def _environment() -> dict[str, str]:
    paths = [str(PROJECT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _replay(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", REPLAY, BACKEND, CHECK, url],
        cwd=PROJECT, env=_environment(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _falsifying_example(output: str) -> str:
    # Hypothesis names the shrunk example "Falsifying example" (older) or "Failing test case".
    found = re.search(r"(Falsifying example|Failing test case):", output)
    assert found, output
    start = found.start()
    return output[start : output.index("Reproduce with:", start)].replace("E   ", "").strip()


def test_a_failure_found_by_one_campaign_process_replays_in_another(redis_url: str) -> None:
    before = _replay(redis_url)
    # The shared database is empty: replaying alone finds nothing.
    assert before.returncode == 0, before.stdout + before.stderr
    first = subprocess.run(
        [sys.executable, "-m", "memspec.conformance", "certify", "--backend", BACKEND, "-k",
         CHECK, "--profile", "thorough", "--hypothesis-db", redis_url, "-v"],
        cwd=PROJECT, env=_environment(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 1, first.stdout + first.stderr
    assert "FENCE-3:" in first.stdout, first.stdout
    assert f"--profile thorough --hypothesis-db {redis_url}" in first.stdout, first.stdout
    keys = redis.Redis.from_url(redis_url).keys(f"hypothesis-example:memspec:{CHECK}:*")
    # The first process saved its shrunk failing example under the check's namespace.
    assert keys, "no example was saved in the shared database"
    second = _replay(redis_url)
    # The second process generates nothing, yet fails with the very example the first found.
    assert second.returncode == 1, second.stdout + second.stderr
    assert second.stdout.startswith("FENCE-3:"), second.stdout
    assert _falsifying_example(second.stdout) == _falsifying_example(first.stdout)
