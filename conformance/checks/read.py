"""Checks that a file which exists but cannot be read is never taken for an empty one (READ-7,
CONTRACT-9): ``MEMORY.md`` is made a directory, which fails with ``EISDIR`` for every user."""

from __future__ import annotations

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.verdict.findings import Violation
from memspec.spec import codes
from memspec.spec.snapshot import UNREADABLE_PREFIX


@check("READ-7", "SNAP-9", id="read.unreadable_file_is_not_empty")
def unreadable_file_is_not_empty(ctx: CheckContext) -> None:
    """With ``MEMORY.md`` a directory, ``load`` + ``snapshot`` gives a block with a line starting
    ``[UNREADABLE:`` (not null: SNAP-9, which goes on to the rest), and add, replace and remove
    answer ``E_UNREADABLE`` and write nothing: the directory stays, empty, and no data file
    takes its place (READ-7)."""
    path = ctx.root / "MEMORY.md"
    path.mkdir()
    with ctx.session() as session:
        session.request("load")
        block = session.request("snapshot", target="memory")["snapshot"]
        with ctx.keep_going():
            # SNAP-9: the snapshot says the file is unreadable instead of showing nothing.
            if not (
                isinstance(block, str)
                and any(line.startswith(UNREADABLE_PREFIX) for line in block.split("\n"))
            ):
                raise Violation(
                    "SNAP-9",
                    f"with MEMORY.md unreadable (a directory), load + snapshot memory "
                    f"returned {block!r}; expected a block with a line starting "
                    f"{UNREADABLE_PREFIX!r}",
                )
        for op, fields in (
            ("add", {"content": "Editor: vim"}),
            ("replace", {"old_text": "vim", "new_content": "Editor: helix"}),
            ("remove", {"old_text": "vim"}),
        ):
            sent = f"{op} memory {fields}"
            answer = session.request(op, target="memory", **fields)
            # READ-7: a file that cannot be read refuses every mutation with E_UNREADABLE.
            if answer["code"] != codes.E_UNREADABLE:
                raise Violation(
                    "READ-7",
                    f"with MEMORY.md unreadable (a directory), {sent} answered {answer}, "
                    "expected E_UNREADABLE (an unreadable file is never empty)",
                )
            # READ-7: nothing was written: the directory is still there and still empty.
            if not (path.is_dir() and not path.is_symlink() and not any(path.iterdir())):
                raise Violation(
                    "READ-7",
                    f"after {sent}, MEMORY.md is no longer the empty directory the check "
                    "made: the store wrote although it could not read the file",
                )
