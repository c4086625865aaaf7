"""The logical file-system operations a recorded trace is made of (by interposition or by
strace), which the persistence models of :mod:`memspec.conformance.crash.persistence` replay."""

from __future__ import annotations

from dataclasses import dataclass

ENTRY_OPS = frozenset({"create", "rename", "unlink"})
DATA_OPS = frozenset({"write", "truncate"})
KINDS = ENTRY_OPS | DATA_OPS | {"fsync", "dirsync", "ack"}


@dataclass(frozen=True)
class Op:
    """An Op is one logical file-system operation of a trace (module docs for the kinds): ``step``
    is its call's 1-based number within mutation ``mutation``, ``ino`` the inode acted on, ``name``
    the entry created or unlinked or a rename's destination, ``source`` a rename's source,
    ``replaced`` the inode its destination named before."""

    kind: str
    step: int = 0
    mutation: int = 0
    ino: int | None = None
    name: str = ""
    source: str = ""
    offset: int = 0
    data: bytes = b""
    length: int = 0
    replaced: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"an Op's kind is one of {sorted(KINDS)}, got {self.kind!r}")
