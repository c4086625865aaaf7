"""``crash-safe`` and ``durable`` read from the strace record of a real write
(:func:`~memspec.conformance.hermes.releases.write_features`), on three writers of
``MEMORY.md``: in place, a temp file renamed over it, and the same with the temp file and the
directory synced. The text of the code never enters: the renaming writer hides its rename in
a helper of another name, as nastech-agent's ``_write_file`` delegates to
``utils.atomic_write_text``. Skipped, with the reason, where strace cannot trace.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memspec.conformance.hermes.releases import write_features
from memspec.conformance.tamper.fstrace import QUIET, SECCOMP_BPF, STRACE_ARGUMENTS, read_strace
from memspec.conformance.tamper.strace import strace_problem

HELPER = """
import os, sys, tempfile
root = sys.argv[1]

def atomic_write_text(path, text, sync):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".mem_", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        if sync:
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if sync:
        directory = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(directory)
        os.close(directory)
"""
WRITERS = {
    "in place": "open(os.path.join(root, 'MEMORY.md'), 'w').write('entry')",
    "renamed": "atomic_write_text(os.path.join(root, 'MEMORY.md'), 'entry', False)",
    "renamed and synced": "atomic_write_text(os.path.join(root, 'MEMORY.md'), 'entry', True)",
}
EXPECTED = {
    "in place": [],
    "renamed": ["crash-safe"],
    "renamed and synced": ["crash-safe", "durable"],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_the_features_of_a_write_are_read_from_its_system_calls(
    tmp_path: Path, writer: str
) -> None:
    problem = strace_problem()
    if problem is not None:
        pytest.skip(problem)
    root, trace = tmp_path / "root", tmp_path / "trace"
    root.mkdir()
    script = textwrap.dedent(HELPER) + WRITERS[writer] + "\n"
    subprocess.run(
        ["strace", SECCOMP_BPF, QUIET, *STRACE_ARGUMENTS, "-o", str(trace),
         sys.executable, "-I", "-c", script, str(root)],
        check=True, timeout=120,
    )  # fmt: skip
    records = read_strace(trace.read_text(encoding="utf-8"), str(root), {}).records
    assert write_features(records, str(root / "MEMORY.md")) == EXPECTED[writer]
