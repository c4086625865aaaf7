"""Checks that a store replaces its files whole, by rename, and that acknowledged means written
(ATOMIC-1, ATOMIC-2, ATOMIC-5): a hard link to ``MEMORY.md`` must keep the old bytes after a write
(ATOMIC-1, ATOMIC-2), a sampling reader must only see whole states (ATOMIC-2), and an ``OK`` is on
disk for every other session (ATOMIC-5)."""

from __future__ import annotations

import errno
import os
import secrets
import threading
from contextlib import ExitStack
from pathlib import Path

from memspec.conformance.checks._disk import assert_written, loaded_entries, read_or_none
from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.transport.wire import Fields
from memspec.conformance.verdict.findings import HarnessError, Violation
from memspec.spec import codes
from memspec.spec.codec import decode, parse_text


def _hard_link(path: Path, ctx: CheckContext) -> Path:
    """Returns a new hard link to ``path``, in the scratch directory when it shares the root's
    filesystem, else beside ``path`` in the root."""
    for directory in (ctx.scratch, path.parent):
        link = directory / f".memspec-check-hardlink-{secrets.token_hex(4)}"
        try:
            os.link(path, link)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            continue
        return link
    raise HarnessError("could not hard-link MEMORY.md")  # pragma: no cover


@check("ATOMIC-1", "ATOMIC-2", id="atomic.write_replaces_by_rename")
def write_replaces_by_rename(ctx: CheckContext) -> None:
    """Each accepted add, replace and remove puts a new file in place by rename: a hard link made
    to ``MEMORY.md`` before the write still holds the old bytes afterwards, and ``MEMORY.md`` is a
    new inode (ATOMIC-1, ATOMIC-2). Fails for a store that writes in place (``open("w")``,
    truncate, append)."""
    path = ctx.root / "MEMORY.md"
    steps: list[tuple[str, Fields, list[str]]] = [
        ("add", {"content": "Editor: vim"}, ["User prefers tabs", "Editor: vim"]),
        (
            "replace",
            {"old_text": "vim", "new_content": "Editor: helix"},
            ["User prefers tabs", "Editor: helix"],
        ),
        ("remove", {"old_text": "tabs"}, ["Editor: helix"]),
    ]
    with ctx.session() as session, ExitStack() as links:
        session.request("load")
        first = session.request("add", target="memory", content="User prefers tabs")
        if first["code"] != codes.OK:
            raise Violation("ATOMIC-1", f"add memory answered {first}, expected OK")
        for op, fields, expected in steps:
            if not path.is_file():
                raise Violation(
                    "ATOMIC-5", f"the last write answered OK, but {path.name} is not in the root"
                )
            old = path.read_bytes()
            own = f"atomic-control-{op}"
            link = _hard_link(path, ctx)
            links.callback(link.unlink, missing_ok=True)
            sent = f"{op} memory {fields}"
            answer = session.request(op, target="memory", **fields)
            if answer["code"] != codes.OK:
                raise Violation("ATOMIC-1", f"{sent} answered {answer}, expected OK")
            # ATOMIC-2: the old inode was never written: a link to it still holds the old bytes.
            if link.read_bytes() != old:
                raise Violation(
                    "ATOMIC-2",
                    f"{sent} wrote MEMORY.md in place: a hard link to the old file now "
                    f"holds {link.read_bytes()[:120]!r} instead of {old[:120]!r} (open for "
                    "writing, "
                    "truncate or append instead of a temp file renamed over it)",
                )
            # ATOMIC-1: the new content is a new inode, renamed over MEMORY.md.
            if os.stat(path).st_ino == os.stat(link).st_ino:
                raise Violation(
                    "ATOMIC-1",
                    f"after {sent}, MEMORY.md is still the same inode: it was not replaced "
                    "by renaming a new temp file over it",
                )
            on_disk = parse_text(decode(path.read_bytes()) or "")
            # ATOMIC-1: the file renamed into place is the new one; entries the store leaves
            # after a plain load and the same request are the operation's, not the write's
            if on_disk != expected and on_disk != loaded_entries(ctx, own, old, op, fields):
                raise Violation(
                    "ATOMIC-1",
                    f"after {sent}, MEMORY.md parses into {on_disk}, expected {expected}",
                )


def _long_entries(count: int) -> list[str]:
    filler = "the user prefers long explanations with worked examples and links; " * 15
    return [f"Entry {index:04d}: {filler}".strip() for index in range(count)]


class _Sampler(threading.Thread):
    """A reader that reads ``MEMORY.md`` over and over while a writer adds ``entries``, and records
    the first sample that is not ``entries[:k]`` with ``acked_before <= k <= started_after``."""

    def __init__(self, path: Path, entries: list[str]) -> None:
        super().__init__(daemon=True, name="memspec-atomic-reader")
        self.path, self.entries = path, entries
        self.started = self.acked = self.samples = 0
        self.stop = threading.Event()
        self.violation: str | None = None

    def __enter__(self) -> _Sampler:
        """Starts sampling; the block's end stops it and waits for the thread."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(10)

    def run(self) -> None:
        while not self.stop.is_set() and self.violation is None:
            acked_before = self.acked
            data = read_or_none(self.path)
            started_after = self.started
            self.samples += 1
            self.violation = self._judge(data, acked_before, started_after)

    def _judge(self, data: bytes | None, low: int, high: int) -> str | None:
        text = None if data is None else decode(data)
        if data is not None and text is None:
            return f"a reader saw bytes that are not UTF-8 (a torn write): {data[-80:]!r}"
        found = [] if text is None else parse_text(text)
        k = len(found)
        if found != self.entries[:k]:
            return (
                f"a reader saw {k} entries that are not the first {k} written (a partial or "
                f"mixed file ending {(data or b'')[-60:]!r})"
            )
        if not low <= k <= high:
            shown = "an absent file" if data is None else f"{len(data)} bytes, {k} entries"
            return (
                f"a reader saw {shown} while {low} adds were acknowledged and {high} "
                "begun (an empty or partial file)"
            )
        return None


@check("ATOMIC-2", id="atomic.readers_never_see_a_partial_file")
def readers_never_see_a_partial_file(ctx: CheckContext) -> None:
    """A reader never sees an empty, partial or mixed file (ATOMIC-2): a thread samples
    ``MEMORY.md`` continuously while one session adds ``profile.operations`` long, unique entries,
    and each sample must parse into the first ``k`` entries, with every acknowledged entry
    present and no entry that was not yet sent. A file that still lacks an acknowledged add once
    the writer is idle fails ATOMIC-5 instead: it was not torn, it was never written."""
    entries = _long_entries(ctx.profile.operations)
    limit = sum(len(entry) + 3 for entry in entries) + 100
    sampler = _Sampler(ctx.root / "MEMORY.md", entries)
    with ctx.session({"memory": limit}) as session:
        session.request("load")
        with sampler:
            for index, entry in enumerate(entries):
                sampler.started = index + 1
                answer = session.request("add", target="memory", content=entry)
                if answer["code"] != codes.OK:
                    raise Violation(
                        "ATOMIC-2",
                        f"add memory (entry {index}, {len(entry)} chars, limit {limit}) "
                        f"answered {answer}, expected OK",
                    )
                sampler.acked = index + 1
                if sampler.violation:
                    break
    # ATOMIC-5 first: a file that lacks an acknowledged add with no write running was not torn
    # by the write, it never got it
    acked = entries[: sampler.acked]
    assert_written(read_or_none(sampler.path), acked, f"each of {len(acked)} adds")
    # ATOMIC-2: no reader ever saw anything but a whole state of the file.
    if sampler.violation is not None:
        raise Violation(
            "ATOMIC-2",
            f"{sampler.violation}; the store must write a temp file and rename it over "
            f"MEMORY.md (after {sampler.samples} samples during {len(entries)} adds)",
        )


@check("ATOMIC-5", id="atomic.acknowledged_is_visible")
def acknowledged_is_visible(ctx: CheckContext) -> None:
    """When a mutation answers ``OK`` its result is already in the file and another session finds
    it (ATOMIC-5): after each accepted add, replace or remove, ``MEMORY.md`` parses into the
    expected entries and a second session's ``load`` + ``entries`` returns them."""
    count = max(3, ctx.profile.operations)
    with ctx.sessions(2) as (writer, observer):
        writer.request("load")
        expected: list[str] = []
        for index in range(count):
            fact = f"Fact {index:04d}."
            if index % 3 == 2:
                op, fields = "replace", {"old_text": expected[-1], "new_content": fact}
                expected[-1] = fact
            elif index % 5 == 4:
                op, fields = "remove", {"old_text": expected[0]}
                expected.pop(0)
            else:
                op, fields = "add", {"content": fact}
                expected.append(fact)
            sent = f"{op} memory {fields}"
            answer = writer.request(op, target="memory", **fields)
            if answer["code"] != codes.OK:
                raise Violation("ATOMIC-5", f"{sent} answered {answer}, expected OK")
            data = read_or_none(ctx.root / "MEMORY.md")
            on_disk = parse_text(decode(data) or "") if data is not None else None
            # ATOMIC-5: the acknowledged result is already in the file.
            if on_disk != expected:
                raise Violation(
                    "ATOMIC-5",
                    f"{sent} answered OK but MEMORY.md then held {on_disk}, expected {expected}",
                )
            observer.request("load")
            seen = observer.request("entries", target="memory")["entries"]
            # ATOMIC-5: every session that reads afterwards finds it.
            if seen != expected:
                raise Violation(
                    "ATOMIC-5",
                    f"{sent} answered OK but another session's load + entries then "
                    f"returned {seen}, expected {expected}",
                )
