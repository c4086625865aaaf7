"""What a file in a memory root is, from its name alone (CONTRACT-11, FILES-5, DRIFT-3, CRASH-2).

CONTRACT-11 fixes the lock ``<FILE>.lock`` and the backups ``<FILE>.bak.<suffix>`` beside the data
files; the temp name ``.<FILE>.tmp.<suffix>`` is only a convention (ATOMIC-1), so checks treat
``temp`` and ``other`` alike while the reference sweeps its own temps. This module is the one place
that reads these names.

    >>> [file_kind(n) for n in ("USER.md", "MEMORY.md.lock", "MEMORY.md.bak.3f2a", "notes.txt")]
    ['data', 'lock', 'backup', 'other']
    >>> file_kind(".MEMORY.md.tmp.9c1e"), file_kind(".MEMORY.md.tmp.9c1e", "USER.md")
    ('temp', 'other')
"""

from __future__ import annotations

from typing import Final, Literal

from memspec.spec.targets import FILENAMES

FileKind = Literal["data", "lock", "backup", "temp", "other"]

DATA_NAMES: Final[frozenset[str]] = frozenset(FILENAMES.values())
NAMED_KINDS: Final[frozenset[str]] = frozenset({"data", "lock", "backup"})
"""The kinds whose names CONTRACT-11 fixes; a file of any other kind is a temp or a sidecar."""


def file_kind(name: str, data_name: str | None = None) -> FileKind:
    """Returns what the file ``name`` directly in a root is (CONTRACT-11, FILES-5, DRIFT-3):
    ``data``, ``lock`` (LOCK-1), ``backup`` (a non-empty suffix), ``temp`` (ATOMIC-1, CRASH-2; the
    suffix may be empty) or ``other`` (anything else, a path with a directory part included). With
    ``data_name``, the lock, backups and temps of the other data file are ``other``."""
    if "/" in name:
        return "other"
    owners = DATA_NAMES if data_name is None else DATA_NAMES & {data_name}
    for data in owners:
        if name == data:
            return "data"
        if name == f"{data}.lock":
            return "lock"
        if name.startswith(f"{data}.bak.") and len(name) > len(data) + len(".bak."):
            return "backup"
        if name.startswith(f".{data}.tmp."):
            return "temp"
    return "other"
