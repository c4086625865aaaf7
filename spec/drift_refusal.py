"""The judges of a store's backups of bytes it did not write: the refusal of a foreign file
(DRIFT-3, with DRIFT-2's code and CONTRACT-11's backup field) and the ``OK`` of a rewrite that drops
such bytes (DRIFT-2, DRIFT-5: the answer names the backup).

DRIFT-3 makes ``backup`` and ``message`` required on ``E_DRIFT`` (CONTRACT-3 lists them as optional,
CONTRACT-11 repeats the backup); what the message says is DRIFT-6, a SHOULD, so the judge asks for a
message and does not read it. Every check that sees a refusal asks :func:`judge_drift_refusal`,
whatever situation it set up, so the rule is decided once.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from memspec.spec import codes
from memspec.spec.problems import Problem
from memspec.spec.root_files import file_kind
from memspec.spec.targets import FILENAMES


def backup_name_of(answer: Mapping[str, Any], root: str) -> str | None:
    """Returns the file name the ``backup`` field of ``answer`` points at in ``root`` (an absolute
    path in ``root`` or a bare name), or ``None`` when it is missing, not a str, or outside ``root``
    (DRIFT-3, CONTRACT-11)."""
    backup = answer.get("backup")
    if not isinstance(backup, str) or not backup:
        return None
    path = posixpath.normpath(backup)
    directory, name = posixpath.split(path)
    if not name:
        return None
    if posixpath.isabs(path):
        return name if directory == posixpath.normpath(str(root)) else None
    return name if not directory else None


Answer = Mapping[str, Any]
Files = Mapping[str, bytes]

WORKED_ON = ("canonical", "cosmetic")
"""The kinds of file a mutation works on and never refuses as drift (DRIFT-1)."""


def refuses_worked_on_file(kind: str, answer: Answer) -> bool:
    """Whether ``answer`` refuses as drift a file of ``kind`` that DRIFT-1 says a mutation works
    on: that refusal is DRIFT-1's failure, whatever else the mutation was to show."""
    return answer.get("code") == codes.E_DRIFT and kind in WORKED_ON


def wrong_drift_clause(kind: str, answer: Answer, expected: str, op: str) -> str | None:
    """Returns the clause an ``E_DRIFT`` in ``answer`` to ``op`` breaks where the spec answers
    ``expected`` for a file of ``kind``: DRIFT-1 on a file a mutation works on
    (:func:`refuses_worked_on_file`); on a foreign file the spec lets the mutation through,
    DRIFT-2 for an ``add`` (a duplicate, which makes the target no larger), PATCH-9 for a
    ``patch`` (one that applies and makes the target no larger goes through) and DRIFT-7 for the
    rest (a remove, a replace or batch no larger is never refused for the file's state);
    ``None`` otherwise."""
    if refuses_worked_on_file(kind, answer):
        return "DRIFT-1"
    if answer.get("code") != codes.E_DRIFT or kind != "foreign" or expected != codes.OK:
        return None
    return {"add": "DRIFT-2", "patch": "PATCH-9"}.get(op, "DRIFT-7")


Root = str | os.PathLike[str]


def _backup_problem(
    answer: Answer, before: bytes, found: Files, root: Root, name: str
) -> str | None:
    """Returns why the ``backup`` field of ``answer`` does not name a byte-exact backup of
    ``before`` among the files ``found`` in ``root``, called ``<name>.bak.<suffix>`` for the
    data file ``name`` (no clause prefix), or None."""
    code = answer.get("code")
    backup = backup_name_of(answer, os.fspath(root))
    if backup is None:
        return (
            f"the {code} {dict(answer)} gives no backup path in the root in 'backup' "
            f"(expected {name}.bak.<suffix> in {root})"
        )
    if file_kind(backup, name) != "backup":
        return (
            f"the {code} {dict(answer)} names the backup {backup!r}, which is not named "
            f"{name}.bak.<suffix>"
        )
    saved = found.get(backup)
    if saved != before:
        there = "no such file" if saved is None else f"it holds {saved!r}"
        return (
            f"the {code} {dict(answer)} names the backup {backup}, but {there}; expected the "
            f"bytes {before!r} exactly"
        )
    return None


def judge_drift_refusal(
    answer: Mapping[str, Any],
    before: bytes,
    files_after: Mapping[str, bytes],
    *,
    root: str | os.PathLike[str],
    target: str = "memory",
) -> Problem | None:
    """Returns how ``answer`` breaks DRIFT-2 or DRIFT-3 as the refusal of the foreign file
    ``before``, or ``None`` when it is a conforming refusal (DRIFT-2's code, DRIFT-3,
    CONTRACT-11).

    ``files_after`` maps names of files in ``root`` after the answer to their bytes (only the backup
    is looked up). A conforming refusal answers ``E_DRIFT`` (another code is DRIFT-2's, whose
    condition the refusal is), names in ``backup`` a ``<FILE>.bak.<suffix>`` in the root that
    holds ``before`` byte for byte, and has a non-blank ``message`` (DRIFT-3).
    """
    data_name = FILENAMES[target]
    if answer.get("code") != codes.E_DRIFT:
        return Problem(
            "DRIFT-2",
            f"a foreign {data_name} was answered {dict(answer)}; expected E_DRIFT naming a "
            "byte-exact backup",
        )
    problem = _backup_problem(answer, before, files_after, root, data_name)
    if problem is not None:
        return Problem("DRIFT-3", problem)
    message = answer.get("message")
    if not isinstance(message, str) or not message.strip():
        return Problem(
            "DRIFT-3",
            f"the E_DRIFT {dict(answer)} has no 'message' saying how to repair {data_name}",
        )
    return None


def judge_rewrite_backup(
    answer: Answer, before: bytes, found: Files, *, root: Root, clause: str, target: str = "memory"
) -> Problem | None:
    """Returns how ``answer`` breaks ``clause`` as an ``OK`` that rewrote ``before``, bytes the
    store did not write itself (DRIFT-5) or a foreign file (DRIFT-2), or ``None`` when its
    ``backup`` names a ``<FILE>.bak.<suffix>`` in the root holding ``before`` byte for byte. The
    caller decides that a backup was due.

        >>> files = {"MEMORY.md.bak.2e": b"pasted"}
        >>> ok = {"ok": True, "code": "OK", "backup": "MEMORY.md.bak.2e"}
        >>> judge_rewrite_backup(ok, b"pasted", files, root="/r", clause="DRIFT-5") is None
        True
    """
    problem = _backup_problem(answer, before, found, root, FILENAMES[target])
    return None if problem is None else Problem(clause, problem)
