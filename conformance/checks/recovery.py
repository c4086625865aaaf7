"""Checks that no readable state locks the model out of its memory (DRIFT-7, with DRIFT-2's backup
for a drift guard), and that an unreadable one says how a person repairs it. The foreign state is
made by a session with the default limit writing an entry that one with a small limit must be able
to remove."""

from __future__ import annotations

from memspec.conformance.checks._disk import backups, put, read_or_none
from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.verdict.findings import Violation
from memspec.spec import codes
from memspec.spec.drift_refusal import judge_rewrite_backup
from memspec.spec.snapshot import block_clause, render_snapshot
from memspec.spec.threats import find_threats

KEPT = "User prefers tabs"
LONG = "Project notes: the build uses Go 1.22 and a Makefile"
"""52 code points: within the default limit, longer than :data:`NARROW`."""
NARROW = {"memory": 40, "user": 30}
UNDECODABLE = bytes.fromhex("55736572ff0ac2a70a78797a")


@check("DRIFT-7", "DRIFT-2", id="recovery.lowered_limit_is_recoverable")
def lowered_limit_is_recoverable(ctx: CheckContext) -> None:
    """A session opened with the default limit stores a 52-code-point entry; a session opened
    on the same root with a limit of 40 finds one entry longer than its limit (a foreign file).
    Removing that entry answers ``OK``; the next load shows the target within its limit, and an
    add works again (DRIFT-7). A backend that claims ``drift-guard`` first saves the file as it
    was in a byte-exact backup that the ``OK`` names (DRIFT-2)."""
    confirm_plain_run(ctx, "a lowered limit")
    with ctx.session() as wide:
        wide.request("load")
        for content in (KEPT, LONG):
            answer = wide.request("add", target="memory", content=content)
            if answer["code"] != codes.OK:
                raise Violation("DRIFT-7", f"add memory {content!r} answered {answer}")
        before = read_or_none(ctx.root / "MEMORY.md")
    if before is None:
        raise Violation("DRIFT-7", "two acknowledged adds left no MEMORY.md")
    with ctx.session(NARROW) as narrow:
        narrow.request("load")
        sent = (
            f"with the limit lowered to 40 below the entry {LONG!r}, remove memory 'Project notes'"
        )
        answer = narrow.request("remove", target="memory", old_text="Project notes")
        # DRIFT-7: removing the entry over the limit is never refused for the file's state.
        if answer.get("code") != codes.OK:
            raise Violation(
                "DRIFT-7",
                f"{sent} answered {answer}; the target is locked: nothing the model can "
                "do with the tool brings it back within its limit",
            )
        if "drift-guard" in ctx.claimed_features():
            found = {path.name: data for path, data in backups(ctx.root, "memory").items()}
            problem = judge_rewrite_backup(answer, before, found, root=ctx.root, clause="DRIFT-2")
            # DRIFT-2: a drift guard backs the foreign file up first and names the backup.
            if problem is not None:
                raise Violation.of(problem, f"{sent}")
        narrow.request("load")
        block = narrow.request("snapshot", target="memory").get("snapshot")
        expected = render_snapshot("memory", [KEPT], NARROW["memory"], find_threats)
        clause = block_clause(expected, block, "memory", (), "DRIFT-7")
        # DRIFT-7: after the remove the target is back within its limit.
        if not (block == expected):
            raise Violation(
                clause,
                f"after {sent} answered OK, the next load shows {block!r}; expected {expected!r}",
            )
        answer = narrow.request("add", target="memory", content="Editor: vim")
        # DRIFT-7: back within its limit, the target takes new entries again.
        if answer.get("code") != codes.OK:
            raise Violation("DRIFT-7", f"after {sent}, add memory 'Editor: vim' answered {answer}")


@check("DRIFT-7", "READ-6", id="recovery.unreadable_file_says_how_to_repair")
def unreadable_file_says_how_to_repair(ctx: CheckContext) -> None:
    """A file that is not valid UTF-8 refuses a ``remove`` with ``E_UNREADABLE``, a message for
    the person who must repair it, and the file byte for byte as it was (DRIFT-7, READ-6); once
    it is re-saved as UTF-8, the remove goes through (DRIFT-7)."""
    confirm_plain_run(ctx, "a repaired file")
    with ctx.session() as session:
        session.request("load")
        put(ctx.root, "memory", UNDECODABLE)
        answer = session.request("remove", target="memory", old_text="User")
        after = read_or_none(ctx.root / "MEMORY.md")
        # READ-6: an undecodable file is refused and left byte for byte as it was.
        if not (answer.get("code") == codes.E_UNREADABLE and after == UNDECODABLE):
            raise Violation(
                "READ-6",
                f"remove memory 'User' on the undecodable {UNDECODABLE!r} answered {answer} "
                f"and left {after!r}; expected E_UNREADABLE and the file untouched",
            )
        message = answer.get("message")
        # DRIFT-7: the refusal says how a person repairs the file.
        if not (isinstance(message, str) and message.strip()):
            raise Violation(
                "DRIFT-7",
                f"E_UNREADABLE {answer} has no message saying how a person repairs the file",
            )
        put(ctx.root, "memory", b"User\n\xc2\xa7\nxyz")
        answer = session.request("remove", target="memory", old_text="xyz")
        # DRIFT-7: repaired by a person, the file takes the tool's changes again.
        if answer.get("code") != codes.OK:
            raise Violation(
                "DRIFT-7",
                f"after the file was re-saved as UTF-8, remove memory 'xyz' answered {answer}",
            )
