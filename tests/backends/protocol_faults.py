"""A JSON Lines backend that serves the reference store but misbehaves at its first ``add``.

Run as ``python -m tests.backends.protocol_faults MODE`` with MODE one of ``hang`` (never
answers), ``crash`` (exits with status 3), ``garbage`` (prints a line that is not JSON),
``wrong-id`` (answers with another id), ``no-open`` (refuses to open), ``silent-start`` (never
answers even ``open``).
"""

from __future__ import annotations

import json
import sys
import time

from memspec.conformance.transport.backend import InProcessBackend
from memspec.conformance.transport.served import handle_line


def main(mode: str) -> int:
    backend = InProcessBackend("memspec.reference_impl:open_store")
    session = None
    for line in sys.stdin:
        request = json.loads(line)
        if mode == "silent-start" or (mode == "hang" and request.get("op") == "add"):
            time.sleep(3600)
        if request.get("op") == "open" and mode == "no-open":
            answer = {"id": request["id"], "ok": False, "code": "E_IO", "message": "no"}
        elif request.get("op") == "add" and mode == "crash":
            print("about to crash", file=sys.stderr, flush=True)
            return 3
        elif request.get("op") == "add" and mode == "garbage":
            print("Traceback (most recent call last): oops", flush=True)
            continue
        else:
            answer, session = handle_line(backend, session, line)
            if request.get("op") == "add" and mode == "wrong-id":
                answer["id"] = answer["id"] + 1
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
