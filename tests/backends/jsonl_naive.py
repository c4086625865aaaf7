"""The naive store over JSON Lines, with one protocol defect chosen on the command line.

Run as ``python -m tests.backends.jsonl_naive MODE``: ``correct`` serves it as ``memspec serve``
would; ``counts-ids`` answers with its own running count instead of echoing the request's id
(which the harness's own sequential ids never notice; CONTRACT-13); ``unknown-op-invalid``
answers an unknown op with ``E_INVALID`` instead of ``E_UNSUPPORTED`` (CONTRACT-14).
"""

from __future__ import annotations

import json
import sys

from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.transport.served import handle_line
from memspec.spec import codes

MODES = ("correct", "counts-ids", "unknown-op-invalid")


def main(mode: str) -> int:
    if mode not in MODES:
        print(f"MODE must be one of {', '.join(MODES)}, got {mode!r}", file=sys.stderr)
        return 2
    backend = InProcessBackend("tests.backends.naive:open_store")
    session = None
    for count, line in enumerate(sys.stdin):
        answer, session = handle_line(backend, session, line)
        if mode == "counts-ids":
            answer["id"] = count
        if mode == "unknown-op-invalid" and answer.get("code") == codes.E_UNSUPPORTED:
            answer["code"] = codes.E_INVALID
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "correct"))
