"""The executable specification of bounded, file-backed agent memory.

``SPEC.md`` (beside this file) states the clauses and their examples; this package is their
pure half: the file codec, the outcome codes, the model that decides every operation, and the
extraction of clauses and examples. It imports nothing else of memspec and touches no disk.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memspec.spec.clauses import Clause, parse_clauses
    from memspec.spec.codec import (
        DELIMITER,
        FileState,
        classify_bytes,
        decode,
        encode_entries,
        normalize_content,
        parse_text,
        serialize,
        usage,
    )
    from memspec.spec.document import Spec, installed_spec, read_spec
    from memspec.spec.examples import Example, Step, parse_examples
    from memspec.spec.model import (
        State,
        backups_of,
        disk,
        entries_on_disk,
        initial_state,
        render_from_disk,
        session_entries,
        snapshot_of,
        step,
    )
    from memspec.spec.operations import Add, Batch, ExternalWrite, Load, Patch, Remove, Replace
    from memspec.spec.rules import Outcome
    from memspec.spec.snapshot import render_snapshot, render_unreadable, snapshot_difference
    from memspec.spec.targets import DEFAULT_LIMITS, FILENAMES, TARGETS
    from memspec.spec.versions import SpecVersion, parse_version, version_problems

__all__ = [
    "DEFAULT_LIMITS",
    "DELIMITER",
    "FILENAMES",
    "SPEC_VERSION",
    "TARGETS",
    "Add",
    "Batch",
    "Clause",
    "Example",
    "ExternalWrite",
    "FileState",
    "Load",
    "Outcome",
    "Patch",
    "Remove",
    "Replace",
    "Spec",
    "SpecVersion",
    "State",
    "Step",
    "backups_of",
    "classify_bytes",
    "decode",
    "disk",
    "encode_entries",
    "entries_on_disk",
    "initial_state",
    "installed_spec",
    "normalize_content",
    "parse_clauses",
    "parse_examples",
    "parse_text",
    "parse_version",
    "read_spec",
    "render_from_disk",
    "render_snapshot",
    "render_unreadable",
    "serialize",
    "session_entries",
    "snapshot_difference",
    "snapshot_of",
    "step",
    "usage",
    "version_problems",
]


_HOMES: dict[str, tuple[str, ...]] = {
    "clauses": ("Clause", "parse_clauses"),
    "codec": (
        "DELIMITER", "FileState", "classify_bytes", "decode", "encode_entries",
        "normalize_content", "parse_text", "serialize", "usage",
    ),
    "document": ("Spec", "installed_spec", "read_spec"),
    "examples": ("Example", "Step", "parse_examples"),
    "model": (
        "State", "backups_of", "disk", "entries_on_disk", "initial_state", "render_from_disk",
        "session_entries", "snapshot_of", "step",
    ),
    "operations": ("Add", "Batch", "ExternalWrite", "Load", "Patch", "Remove", "Replace"),
    "rules": ("Outcome",),
    "snapshot": ("render_snapshot", "render_unreadable", "snapshot_difference"),
    "targets": ("DEFAULT_LIMITS", "FILENAMES", "TARGETS"),
    "versions": ("SpecVersion", "parse_version", "version_problems"),
}  # fmt: skip
"""The module of each public name. A name is imported when first asked for, so that a program
that needs one module of the spec (a store, ``memspec serve``) does not compile every regular
expression of the others."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Returns the public name ``name``, importing its module when first asked for; and
    ``SPEC_VERSION``, the version of the installed SPEC.md, read from its version line when first
    asked for (:mod:`memspec.spec.versions`), so importing the package reads no file."""
    if name == "SPEC_VERSION":
        from memspec.spec.document import installed_version

        return installed_version().number
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME_OF[name]}"), name)
    globals()[name] = value
    return value
