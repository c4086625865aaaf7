"""Where memspec keeps what outlives a run: the user cache directory.

Nothing is written under the installed package; reports go where ``--report`` points and temporary
files under the system temp directory. The cache holds Hermes environments, Hypothesis's caches and
``memspec serve``'s bytecode (:func:`keep_bytecode`). Precedence: an explicit override,
``$MEMSPEC_CACHE_DIR``, ``$XDG_CACHE_HOME/memspec``, ``~/.cache/memspec``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

CACHE_VARIABLE = "MEMSPEC_CACHE_DIR"

PYTHONPATH_ADDED = "MEMSPEC_PYTHONPATH_ADDED"
"""The variable naming the directory memspec put on ``PYTHONPATH`` for its own worker
processes (the directory it was run from); :func:`backend_environment` takes it off again."""


RUNNER_VARIABLES = (
    "PYTEST_CURRENT_TEST",
    "PYTEST_VERSION",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
)
"""What pytest and pytest-xdist set in the processes that run memspec's checks: a backend runs
as it would for its users, never told it is under a test (a provider that refuses its data
directory under pytest, as nyx-memory does, would otherwise fail for the harness's reasons)."""


def backend_environment() -> dict[str, str]:
    """Returns the environment a command backend starts in: memspec's own, without the directory
    memspec added to ``PYTHONPATH``, so that the backend's imports, and the count of calls strace
    injects faults by, do not vary with that directory's listing, and without the test runner's
    variables (:data:`RUNNER_VARIABLES`)."""
    environment = {k: v for k, v in os.environ.items() if k not in RUNNER_VARIABLES}
    added = environment.pop(PYTHONPATH_ADDED, None)
    paths = environment.get("PYTHONPATH", "").split(os.pathsep)
    if added and added in paths:
        paths.remove(added)
        if any(paths):
            environment["PYTHONPATH"] = os.pathsep.join(paths)
        else:
            environment.pop("PYTHONPATH")
    return environment


def cache_dir(override: str | None = None) -> Path:
    """Returns the cache directory of memspec, absolute (see the module docstring)."""
    if override:
        return Path(override).expanduser().absolute()
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "memspec"


def writable_dir(path: Path) -> bool:
    """Returns whether ``path`` is (or could be made) a directory this user can write in."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def keep_bytecode() -> None:
    """Lets this process keep the bytecode of the modules it imports from now on in ``pycache``
    under :func:`cache_dir` when the environment forbids writing it beside the sources (a third of
    ``memspec serve``'s start-up). A user's ``PYTHONPYCACHEPREFIX`` is kept; an unwritable cache
    changes nothing."""
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return
    folder = cache_dir() / "pycache"
    if writable_dir(folder):
        sys.pycache_prefix = str(folder)
        sys.dont_write_bytecode = False


def shadows_memspec(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds a ``memspec`` folder other than the running package's (a
    checkout of memspec, with memspec installed from it, not in editable mode): first on the
    import path, that folder would shadow the installed package, and a process started there
    with its directory on the path (``python -c``, a fork server) could not import memspec."""
    here = Path(directory)
    running = Path(__file__).resolve().parents[2]
    if not (here / "memspec").is_dir():
        return False
    editable = (here / "conformance").resolve() == (running / "conformance").resolve()
    return not editable and (here / "memspec").resolve() != running


@contextlib.contextmanager
def scratch_root(prefix: str) -> Iterator[Path]:
    """Yields a new empty root, ``root`` in a new temporary directory, and removes that directory
    whole afterwards: what a transport keeps beside a root (a provider's scratch home and
    temporary directory, ``transport.provider.scratch_of``) goes with it."""
    import tempfile  # here: ``memspec serve`` imports this module at each session's start

    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        yield root


@contextlib.contextmanager
def import_from(directory: str | os.PathLike[str], last: bool = False) -> Iterator[None]:
    """Lets ``--backend MODULE:FACTORY`` name a module of ``directory`` (the one memspec or pytest
    was started in), in this process and its workers, as ``python -m`` would; ``sys.path`` and
    ``PYTHONPATH`` are restored afterwards.

    A directory holding a ``memspec`` folder other than the running package goes last on
    ``sys.path`` and not on ``PYTHONPATH``, so it cannot shadow the installed package. With ``last``
    (``memspec serve``) the directory goes last too: a directory looked at first would make a
    session's calls, and strace's count of them, vary with what other programs write there.
    """
    cwd = os.fspath(directory)
    saved_path, saved_variable = list(sys.path), os.environ.get("PYTHONPATH")
    shadows = shadows_memspec(cwd)
    if last and cwd in sys.path:
        sys.path.remove(cwd)
    if cwd not in sys.path:
        if shadows or last:
            sys.path.append(cwd)
        else:
            sys.path.insert(0, cwd)
    paths = [p for p in (saved_variable or "").split(os.pathsep) if p]
    saved_added = os.environ.get(PYTHONPATH_ADDED)
    if cwd not in paths and not shadows:
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd, *paths])
        os.environ[PYTHONPATH_ADDED] = cwd
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name, value in (("PYTHONPATH", saved_variable), (PYTHONPATH_ADDED, saved_added)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
