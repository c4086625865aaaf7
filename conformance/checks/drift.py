"""Checks that bytes another writer put in a file survive the store's next rewrite (DRIFT-5;
feature ``drift-guard``).

hermes-agent #56464: a user rewrote MEMORY.md as one paragraph without delimiter lines, under the
limit, so the drift check passed; the file parsed as one entry and the next replace swapped that
whole entry, cutting 28 entries to 5. A file that is neither foreign nor the store's own bytes
may be rewritten, but first its bytes must be saved in a byte-exact, content-addressed backup
``MEMORY.md.bak.<suffix>`` — unless every entry another writer added is still in the file
afterwards, which is what a rewrite of an appended, delimited entry looks like.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from memspec.conformance.checks._disk import backups, put, read_or_none
from memspec.conformance.registry import CheckContext, check
from memspec.spec import codes
from memspec.spec.codec import decode, parse_text
from memspec.spec.drift_refusal import backup_name_of, judge_drift_refusal

FIRST_PARAGRAPH = "Project uses Go\nUser prefers tabs\nEditor: vim\nShell: zsh\nOS: Linux"
SECOND_PARAGRAPH = "Project uses Go\nUser prefers tabs\nTimezone: UTC\nLanguage: en"


def _entries(data: bytes | None) -> list[str]:
    return parse_text(decode(data) or "") if data is not None else []


def _edit_and_rewrite(
    ctx: CheckContext, session: Any, external: bytes, op: str, fields: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """Puts ``external`` in MEMORY.md as another writer, runs ``op``, asserts the external bytes
    survived, and returns the answer and whether the store rewrote the file."""
    path = ctx.root / "MEMORY.md"
    own = _entries(read_or_none(path))
    added = [entry for entry in _entries(external) if entry not in own]
    put(ctx.root, "memory", external)
    sent = f"{op} memory {fields} after another writer put {external!r}"
    answer = session.request(op, target="memory", **fields)
    after = read_or_none(path)
    lost = [entry for entry in added if entry not in _entries(after)]
    saved = [backup for backup, data in backups(ctx.root, "memory").items() if data == external]
    # DRIFT-5: the external bytes are still in the file or in a byte-exact backup.
    assert after == external or not lost or saved, (
        f"DRIFT-5: {sent} answered {answer} and left MEMORY.md as {after!r}; the external "
        f"entries {lost} are gone and no MEMORY.md.bak.* holds the external bytes"
    )
    return answer, after != external


@check("DRIFT-5", features=("drift-guard",), id="drift.external_bytes_survive_rewrite")
def external_bytes_survive_rewrite(ctx: CheckContext) -> None:
    """After another writer's edit, a rewrite keeps the external bytes: an appended, delimited
    entry stays in the file or is backed up; a delimiter-less paragraph under the limit (#56464)
    that a replace or remove swaps away is backed up byte-exactly. Two different external contents
    give two backups, neither overwriting the other; the same content again gives no second copy
    (DRIFT-5, content-addressed as in DRIFT-4)."""
    with ExitStack() as stack:
        session = ctx.backend.open(ctx.root)
        stack.callback(session.close)
        session.request("load")
        for content in ("Project uses Go", "User prefers tabs", "Editor: vim"):
            answer = session.request("add", target="memory", content=content)
            assert answer["code"] == codes.OK, f"DRIFT-5: add memory {content!r} answered {answer}"
        appended = (ctx.root / "MEMORY.md").read_bytes() + "\n§\nadded by another tool".encode()
        _edit_and_rewrite(ctx, session, appended, "remove", {"old_text": "Editor"})
        first = FIRST_PARAGRAPH.encode()
        second = SECOND_PARAGRAPH.encode()
        _, rewrote_first = _edit_and_rewrite(
            ctx, session, first, "replace", {"old_text": "Shell", "new_content": "Shell: fish"}
        )
        _, rewrote_second = _edit_and_rewrite(
            ctx, session, second, "remove", {"old_text": "Timezone"}
        )
        _, rewrote_again = _edit_and_rewrite(
            ctx, session, first, "replace", {"old_text": "Shell", "new_content": "Shell: fish"}
        )
    saved = list(backups(ctx.root, "memory").values())
    if rewrote_first and rewrote_second:
        # DRIFT-5: two different external contents give two backups; neither overwrote the other.
        assert first in saved and second in saved, (
            f"DRIFT-5: after two rewrites of two different external contents, the backups hold "
            f"{saved}; expected both {first!r} and {second!r} (a backup is never overwritten)"
        )
    if rewrote_first and rewrote_again:
        # DRIFT-5: the same external content backed up twice gives one backup (content-addressed).
        assert saved.count(first) == 1, (
            f"DRIFT-5: the same external content {first!r} was rewritten twice and is now in "
            f"{saved.count(first)} backups; backups are content-addressed, so it must be in one"
        )


def _refused_with_backup(session: Any, ctx: CheckContext, external: bytes, sent: str) -> Path:
    """Asks for an add on the foreign file ``external``; returns the backup the E_DRIFT names
    after :func:`~memspec.spec.drift_refusal.judge_drift_refusal` accepted the refusal."""
    answer = session.request("add", target="memory", content="Editor: vim")
    files = {path.name: data for path, data in backups(ctx.root, "memory").items()}
    problem = judge_drift_refusal(answer, external, files, root=ctx.root)
    # DRIFT-3: E_DRIFT names a byte-exact MEMORY.md.bak.<suffix> in the root, with a message.
    assert problem is None, f"{problem} ({sent}: add memory 'Editor: vim')"
    return ctx.root / str(backup_name_of(answer, str(ctx.root)))


@check("DRIFT-4", "DRIFT-3", features=("drift-guard",), id="drift.taken_backup_name_is_kept")
def taken_backup_name_is_kept(ctx: CheckContext) -> None:
    """A backup name that already holds other bytes is never overwritten: when the name a
    store would give a backup is taken (a user's file, a clash of the suffix), the foreign file
    is still backed up byte-exactly under another ``MEMORY.md.bak.<suffix>`` name (DRIFT-4,
    DRIFT-3)."""
    external = b"User prefers tabs\n" + b"pasted by hand without any delimiter line " * 2
    other = b"a file the user keeps under this name\n"
    with ExitStack() as stack:
        session = ctx.backend.open(ctx.root, {"memory": 40, "user": 30})
        stack.callback(session.close)
        session.request("load")
        put(ctx.root, "memory", external)
        first = _refused_with_backup(session, ctx, external, "on a foreign MEMORY.md")
        first.write_bytes(other)
        sent = f"after the backup {first.name} was replaced by other bytes"
        second = _refused_with_backup(session, ctx, external, sent)
    # DRIFT-4: a backup is never overwritten by different content.
    assert read_or_none(first) == other and second != first, (
        f"DRIFT-4: {sent}, a second E_DRIFT on the same foreign file overwrote it: "
        f"{first.name} now holds {read_or_none(first)!r}, expected {other!r} kept and the "
        "foreign bytes saved under another name"
    )
