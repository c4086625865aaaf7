"""``memspec serve``: any Python backend over the JSON Lines protocol, one session a process.

A command backend's session starts one process, so this module imports only what serving
needs (the in-process transport, which judges each answer as it does in-process): no harness,
no subprocess machinery. :func:`serve` reads one request per line until standard input closes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from memspec.conformance.transport.backend import BackendDefect, InProcessBackend, InProcessSession
from memspec.conformance.transport.wire import Answer
from memspec.spec import codes
from memspec.spec.errors import UsageError
from memspec.spec.requests import OPS
from memspec.spec.targets import DEFAULT_LIMITS


def _error(request_id: Any, code: str, message: str) -> Answer:
    return {"id": request_id, "ok": False, "code": code, "message": message}


def _open_request(backend: InProcessBackend, request: Mapping[str, Any]) -> InProcessSession:
    root = request.get("root")
    limits = {
        "memory": request.get("memory_char_limit", DEFAULT_LIMITS["memory"]),
        "user": request.get("user_char_limit", DEFAULT_LIMITS["user"]),
    }
    if not isinstance(root, str) or not os.path.isdir(root):
        raise ValueError(f"open needs 'root', an existing directory; got {root!r}")
    return backend.open(Path(root), limits)


def handle_line(
    backend: InProcessBackend,
    session: InProcessSession | None,
    line: str,
) -> tuple[Answer, InProcessSession | None]:
    """Returns the answer to one request line and the session after it (serve's core): a malformed
    request gets ``E_INVALID``; a :class:`BackendDefect` propagates and :func:`serve` exits, so the
    harness reports it as it would in-process."""
    try:
        request = json.loads(line)
    except json.JSONDecodeError as error:
        return _error(None, codes.E_INVALID, f"not a JSON object: {error.msg}"), session
    if not isinstance(request, dict):
        return _error(None, codes.E_INVALID, "a request is a JSON object"), session
    request_id, op = request.get("id"), request.get("op")
    if op == "open":
        try:
            session = _open_request(backend, request)
        except (ValueError, BackendDefect) as error:
            return _error(request_id, codes.E_INVALID, str(error)), session
        return {
            "id": request_id,
            "ok": True,
            "code": codes.OK,
            "features": sorted(session.features),
            "backend": backend.spec,
            "version": session.version,
        }, session
    if op not in OPS:
        return _error(request_id, codes.E_UNSUPPORTED, f"unknown op {op!r}"), session
    if session is None:
        return _error(request_id, codes.E_INVALID, "send 'open' first"), session
    # the line is any JSON object, not yet a Request: the session checks its fields (UsageError)
    fields = {key: value for key, value in request.items() if key not in ("op", "id")}
    try:
        answer = session.request(op, **fields)
    except UsageError as error:
        return _error(request_id, codes.E_INVALID, str(error)), session
    return {"id": request_id, **answer}, session


def serve(backend: InProcessBackend, stdin: IO[str], stdout: IO[str]) -> int:
    """Serves the Python backend over JSON Lines until stdin closes.

    Returns 0, or 1 when the backend raised (the defect is described on stderr).
    """
    session: InProcessSession | None = None
    for line in stdin:
        if not line.strip():
            continue
        try:
            answer, session = handle_line(backend, session, line)
        except BackendDefect as defect:
            print(
                f"memspec serve: backend defect: {defect}\nsent: {defect.sent!r}\n"
                f"received: {defect.received}",
                file=sys.stderr,
            )
            return 1
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
    if session is not None:
        session.close()
    return 0
