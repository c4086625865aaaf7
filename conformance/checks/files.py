"""Checks of the files a store creates, keeps and leaves alone (FILES-1 to FILES-5, CONTRACT-11),
run under the umask 022, with which a store that leaves modes to the umask creates 0644 files."""

from __future__ import annotations

import os
import random

from memspec.conformance.checks._disk import (
    listing_changes,
    mode_of,
    outside_root,
    put,
    read_or_none,
    root_files,
    umask,
)
from memspec.conformance.core.plain_run import confirm_plain_run
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.transport.backend import BackendDefect, Session
from memspec.conformance.transport.wire import Answer, Request, fields_of
from memspec.conformance.verdict.findings import Violation
from memspec.spec import codes
from memspec.spec.targets import FILENAMES, TARGETS


def _expect(clause: str, answer: Answer, code: str, sent: str) -> None:
    # The operation the check relies on must have answered as the spec says.
    if not (answer["code"] == code):
        raise Violation(clause, f"{sent} answered {answer}, expected {code}")


@check("FILES-1", "CONTRACT-11", id="files.created_files_are_private")
def created_files_are_private(ctx: CheckContext) -> None:
    """Every file the store creates in its root has mode 0600 whatever the umask (FILES-1). The
    check plays another writer twice so that a store that keeps backups makes them, and writes
    nothing of its own in the root."""
    confirm_plain_run(ctx, "a file's mode")
    with umask(0o022), ctx.session({"user": 100}) as session:
        session.request("load")
        sent = 'add memory "User prefers tabs"'
        _expect(
            "FILES-1",
            session.request("add", target="memory", content="User prefers tabs"),
            codes.OK,
            sent,
        )
        _expect(
            "FILES-1",
            session.request("add", target="user", content="Name: Ada"),
            codes.OK,
            'add user "Name: Ada"',
        )
        with open(ctx.root / "USER.md", "ab") as handle:
            handle.write(b"\npasted by hand without a delimiter " * 4)
        session.request("add", target="user", content="Timezone: UTC")
        with open(ctx.root / "MEMORY.md", "ab") as handle:
            handle.write("\n§\nadded in an editor".encode())
        session.request("add", target="memory", content="Editor: vim")
    loose = {
        str(path.relative_to(ctx.root)): oct(mode_of(path))
        for path in root_files(ctx.root)
        if not path.is_symlink() and mode_of(path) != 0o600
    }
    # FILES-1: every file the store created is mode 0600, set by the store, not by the umask.
    if loose:
        raise Violation(
            "FILES-1",
            f"under umask 022 the store created files with other modes than 0o600: {loose}",
        )


@check("FILES-2", id="files.rewrite_keeps_the_mode")
def rewrite_keeps_the_mode(ctx: CheckContext) -> None:
    """A rewrite gives the new data file the mode of the file it replaces (FILES-2, hermes-agent
    #22889): MEMORY.md put by hand with 0640 and USER.md with 0660 keep those modes through two
    writes each (the first on a file written by hand, the second on the store's own)."""
    confirm_plain_run(ctx, "a file's mode")
    modes = {"memory": 0o640, "user": 0o660}
    put(ctx.root, "memory", b"User prefers tabs", mode=modes["memory"])
    put(ctx.root, "user", b"Name: Ada", mode=modes["user"])
    with umask(0o022), ctx.session() as session:
        session.request("load")
        for target, contents in (
            ("memory", ("Editor: vim", "Shell: zsh")),
            ("user", ("Timezone: UTC", "Language: en")),
        ):
            for content in contents:
                sent = f"add {target} {content!r}"
                _expect(
                    "FILES-2",
                    session.request("add", target=target, content=content),
                    codes.OK,
                    sent,
                )
                path = ctx.root / FILENAMES[target]
                # FILES-2: the rewritten data file keeps the mode of the file it replaced.
                if mode_of(path) != modes[target]:
                    raise Violation(
                        "FILES-2",
                        f"after {sent}, {path.name} has mode {oct(mode_of(path))}; the file "
                        f"it replaced had {oct(modes[target])}, which a rewrite must keep",
                    )


def _lock_file_kept(ctx: CheckContext) -> bool:
    """Returns whether the backend keeps a ``MEMORY.md.lock`` (probed on a root of the check's)."""
    probe = ctx.scratch / "files-3-probe-root"
    probe.mkdir()
    with ctx.session(root=probe) as session:
        session.request("load")
        session.request("add", target="memory", content="User prefers tabs")
    return os.path.lexists(probe / "MEMORY.md.lock")


@check("FILES-3", id="files.symlinked_lock_is_refused")
def symlinked_lock_is_refused(ctx: CheckContext) -> None:
    """A lock file that is a symbolic link is not followed (FILES-3): the mutation answers ``E_IO``
    and writes nothing, and the link's target (an existing file, or a missing name) is neither
    truncated nor created. A backend that keeps no lock file of that name may answer ``OK`` if it
    leaves both links and targets alone."""
    kept = _lock_file_kept(ctx)
    outside = ctx.scratch / "files-3-outside.txt"
    original = b"precious bytes outside the root\n"
    outside.write_bytes(original)
    links = {
        "memory": (ctx.root / "MEMORY.md.lock", outside, original),
        "user": (ctx.root / "USER.md.lock", ctx.scratch / "files-3-dangling-target.txt", None),
    }
    for link, destination, _ in links.values():
        os.symlink(destination, link)
    try:
        with ctx.session() as session:
            session.request("load")
            answers = {
                target: session.request("add", target=target, content="Editor: vim")
                for target in links
            }
    except BackendDefect as defect:
        if defect.hung:
            # CRASH-3: the one thing unusual here is a name at the lock's path; a store it holds
            # takes a file's mere existence to mean locked, which a crash can leave forever
            raise Violation(
                "CRASH-3",
                "with MEMORY.md.lock and USER.md.lock symbolic links, the add did not return "
                "within its timeout: the store waits on a file's existence at the lock's name, "
                "which is no lock the kernel releases (use flock on a lock file opened with "
                "O_NOFOLLOW)",
            ) from None
        # FILES-3: the link is the one thing unusual here, and the answer it owes is E_IO
        raise Violation(
            "FILES-3",
            f"with MEMORY.md.lock and USER.md.lock symbolic links, the add did not answer E_IO: "
            f"{defect}",
        ) from None
    for target, (link, destination, expected) in links.items():
        sent = f'add {target} "Editor: vim" with {link.name} a symlink to {destination}'
        # FILES-3: the link is left in place, pointing where it pointed.
        if not (link.is_symlink() and os.readlink(link) == str(destination)):
            raise Violation("FILES-3", f"after {sent}, {link.name} is no longer that symlink")
        # FILES-3: nothing is written through the link: its target keeps its bytes or its absence.
        if read_or_none(destination) != expected:
            raise Violation(
                "FILES-3",
                f"after {sent} (answered {answers[target]}), the file outside the root that "
                f"the lock link points to holds {read_or_none(destination)!r}, expected "
                f"{expected!r}: the lock was opened without O_NOFOLLOW and written through the "
                "link",
            )
        if kept:
            data = ctx.root / FILENAMES[target]
            # FILES-3: a store that keeps this lock file refuses with E_IO and writes nothing.
            if not (answers[target]["code"] == codes.E_IO and not data.exists()):
                raise Violation(
                    "FILES-3",
                    f"{sent} answered {answers[target]} and left {data.name} "
                    f"{'present' if data.exists() else 'absent'}; the store keeps {link.name} "
                    "(seen "
                    "on a probe root), so it must refuse a symlinked lock with E_IO and write "
                    "nothing "
                    "(the lock was opened without O_NOFOLLOW)",
                )


@check("FILES-4", id="files.symlinked_data_file_is_kept")
def symlinked_data_file_is_kept(ctx: CheckContext) -> None:
    """A data file that is a symbolic link is read through, as a regular file is, and never
    replaced by a regular file (FILES-4): the load reads the entries of the file it points to,
    the mutation answers ``E_IO``, the link stays, and the file it points to keeps its bytes
    (or, for a dangling link, is not created); a mutation that writes nothing answers as on a
    regular file."""
    confirm_plain_run(ctx, "a symbolic link")
    outside = ctx.scratch / "files-4-outside-MEMORY.md"
    outside.write_bytes(b"Outside entry")
    missing = ctx.scratch / "files-4-missing-USER.md"
    links = {"memory": (ctx.root / "MEMORY.md", outside), "user": (ctx.root / "USER.md", missing)}
    for link, destination in links.values():
        os.symlink(destination, link)
    with ctx.session() as session:
        session.request("load")
        read = session.request("entries", target="memory")["entries"]
        with ctx.keep_going():
            # FILES-4: reading is not replacing: the load follows the link.
            if read != ["Outside entry"]:
                raise Violation(
                    "FILES-4",
                    f"with MEMORY.md a symlink to {outside} holding b'Outside entry', load + "
                    f"entries memory gave {read!r}: a read follows the link, only a write answers "
                    "E_IO",
                )
        for target, (link, destination) in links.items():
            sent = f'add {target} "Editor: vim" with {link.name} a symlink to {destination}'
            answer = session.request("add", target=target, content="Editor: vim")
            # FILES-4: the link is still a link to the same place.
            if not (link.is_symlink() and os.readlink(link) == str(destination)):
                raise Violation(
                    "FILES-4",
                    f"after {sent} (answered {answer}), {link.name} is no longer that "
                    "symlink: the store replaced it by a regular file",
                )
            # FILES-4: what the link points to is unchanged (not written through the link).
            if not (read_or_none(outside) == b"Outside entry" and not missing.exists()):
                raise Violation(
                    "FILES-4",
                    f"after {sent} (answered {answer}), the file the link points to was "
                    f"written: {destination} holds {read_or_none(destination)!r}",
                )
            # FILES-4: the mutation is refused with E_IO.
            if answer["code"] != codes.E_IO:
                raise Violation("FILES-4", f"{sent} answered {answer}, expected E_IO")
        # FILES-4: a mutation that would write nothing answers as on a regular file.
        for op, text, field, expected in (
            ("add", "Outside entry", "content", codes.OK),
            ("remove", "no such text", "old_text", codes.E_NOMATCH),
        ):
            answer = session.request(op, target="memory", **{field: text})
            if not (answer["code"] == expected and read_or_none(outside) == b"Outside entry"):
                raise Violation(
                    "FILES-4",
                    f"{op} memory {text!r} "
                    "with MEMORY.md a symlink to a file holding b'Outside entry' answered "
                    f"{answer} "
                    f"(the file now holds {read_or_none(outside)!r}); a mutation that writes "
                    "nothing "
                    f"answers as on a regular file, {expected}: the E_IO is only for a write",
                )


def _mixed_operations(count: int, rng: random.Random) -> list[Request]:
    """Returns ``count`` operations mixing accepted adds, replaces and removes with refusals."""
    ops: list[Request] = []
    for index in range(count):
        target = TARGETS[index % 2]
        roll = rng.random()
        if roll < 0.35:
            ops.append({"op": "add", "target": target, "content": f"note {index} {rng.random()}"})
        elif roll < 0.5:
            ops.append(
                {
                    "op": "replace",
                    "target": target,
                    "old_text": "note",
                    "new_content": f"note {index} replaced",
                }
            )
        elif roll < 0.7:
            ops.append({"op": "remove", "target": target, "old_text": "note"})
        else:
            refused: list[Request] = [
                {"op": "add", "target": target, "content": "   "},
                {"op": "add", "target": target, "content": "a\n§\nb"},
                {"op": "add", "target": target, "content": "x" * 400},
                {"op": "remove", "target": target, "old_text": "nowhere to be found"},
                {"op": "add", "target": "notes", "content": "wrong target"},
            ]
            ops.append(rng.choice(refused))
    return ops


def _run(session: Session, ops: list[Request]) -> None:
    for op in ops:
        fields = fields_of(op)
        if op["op"] in ("replace", "remove"):
            entries = session.request("entries", target=op["target"]).get("entries") or []
            notes = [entry for entry in entries if entry.startswith("note ")]
            if notes and op["old_text"] == "note":
                fields["old_text"] = notes[0]
        session.request(op["op"], **fields)


@check("FILES-5", "CONTRACT-1", id="files.nothing_outside_root")
def nothing_outside_root(ctx: CheckContext) -> None:
    """The store writes nothing outside its root (FILES-5, CONTRACT-1): 50 mixed operations leave
    the scratch directory — which holds the root, decoy ``MEMORY.md``/``USER.md`` files beside it
    and the root's siblings — exactly as it was, mtimes included."""
    for name in ("MEMORY.md", "USER.md", "MEMORY.md.lock"):
        (ctx.scratch / name).write_bytes(b"decoy outside the root")
    before = outside_root(ctx)
    with ctx.session({"memory": 300, "user": 300}) as session:
        session.request("load")
        _run(session, _mixed_operations(50, random.Random(5 if ctx.seed is None else ctx.seed)))
        session.request("load")
    changes = listing_changes(before, outside_root(ctx))
    # FILES-5: nothing outside the root was created, removed or changed.
    if changes:
        raise Violation(
            "FILES-5", "50 operations changed files outside the root: " + "; ".join(changes[:10])
        )


@check("FILES-5", "CONTRACT-11", id="files.file_count_stays_bounded")
def file_count_stays_bounded(ctx: CheckContext) -> None:
    """The number of files in the root does not grow with the number of operations (FILES-5,
    CONTRACT-11): temp files never accumulate. With no external edits there is nothing to back
    up, so the count after 120 mixed operations is at most the count after the first 20."""
    confirm_plain_run(ctx, "the files a run leaves")
    ops = _mixed_operations(120, random.Random(7 if ctx.seed is None else ctx.seed))
    with ctx.session({"memory": 300, "user": 300}) as session:
        session.request("load")
        _run(session, ops[:20])
        early = [str(path.relative_to(ctx.root)) for path in root_files(ctx.root)]
        _run(session, ops[20:])
        late = [str(path.relative_to(ctx.root)) for path in root_files(ctx.root)]
    # FILES-5: the root holds no more files after 120 operations than after 20.
    if not (len(late) <= len(early)):
        raise Violation(
            "FILES-5",
            f"the root held {len(early)} files after 20 operations and {len(late)} after "
            f"120; new: {sorted(set(late) - set(early))[:10]} (temp files must not accumulate)",
        )
