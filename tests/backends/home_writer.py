"""A backend broken on purpose: the reference store, but each session also leaves a file in the
user's home, as Hermes forks did whose renamed home variable memspec did not point away
(``~/.nastech``). What certification writes is checked against it
(``tests/harness/test_hermes_line.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memspec.reference_impl import open_store as reference


def open_store(root: Path, **limits: Any) -> Any:
    """Opens the reference store on ``root`` and writes ``~/.home-writer/state``."""
    state = Path.home() / ".home-writer"
    state.mkdir(exist_ok=True)
    (state / "state").write_text(str(root), encoding="utf-8")
    return reference(root, **limits)
