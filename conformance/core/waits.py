"""How long the harness waits, and how often it looks: every timeout and poll interval that is not a
profile's size or a check's budget. Each timeout is a guard against a hang, far above the normal
duration, so it never decides a verdict on a busy machine."""

from __future__ import annotations

CALL_TIMEOUT = 10.0
"""Longest wait for one answer of a backend (``--timeout``'s default)."""
RELEASE_CALL_TIMEOUT = 60.0
"""Longest wait for one answer of a Hermes release certified by ``memspec hermes``, ``matrix``
or ``sweep``: its first agent op imports the agent, seconds on a quiet machine."""
TRACED_CALL_TIMEOUT = 30.0
"""Longest wait for one answer of a backend running under strace, which is slower."""
START_TIMEOUT = 30.0
"""Longest wait for a process to start and be ready: a worker to open its session, the reader
to take its first samples, a scheduled worker to reach its first call."""
SESSION_TIMEOUT = 30.0
"""Longest a worker's session may take to run its operations, by default."""
TRACED_SESSION_TIMEOUT = 60.0
"""Longest a session recorded, faulted or killed at one call may take (strace starts slower)."""
SECONDS_PER_OPERATION = 0.5
"""Added to :data:`SESSION_TIMEOUT` for each operation of each session run together."""
BARRIER_TIMEOUT = 30.0
"""Longest wait of a worker at the start barrier for the others."""
REAP_TIMEOUT = 5.0
"""Longest wait for a process to exit once it has sent what it had to."""
STOP_TIMEOUT = 30.0
"""Longest wait for the reader's samples after it was told to stop."""
ROUND_TIMEOUT = 30.0
"""Longest a round of the kill checks may take before its worker counts as hung."""
PROBE_TIMEOUT = 5.0
"""Longest the add after a kill may take: past it, the kill left the target locked (CRASH-3)."""
STEP_TIMEOUT = 5.0
"""Longest a scheduled call and the code after it may run before the worker counts as blocked."""
TURN_TIMEOUT = 120.0
"""Longest a parked worker waits for its turn before it gives up (the harness is gone)."""
LINEARIZABILITY_TIMEOUT = 60.0
"""Longest linearizability search of a concurrent history before its verdict is "undecided"."""
RUN_LINEARIZABILITY_TIMEOUT = 30.0
"""The same for the short history of one scheduled run."""
ATTACH_TIMEOUT = 10.0
"""Longest wait for strace to attach, and then for the process to wait again."""
STRACE_PROBE_TIMEOUT = 10.0
"""Longest the probe of what strace can do here may take."""

STRACE_POLL = 0.0005
"""How often strace's output is read while a scheduled step runs."""
ATTACH_POLL = 0.001
"""How often a process's state is read while strace attaches to it."""
PUMP_POLL = 0.25
"""Longest a worker's messages wait to be read while the harness waits for a condition."""
READER_EXIT_GRACE = 0.5
"""How long the reader is given to exit after its samples, before it is killed."""
