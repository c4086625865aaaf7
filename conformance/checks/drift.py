"""Checks that bytes another writer put in a file survive the store's next rewrite (DRIFT-5, which
binds every backend whatever it claims), and that a drift guard's backups are never overwritten
(DRIFT-3, DRIFT-4; feature ``drift-guard``).

hermes-agent #26045 (text appended without a delimiter line, destroyed by the next replace) and
#56464 (a delimiter-less rewrite under the limit, cut from 28 entries to 5 by one replace): a store
may rewrite such a file (a drift guard lets a change that does not grow it through, DRIFT-2), but
every byte the rewrite drops must first be in a byte-exact backup the answer names, unless every
entry another writer added is still in the file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memspec.conformance.checks._disk import backups, put, read_or_none
from memspec.conformance.core.plain_run import confirm_plain_run, send_rewriting, shown
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.transport.backend import Session
from memspec.conformance.transport.wire import Answer, Fields
from memspec.conformance.verdict.findings import Violation
from memspec.spec import codes
from memspec.spec.codec import decode, parse_text
from memspec.spec.drift_refusal import backup_name_of, judge_drift_refusal, judge_rewrite_backup

FIRST_PARAGRAPH = "Project uses Go\nUser prefers tabs\nEditor: vim\nShell: zsh\nOS: Linux"
SECOND_PARAGRAPH = "Project uses Go\nUser prefers tabs\nTimezone: UTC\nLanguage: en"
APPENDED_NOTES = "Meeting notes pasted by another tool, with no delimiter line. " * 130
"""About 8 KB of text appended without a delimiter line, as in hermes-agent #26045."""


@dataclass(frozen=True)
class Edit:
    """An Edit is another writer's change to MEMORY.md, the store call that follows it, and the
    bug a store that loses the change repeats."""

    what: str
    op: str
    fields: Fields
    bug: str


APPENDED = Edit(
    "appended 8 KB without a delimiter line to the last entry",
    "replace",
    {"old_text": "Editor", "new_content": "Editor: neovim"},
    "hermes-agent #26045 (a replace destroyed text another tool appended)",
)
DELIMITED = Edit(
    "appended an entry after a delimiter line",
    "remove",
    {"old_text": "Editor"},
    "a rewrite from a stale copy drops another writer's entry",
)
PARAGRAPH = Edit(
    "rewrote the file as one paragraph without delimiter lines",
    "replace",
    {"old_text": "Shell", "new_content": "Shell: fish"},
    "hermes-agent #56464 (one replace cut 28 entries to 5)",
)
SECOND = Edit(
    "rewrote the file as another paragraph",
    "remove",
    {"old_text": "Timezone"},
    "hermes-agent #56464 (one replace cut 28 entries to 5)",
)


def _entries(data: bytes | None) -> list[str]:
    return parse_text(decode(data) or "") if data is not None else []


def _short(data: bytes | None, keep: int = 60) -> str:
    """Returns ``data`` for a message: its start, and its length when it is longer."""
    if data is None or len(data) <= keep:
        return repr(data)
    return f"{data[:keep]!r}… ({len(data):,} bytes)"


def _edit_and_rewrite(
    ctx: CheckContext, session: Session, external: bytes, edit: Edit
) -> tuple[Answer, bool]:
    """Puts ``external`` in MEMORY.md as another writer, runs the edit's call, asserts the
    external bytes survived and that an ``OK`` that dropped them names their backup, and returns
    the answer and whether the store rewrote the file."""
    path = ctx.root / "MEMORY.md"
    own = _entries(read_or_none(path))
    added = [entry for entry in _entries(external) if entry not in own]
    put(ctx.root, "memory", external)
    request, answer = send_rewriting(session, {"op": edit.op, "target": "memory", **edit.fields})
    sent = f"{shown(request)} after another writer {edit.what}"
    after = read_or_none(path)
    lost = [entry for entry in added if entry not in _entries(after)]
    found = {backup.name: data for backup, data in backups(ctx.root, "memory").items()}
    saved = external in found.values()
    # DRIFT-5: the external bytes are still in the file or in a byte-exact backup.
    if not (after == external or not lost or saved):
        raise Violation(
            "DRIFT-5",
            f"external bytes lost, as in {edit.bug}: {sent} answered "
            f"{answer.get('code')} and left MEMORY.md as {_short(after)}; the external entries "
            f"{[_short(e.encode()) for e in lost]} are gone and no MEMORY.md.bak.* holds the "
            f"external bytes {_short(external)} (answer: {answer})",
        )
    if after != external and lost and answer.get("code") == codes.OK:
        problem = judge_rewrite_backup(answer, external, found, root=ctx.root, clause="DRIFT-5")
        # DRIFT-5: an OK that dropped external bytes names their byte-exact backup.
        if problem is not None:
            raise Violation.of(problem, f"{sent}")
    return answer, after != external


@check("DRIFT-5", id="drift.external_bytes_survive_rewrite")
def external_bytes_survive_rewrite(ctx: CheckContext) -> None:
    """After another writer's edit, a rewrite keeps the external bytes, whatever the backend claims:
    appended text (#26045) and a delimiter-less paragraph (#56464) that a replace or remove swaps
    away are backed up byte-exactly and the ``OK`` names the backup; an appended, delimited entry
    stays or is backed up; two contents give two backups, the same content again none (DRIFT-5,
    content-addressed as in DRIFT-4)."""
    with ctx.session() as session:
        session.request("load")

        def seed() -> bytes:
            for content in ("Project uses Go", "User prefers tabs", "Editor: vim"):
                answer = session.request("add", target="memory", content=content)
                if answer["code"] != codes.OK:
                    raise Violation("DRIFT-5", f"add memory {content!r} answered {answer}")
            return (ctx.root / "MEMORY.md").read_bytes()

        glued = seed() + b"\n" + APPENDED_NOTES.encode()
        _edit_and_rewrite(ctx, session, glued, APPENDED)
        put(ctx.root, "memory", b"")
        appended = seed() + "\n§\nadded by another tool".encode()
        _edit_and_rewrite(ctx, session, appended, DELIMITED)
        first = FIRST_PARAGRAPH.encode()
        second = SECOND_PARAGRAPH.encode()
        _, rewrote_first = _edit_and_rewrite(ctx, session, first, PARAGRAPH)
        _, rewrote_second = _edit_and_rewrite(ctx, session, second, SECOND)
        _, rewrote_again = _edit_and_rewrite(ctx, session, first, PARAGRAPH)
    saved = list(backups(ctx.root, "memory").values())
    # DRIFT-5: two different external contents give two backups; neither overwrote the other.
    if rewrote_first and rewrote_second and not (first in saved and second in saved):
        raise Violation(
            "DRIFT-5",
            f"after two rewrites of two different external contents, the backups hold "
            f"{saved}; expected both {first!r} and {second!r} (a backup is never overwritten)",
        )
    # DRIFT-5: the same external content backed up twice gives one backup (content-addressed).
    if rewrote_first and rewrote_again and saved.count(first) != 1:
        raise Violation(
            "DRIFT-5",
            f"the same external content {first!r} was rewritten twice and is now in "
            f"{saved.count(first)} backups; backups are content-addressed, so it must be in "
            "one",
        )


def _refused_with_backup(session: Session, ctx: CheckContext, external: bytes, sent: str) -> Path:
    """Asks for an add on the foreign file ``external``; returns the backup the E_DRIFT names
    after :func:`~memspec.spec.drift_refusal.judge_drift_refusal` accepted the refusal."""
    answer = session.request("add", target="memory", content="Editor: vim")
    files = {path.name: data for path, data in backups(ctx.root, "memory").items()}
    problem = judge_drift_refusal(answer, external, files, root=ctx.root)
    # DRIFT-3: E_DRIFT names a byte-exact MEMORY.md.bak.<suffix> in the root, with a message.
    if problem is not None:
        raise Violation.of(problem, f"{sent}: add memory 'Editor: vim'")
    return ctx.root / str(backup_name_of(answer, str(ctx.root)))


CLOCK_TICK = 1.1
"""Seconds between two refusals of the same foreign file: more than the second a clock-named
backup's suffix counts (DRIFT-4)."""


@check("DRIFT-4", "DRIFT-3", features=("drift-guard",), id="drift.taken_backup_name_is_kept")
def taken_backup_name_is_kept(ctx: CheckContext) -> None:
    """Backups are named by their bytes: the same foreign file refused again, over a second
    later, names the same backup, so a suffix taken from the clock is told apart however fast
    the store answers (DRIFT-4). A backup name that already holds other bytes is never
    overwritten: when the name a store would give a backup is taken (a user's file, a clash of
    the suffix), the foreign file is still backed up byte-exactly under another
    ``MEMORY.md.bak.<suffix>`` name (DRIFT-4, DRIFT-3)."""
    external = b"User prefers tabs\n" + b"pasted by hand without any delimiter line " * 2
    other = b"a file the user keeps under this name\n"
    with ctx.session({"memory": 40, "user": 30}) as session:
        session.request("load")
        put(ctx.root, "memory", external)
        first = _refused_with_backup(session, ctx, external, "on a foreign MEMORY.md")
        time.sleep(CLOCK_TICK)
        again = _refused_with_backup(
            session, ctx, external, f"on the same foreign MEMORY.md {CLOCK_TICK} s later"
        )
        # DRIFT-4: the suffix is derived from the bytes: the same content, the same backup.
        if again != first:
            raise Violation(
                "DRIFT-4",
                f"the same foreign MEMORY.md refused twice, {CLOCK_TICK} s apart, was backed up "
                f"as {first.name} and again as {again.name}; a backup's suffix is derived from "
                "its bytes, so the same content is backed up once, under one name",
            )
        first.write_bytes(other)
        sent = (
            f"with the name {first.name} taken by a file with other bytes (the check wrote "
            "them: the store must keep that file and save the backup under another name)"
        )
        second = _refused_with_backup(session, ctx, external, sent)
    # DRIFT-4: a backup is never overwritten by different content.
    if not (read_or_none(first) == other and second != first):
        raise Violation(
            "DRIFT-4",
            f"{sent}, a second E_DRIFT on the same foreign file overwrote it: "
            f"{first.name} now holds {read_or_none(first)!r}, expected {other!r} kept and the "
            "foreign bytes saved under another name",
        )


# -- which bytes a store wrote itself (DRIFT-5) ------------------------------------------------
#
# A store's own bytes are those a store on this root (any session, any process) *last* wrote, up
# to cosmetics: not "this session wrote them", nor "a store wrote them once". The checks below put
# an earlier copy back both ways; either misreading rewrites it without the backup DRIFT-5 asks.


def _ok(session: Session, sent: str, op: str, target: str = "memory", **fields: str) -> None:
    request, answer = send_rewriting(session, {"op": op, "target": target, **fields})
    sent = sent if request["op"] == op else f"{sent}, sent as {shown(request)}"
    # DRIFT-5: the operation the check relies on answers OK.
    if answer["code"] != codes.OK:
        raise Violation("DRIFT-5", f"{sent} answered {answer}, expected OK")


def _restored_copy_is_backed_up(
    ctx: CheckContext, writer: Session, restorer: Session, project: str
) -> None:
    """``writer`` adds a note, ``restorer`` replaces it, another writer puts the note back with a
    trailing newline (so it differs from any earlier backup), and ``writer`` replaces it again: the
    restored bytes must then be in a backup."""
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
    if restored not in found:
        raise Violation(
            "DRIFT-5",
            f"{sent}, the file was rewritten and no MEMORY.md.bak.* holds the restored "
            f"bytes {restored!r}: they are not a store's own, because a store on this root wrote "
            f"after them (the backups hold {found!r})",
        )
    _ok(writer, "remove memory 'Deploy'", "remove", old_text="Deploy")


def _created_file_is_backed_up(ctx: CheckContext, writer: Session) -> None:
    """Another writer creates USER.md, canonical, before any store wrote it, and ``writer``
    adds to it: the rewrite drops none of its bytes, but they are not a store's own, so they
    must be in a backup first."""
    created = b"Name: Ada"
    put(ctx.root, "user", created)
    sent = f"add user 'Shell: fish' after another writer created the file as {created!r}"
    _ok(writer, sent, "add", target="user", content="Shell: fish")
    found = list(backups(ctx.root, "user").values())
    # DRIFT-5: a rewrite of bytes no store wrote backs them up, even when it drops none of them.
    if created not in found:
        raise Violation(
            "DRIFT-5",
            f"{sent}, the file was rewritten and no USER.md.bak.* holds its bytes "
            f"{created!r}: no store on this root wrote them, so a backup comes first even when the "
            f"rewrite keeps every byte (the backups hold {found!r})",
        )


@check("DRIFT-5", id="drift.own_bytes_are_what_a_store_last_wrote")
def own_bytes_are_what_a_store_last_wrote(ctx: CheckContext) -> None:
    """A store's own bytes are what any store on the root last wrote: a file another writer
    created is backed up before the first rewrite, even one that drops none of its bytes, and a
    copy that another writer restored is backed up before a rewrite, whether the session
    rewriting it wrote that copy itself and another session wrote after it, or it wrote the copy
    and then replaced it."""
    confirm_plain_run(ctx, "bytes put back")
    with _loaded(ctx) as first, _loaded(ctx) as second:
        _created_file_is_backed_up(ctx, first)
        _restored_copy_is_backed_up(ctx, first, second, "api")
        _restored_copy_is_backed_up(ctx, first, first, "web")


@contextmanager
def _loaded(ctx: CheckContext) -> Iterator[Session]:
    """Yields a session opened on the check's root and loaded, and closes it."""
    with ctx.session() as session:
        session.request("load")
        yield session
