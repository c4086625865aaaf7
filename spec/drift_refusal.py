"""The judge of a store's refusal of a foreign file (DRIFT-3, with DRIFT-2's code and
CONTRACT-11's backup field).

DRIFT-3 (MUST): "On ``E_DRIFT`` the store first saves a byte-exact copy of the file, named
``<FILE>.bak.<suffix>`` in the root, gives its path in the Outcome's ``backup`` field, and says
in ``message`` how to repair the file." CONTRACT-11 repeats that an ``E_DRIFT`` Outcome names
its backup in ``backup``; CONTRACT-3 lists ``backup`` and ``message`` as optional fields of an
Outcome in general, and DRIFT-3 is the clause that makes both required on ``E_DRIFT``. What the
message says is DRIFT-6, a SHOULD, so this judge asks for a message and does not read it.

Every check that sees a refusal asks :func:`judge_drift_refusal`, whatever situation it set up
(a plain foreign file, a taken backup name, a directory fsync that failed after the backup's
rename: the backup is in place then, only not confirmed durable, and DRIFT-3 asks nothing about
durability), so the rule is decided once::

    >>> root = "/r"
    >>> files = {"MEMORY.md": b"x" * 50, "MEMORY.md.bak.1f": b"x" * 50}
    >>> answer = {"ok": False, "code": "E_DRIFT", "backup": "/r/MEMORY.md.bak.1f",
    ...           "message": "put a line holding only § between the pieces"}
    >>> judge_drift_refusal(answer, b"x" * 50, files, root=root) is None
    True
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from memspec.spec import codes
from memspec.spec.root_files import file_kind
from memspec.spec.targets import FILENAMES


def backup_name_of(answer: Mapping[str, Any], root: str) -> str | None:
    """Returns the file name the ``backup`` field of ``answer`` points at in ``root``, or
    ``None`` when it is missing, not a str, or a path outside ``root`` (DRIFT-3, CONTRACT-11).

    The path may be absolute (its directory must be ``root``) or a bare name relative to it.
    """
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


def judge_drift_refusal(
    answer: Mapping[str, Any],
    before: bytes,
    files_after: Mapping[str, bytes],
    *,
    root: str | os.PathLike[str],
    target: str = "memory",
) -> str | None:
    """Returns how ``answer`` breaks DRIFT-3 as the refusal of the foreign file ``before``, or
    ``None`` when it is a conforming refusal (DRIFT-2's code, DRIFT-3, CONTRACT-11).

    ``before`` is the target's file as the store met it; ``files_after`` maps the names of the
    files directly in ``root`` after the answer to their bytes (other files may be missing from
    it; only the backup is looked up). A conforming refusal:

    1. answers ``E_DRIFT`` (DRIFT-2: a foreign file refuses every mutation with it; the
       violation still opens with DRIFT-3, the clause of the checks that ask this judge, so a
       refusal that never came is blamed where it always was);
    2. gives in ``backup`` the path of a file in the root (absolute, or a name relative to it)
       named ``<FILE>.bak.<suffix>`` for the target's file (DRIFT-3, CONTRACT-11);
    3. that holds ``before`` byte for byte (DRIFT-3);
    4. and has a non-blank ``message`` (DRIFT-3: it "says in message how to repair the file").

    Each violation is one sentence that starts with the clause it breaks and shows the answer.
    """
    data_name = FILENAMES[target]
    if answer.get("code") != codes.E_DRIFT:
        return (
            f"DRIFT-3: a foreign {data_name} was answered {dict(answer)}; expected E_DRIFT "
            "(DRIFT-2) naming a byte-exact backup"
        )
    name = backup_name_of(answer, os.fspath(root))
    if name is None:
        return (
            f"DRIFT-3: the E_DRIFT {dict(answer)} gives no backup path in the root in 'backup' "
            f"(expected {data_name}.bak.<suffix> in {root})"
        )
    if file_kind(name, data_name) != "backup":
        return (
            f"DRIFT-3: the E_DRIFT {dict(answer)} names the backup {name!r}, which is not "
            f"named {data_name}.bak.<suffix>"
        )
    saved = files_after.get(name)
    if saved != before:
        found = "no such file" if saved is None else f"it holds {saved!r}"
        return (
            f"DRIFT-3: the E_DRIFT {dict(answer)} names the backup {name}, but {found}; "
            f"expected the foreign bytes {before!r} exactly"
        )
    message = answer.get("message")
    if not isinstance(message, str) or not message.strip():
        return (
            f"DRIFT-3: the E_DRIFT {dict(answer)} has no 'message' saying how to repair {data_name}"
        )
    return None
