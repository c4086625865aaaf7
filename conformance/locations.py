"""Where memspec keeps what outlives a run: the user cache directory.

Nothing is ever written under the installed package. A certification writes its reports where
``--report`` points, its temporary files under the system temp directory (removed at exit), and
what is worth keeping between runs here: Hermes environments and Hypothesis's caches.

Precedence: an explicit override, else ``$MEMSPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/memspec``,
else ``~/.cache/memspec``.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_VARIABLE = "MEMSPEC_CACHE_DIR"


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
