"""Checks of the JSON Lines protocol, spoken raw to a command backend (CONTRACT-13, CONTRACT-14).

The checks start the command themselves, write every request line at once and close stdin, so a hung
backend is killed after the timeout. The ids sent are neither consecutive nor increasing, to catch a
backend that numbers answers itself. A Python backend is
:class:`~memspec.conformance.core.registry.NotApplicable`.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.transport.jsonlines import invocation_dir
from memspec.conformance.transport.wire import Request
from memspec.conformance.verdict.findings import NotApplicable, Violation
from memspec.spec import codes
from memspec.spec.targets import DEFAULT_LIMITS


def _open_request(ctx: CheckContext, request_id: int) -> Request:
    return {"id": request_id, "op": "open", "root": str(ctx.root),
            "memory_char_limit": DEFAULT_LIMITS["memory"],
            "user_char_limit": DEFAULT_LIMITS["user"]}  # fmt: skip


def _raw_exchange(ctx: CheckContext, clause: str, requests: list[Request]) -> list[Any]:
    """Starts the backend command, sends ``requests`` as raw lines, closes stdin and returns the
    answers, one JSON value per stdout line (NotApplicable for a Python backend)."""
    command = getattr(ctx.backend, "command", None)
    if not isinstance(command, str):
        raise NotApplicable("the JSON Lines protocol applies to --backend-cmd backends")
    timeout = float(getattr(ctx.backend, "timeout", 10.0)) * 2
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    try:
        done = subprocess.run(
            shlex.split(command),
            input=lines,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
            start_new_session=True,
            check=False,
            cwd=getattr(ctx.backend, "cwd", None) or invocation_dir(),
        )
    except subprocess.TimeoutExpired:
        raise Violation(
            clause,
            f"the backend did not answer {len(requests)} requests and exit within "
            f"{timeout:g} s of its stdin closing",
        ) from None
    answers = []
    for line in done.stdout.splitlines():
        try:
            answers.append(json.loads(line))
        except json.JSONDecodeError:
            raise Violation(
                clause, f"the backend printed a line that is not JSON: {line[:200]!r}"
            ) from None
    # CONTRACT-13: exactly one answer per request.
    if not (len(answers) == len(requests)):
        raise Violation(
            clause,
            f"sent {len(requests)} requests, got {len(answers)} answers: {answers}; stderr "
            f"ends {done.stderr[-400:]!r}",
        )
    return answers


@check("CONTRACT-13", id="protocol.answers_echo_ids_in_order")
def answers_echo_ids_in_order(ctx: CheckContext) -> None:
    """Each answer echoes its request's integer ``id`` in order and carries ``ok`` and ``code``;
    ``open`` answers ``features``, ``backend`` and ``version``; ``entries``, ``snapshot`` and
    ``fence`` answers carry their fields (CONTRACT-13). The ids sent are neither consecutive nor
    increasing."""
    requests: list[Request] = [
        _open_request(ctx, 40),
        {"id": 7, "op": "load"},
        {"id": 1000, "op": "add", "target": "memory", "content": "User prefers tabs"},
        {"id": 3, "op": "entries", "target": "memory"},
        {"id": 99, "op": "load"},
        {"id": 12, "op": "snapshot", "target": "memory"},
        {"id": 0, "op": "snapshot", "target": "user"},
        {"id": 5, "op": "fence", "raw": "recalled text"},
        {"id": 77, "op": "remove", "target": "memory", "old_text": "tabs"},
    ]
    answers = _raw_exchange(ctx, "CONTRACT-13", requests)
    for request, answer in zip(requests, answers, strict=True):
        sent = json.dumps(request)
        # CONTRACT-13: every answer echoes the request's id, in order, with ok and code.
        if not (isinstance(answer, dict) and answer.get("id") == request["id"]):
            raise Violation(
                "CONTRACT-13",
                f"sent {sent}, the answer in its place was {answer}: it must echo "
                f"id {request['id']}",
            )
        if not (isinstance(answer.get("ok"), bool) and codes.is_known_code(answer.get("code"))):
            raise Violation(
                "CONTRACT-13",
                f"sent {sent}, answered {answer} without a bool ok and a contract code",
            )
    opened, entries, snapshot, empty, fence = (answers[i] for i in (0, 3, 5, 6, 7))
    # CONTRACT-13: open answers features (a list of str), backend and version.
    features = opened.get("features")
    if not (
        opened["ok"]
        and isinstance(features, list)
        and all(isinstance(f, str) for f in features)
        and isinstance(opened.get("backend"), str)
        and isinstance(opened.get("version"), str)
    ):
        raise Violation(
            "CONTRACT-13", f"open answered {opened}; expected ok with features, backend and version"
        )
    # CONTRACT-13: entries, snapshot and fence answers carry their fields.
    if entries.get("entries") != ["User prefers tabs"]:
        raise Violation(
            "CONTRACT-13", f'entries answered {entries}, expected entries ["User prefers tabs"]'
        )
    if not (
        isinstance(snapshot.get("snapshot"), str)
        and "snapshot" in empty
        and (empty["snapshot"] is None)
    ):
        raise Violation(
            "CONTRACT-13", f"snapshot answered {snapshot} and {empty}, expected a str and null"
        )
    if "fence" in features and not isinstance(fence.get("block"), str):
        raise Violation(
            "CONTRACT-13", f"fence is claimed but answered {fence}, expected a str block"
        )


@check("CONTRACT-14", id="protocol.unknown_op_is_unsupported")
def unknown_op_is_unsupported(ctx: CheckContext) -> None:
    """An op the backend does not support answers ``ok`` false with code ``E_UNSUPPORTED`` and the
    request's id, and the session goes on (CONTRACT-14)."""
    requests: list[Request] = [
        _open_request(ctx, 1),
        {"id": 2, "op": "load"},
        {"id": 31, "op": "compact", "target": "memory"},
        {"id": 4, "op": "add", "target": "memory", "content": "User prefers tabs"},
        {"id": 8, "op": "memory.forget_everything"},
        {"id": 5, "op": "entries", "target": "memory"},
    ]
    answers = _raw_exchange(ctx, "CONTRACT-14", requests)
    for index in (2, 4):
        request, answer = requests[index], answers[index]
        # CONTRACT-14: an unknown op is E_UNSUPPORTED, ok false, with the request's id.
        if not (
            isinstance(answer, dict)
            and (
                answer.get("id"),
                answer.get("ok"),
                answer.get("code"),
            )
            == (request["id"], False, codes.E_UNSUPPORTED)
        ):
            raise Violation(
                "CONTRACT-14",
                f"sent {json.dumps(request)}, answered {answer}; expected "
                f'{{"id": {request["id"]}, "ok": false, "code": "E_UNSUPPORTED"}}',
            )
    # CONTRACT-14: the session goes on after an unsupported op.
    added, listed = answers[3], answers[5]
    if not (
        isinstance(added, dict)
        and isinstance(listed, dict)
        and (added.get("code"), listed.get("entries")) == (codes.OK, ["User prefers tabs"])
    ):
        raise Violation(
            "CONTRACT-14", f"after unsupported ops, add and entries answered {added}, {listed}"
        )
