"""Backends broken on purpose, for the harness's own tests, one module per base they build on.

- ``wrappers.py``: the reference store behind a wrapper that changes what it answers or the
  files around it (format, limits, matching, snapshot, drift, contract), and stores that
  misbehave for the harness's sake (hang, raise, thread-bound) or take a choice the spec leaves
  open;
- ``naive_broken.py``: the naive store (``naive.py``, written from the contract alone) with one
  step overridden (atomic writes, files and modes, fence, scan, backups);
- ``procs.py``: a file store claiming ``multi-process``, ``crash-safe`` and ``durable`` with one
  step of its write protocol broken (locks, temps, fsyncs, read and write errors);
- ``jsonl_naive.py``, ``protocol_faults.py``: JSON Lines servers with a protocol defect, run as
  ``--backend-cmd``.

Each defect is defined once, but for three twins across the naive and file-store bases that
``procs.py`` names; the zoo (``tests/zoo.py``) lists them with the clauses that must catch them.
"""

from pathlib import Path
from typing import Any


def factory_of(cls: type) -> Any:
    """Returns the backend factory ``(root, **limits) -> cls(root, **limits)``, documented as
    ``cls``."""

    def open_store(root: Path, **limits: int) -> Any:
        return cls(root, **limits)

    open_store.__doc__ = cls.__doc__
    return open_store
