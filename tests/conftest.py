"""Hypothesis profiles and shared fixtures of the harness's own tests.

With ``CI`` set, Hypothesis loads its built-in deterministic ``ci`` profile (derandomised, no
example database). ``thorough`` is for bug hunting: ``pytest --hypothesis-profile thorough``.
"""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("thorough", max_examples=2000, derandomize=False, deadline=None)


@pytest.fixture
def short_temp(tmp_path: Path) -> Iterator[Path]:
    """A new, empty temp directory with a short path, linked from ``tmp_path/tmp``.

    Worker processes talk through a Unix socket under the temp directory, and a socket's path
    may not exceed 107 bytes: pytest's own ``tmp_path`` can be too long for that.
    """
    temp = Path(tempfile.mkdtemp(prefix="ms-"))
    (tmp_path / "tmp").symlink_to(temp)
    yield temp
    shutil.rmtree(temp, ignore_errors=True)
