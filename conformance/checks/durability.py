"""Checks of the write protocol, step by step, from the recorded calls of an add (ATOMIC-1,
ATOMIC-3).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import os

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.processes.workers import Job
from memspec.conformance.tamper.calls import CallRecord, opens_for_writing, render_trace
from memspec.conformance.tamper.capability import run_planned
from memspec.conformance.tamper.interpose import Plan
from memspec.conformance.verdict.findings import Violation

Steps = list[tuple[int, CallRecord]]
WRITES = ("write", "pwrite")
SYNCS = ("fsync", "fdatasync")


def _traced_add(ctx: CheckContext, content: str, name: str) -> list[CallRecord]:
    """Runs load + add in a worker under a tracing plan and returns the add's calls."""
    job = Job(
        ctx.backend,
        ctx.root,
        ({"op": "load"}, {"op": "add", "target": "memory", "content": content}),
        plan=Plan(trace=True),
        name=name,
    )
    result = run_planned(ctx.tampering, job, 60, ctx.scratch).expect_done()
    answer = result.answer(1)
    # ATOMIC-1: the add to be traced must succeed.
    if not (answer is not None and answer["code"] == "OK"):
        raise Violation(
            "ATOMIC-1", f"add memory {content!r} on a fresh store answered {answer}, expected OK"
        )
    return result.calls_during(1)


def temp_written_and_renamed(calls: list[CallRecord], root: str) -> str:
    """Returns the temp file an add renamed onto MEMORY.md, after checking each step of the
    write protocol in ``calls`` (module docs); raises a Violation naming the step at fault."""
    steps: Steps = list(enumerate(calls, 1))
    trace = f"trace of the add: {render_trace(calls)}"
    data = os.path.join(root, "MEMORY.md")
    renames = [(n, c) for n, c in steps if c.name in ("replace", "rename") and c.path == data]
    if not renames:
        in_place = [
            n for n, c in steps if c.path == data and (c.name in WRITES or opens_for_writing(c))
        ]
        where = f"; it wrote MEMORY.md in place at step {in_place[0]}" if in_place else ""
        # ATOMIC-1: the new file is put in place by a rename.
        raise Violation(
            "ATOMIC-1",
            f"the add never renamed a file onto MEMORY.md{where}: write a uniquely "
            f"named temp file in the same directory, fsync it and rename it over MEMORY.md "
            f"({trace})",
        )
    rename_step, rename = renames[-1]
    source = rename.details.source or ""
    # ATOMIC-1: the temp lives in the same directory (a rename across directories may copy).
    if os.path.dirname(source) != root:
        raise Violation(
            "ATOMIC-1",
            f"the rename at step {rename_step} moves {source!r} onto MEMORY.md: the temp "
            f"file must be created in the same directory as MEMORY.md ({trace})",
        )
    temp = os.path.basename(source)
    writes = [(n, c) for n, c in steps if n < rename_step and c.path == source]
    written = [(n, c) for n, c in writes if c.name in WRITES]
    # ATOMIC-1: the new bytes are written to the temp before it is renamed.
    if not written:
        raise Violation(
            "ATOMIC-1",
            f"nothing was written to {temp} before the rename at step {rename_step} ({trace})",
        )
    write_step, last_write = written[-1]
    handed = write_step
    if last_write.details.via == "file" and last_write.details.buffered:
        handoffs = [n for n, c in writes if n > write_step and c.name in ("flush", "close")]
        # ATOMIC-1: buffered data must reach the kernel before it can be synced.
        if not handoffs:
            raise Violation(
                "ATOMIC-1",
                f"the data written at step {write_step} through a buffered file object "
                f"was neither flushed nor closed before the rename at step {rename_step}: flush "
                f"the file, fsync it, then rename it ({trace})",
            )
        handed = handoffs[0]
    synced = [n for n, c in writes if n > handed and c.name in SYNCS]
    early = [n for n, c in writes if write_step < n < handed and c.name in SYNCS]
    # ATOMIC-1: the temp's data is fsynced after its last write and before the rename.
    if not synced:
        raise Violation(
            "ATOMIC-1",
            f"the fsync at step {early[0]} came before the data written at step "
            f"{write_step} left the file object's buffer (at step {handed}), so the rename at step "
            f"{rename_step} happened before that data was fsynced: flush the temp file before "
            f"fsyncing it ({trace})"
            if early
            else f"ATOMIC-1: the rename at step {rename_step} happened before the data written at "
            f"step {write_step} was fsynced: fsync the temp file before renaming it ({trace})",
        )
    directory_synced = [
        n for n, c in steps if n > rename_step and c.kind == "dir" and c.name in SYNCS
    ]
    # ATOMIC-3: the directory is fsynced after the rename, before the add returns.
    if not directory_synced:
        raise Violation(
            "ATOMIC-3",
            f"the rename at step {rename_step} was not made durable: the directory was "
            "not fsynced after it and before the add returned, so a power loss can undo the "
            f"rename; open the directory and fsync it after renaming ({trace})",
        )
    return temp


@check(
    "ATOMIC-3",
    "ATOMIC-1",
    features=("durable",),
    id="durability.write_protocol_is_durable",
)
def write_protocol_is_durable(ctx: CheckContext) -> None:
    """Two adds in two processes, traced: each writes a temp in the same directory, fsyncs
    it after its last write, renames it onto MEMORY.md and fsyncs the directory before
    returning; the two temps have different names (ATOMIC-1, ATOMIC-3)."""
    root = os.path.realpath(ctx.root)
    first = temp_written_and_renamed(_traced_add(ctx, "User prefers tabs", "first"), root)
    second = temp_written_and_renamed(_traced_add(ctx, "Project uses Go", "second"), root)
    # ATOMIC-1: a temp file is uniquely named, never shared between writers.
    if first == second:
        raise Violation(
            "ATOMIC-1",
            f"two sessions in two processes both wrote their new MEMORY.md through the "
            f"temp file {first}: give each temp a unique name (a random suffix, created with "
            "O_EXCL), or one session can rename or delete another's half-written temp",
        )
