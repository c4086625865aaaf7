"""What a file in a memory root is, from its name alone (CONTRACT-11, FILES-5, DRIFT-3, CRASH-2).

CONTRACT-11 fixes three kinds of names beside the data files ``MEMORY.md`` and ``USER.md``: the
lock ``<FILE>.lock``, the backups ``<FILE>.bak.<suffix>`` and nothing else; every other file
is a sidecar of the store's own. ATOMIC-1 asks only that a temp file be uniquely named in the
same directory, so one more kind is a convention rather than a rule: ``.<FILE>.tmp.<suffix>``,
the temp name of the reference store and of the harness's own fixtures. A check therefore
treats ``temp`` and ``other`` alike ("a temp file or a sidecar"), while the reference sweeps
only its own ``temp`` names::

    >>> [file_kind(n) for n in ("USER.md", "MEMORY.md.lock", "MEMORY.md.bak.3f2a", "notes.txt")]
    ['data', 'lock', 'backup', 'other']
    >>> file_kind(".MEMORY.md.tmp.9c1e"), file_kind(".MEMORY.md.tmp.9c1e", "USER.md")
    ('temp', 'other')

This module is the one place that reads these names; everything else asks it.
"""

from __future__ import annotations

from typing import Final, Literal

from memspec.spec.targets import FILENAMES

FileKind = Literal["data", "lock", "backup", "temp", "other"]

DATA_NAMES: Final[frozenset[str]] = frozenset(FILENAMES.values())
NAMED_KINDS: Final[frozenset[str]] = frozenset({"data", "lock", "backup"})
"""The kinds whose names CONTRACT-11 fixes; a file of any other kind is a temp or a sidecar."""


def file_kind(name: str, data_name: str | None = None) -> FileKind:
    """Returns what the file ``name`` directly in a root is (CONTRACT-11, FILES-5, DRIFT-3).

    - ``data``: ``MEMORY.md`` or ``USER.md``;
    - ``lock``: ``<FILE>.lock`` (LOCK-1, CONTRACT-11);
    - ``backup``: ``<FILE>.bak.<suffix>`` with a non-empty suffix (DRIFT-3, CONTRACT-11);
    - ``temp``: ``.<FILE>.tmp.<suffix>``, the conventional temp name (ATOMIC-1, CRASH-2); the
      suffix may be empty, since a sweep removes whatever a writer of that name could leave;
    - ``other``: anything else, including a path with a directory part.

    With ``data_name`` (``"MEMORY.md"``), only names of that data file count: the lock, backups
    and temps of the other one are ``other``, so ``file_kind(name, "MEMORY.md") == "backup"``
    asks "is this a backup of MEMORY.md".
    """
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
