"""Checks of which bytes a store wrote itself (the DRIFT section's definition, for DRIFT-5, a
data-protecting clause that binds every backend).

Before it rewrites a file, a store backs up the bytes it did not write itself (DRIFT-5). Its own
bytes are those that *a store on this root* — any session, any process — *last* wrote, up to
cosmetics. Two readings a port may be tempted by are wrong, and each loses another writer's text:

- "this session wrote them": session A wrote a note, session B rewrote it, and a sync tool put
  A's old copy back. The bytes are A's own last write, but not the last write on the root, so
  they are a restore by another writer and must be backed up before A rewrites them.
- "a store wrote them once": a store wrote a note and then replaced it, and an editor's undo put
  the first version back. Those bytes were a store's once, not last, so they must be backed up.

In both, the rewrite replaces the only entry, so every byte of the restored text is dropped and
no reading of DRIFT-5 can excuse the missing backup.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from memspec.conformance.checks._disk import backups, put
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.transport.backend import Session
from memspec.spec import codes


def _ok(session: Session, sent: str, op: str, **fields: str) -> None:
    answer = session.request(op, target="memory", **fields)
    # DRIFT-5: the operation the check relies on answers OK.
    assert answer["code"] == codes.OK, f"DRIFT-5: {sent} answered {answer}, expected OK"


def _restored_copy_is_backed_up(
    ctx: CheckContext, writer: Session, restorer: Session, project: str
) -> None:
    """``writer`` adds a note, ``restorer`` replaces it, another writer puts the note back (with
    a trailing newline, a cosmetic difference), and ``writer`` replaces it again: the restored
    bytes must then be in a backup.

    The newline keeps the restored bytes apart from any backup of the note made earlier: a store
    that backed up the note when ``restorer`` replaced it has still not saved the restore.
    """
    note = f"Deploy {project}: make release\nthen push the tag"
    _ok(writer, f"add memory {note!r}", "add", content=note)
    _ok(restorer, "replace memory 'Deploy' 'Deploy: make ship'", "replace", old_text="Deploy",
        new_content=f"Deploy {project}: make ship")  # fmt: skip
    restored = note.encode() + b"\n"
    put(ctx.root, "memory", restored)
    sent = f"replace memory 'Deploy' after another writer put back {restored!r}"
    _ok(writer, sent, "replace", old_text="Deploy", new_content=f"Deploy {project}: run a script")
    found = list(backups(ctx.root, "memory").values())
    # DRIFT-5: bytes a store wrote, but not last, are another writer's: backed up before a rewrite.
    assert restored in found, (
        f"DRIFT-5: {sent}, the file was rewritten and no MEMORY.md.bak.* holds the restored "
        f"bytes {restored!r}: they are not a store's own, because a store on this root wrote "
        f"after them (the backups hold {found!r})"
    )
    _ok(writer, "remove memory 'Deploy'", "remove", old_text="Deploy")


@check("DRIFT-5", id="drift.own_bytes_are_what_a_store_last_wrote")
def own_bytes_are_what_a_store_last_wrote(ctx: CheckContext) -> None:
    """A store's own bytes are what any store on the root last wrote: a copy that another writer
    restored is backed up before a rewrite, whether the session rewriting it wrote that copy
    itself and another session wrote after it, or it wrote the copy and then replaced it."""
    with ExitStack() as stack:
        first, second = (stack.enter_context(_loaded(ctx)) for _ in range(2))
        _restored_copy_is_backed_up(ctx, first, second, "api")
        _restored_copy_is_backed_up(ctx, first, first, "web")


@contextmanager
def _loaded(ctx: CheckContext) -> Iterator[Session]:
    """Yields a session opened on the check's root and loaded, and closes it."""
    session = ctx.backend.open(ctx.root)
    try:
        session.request("load")
        yield session
    finally:
        session.close()
