"""Named conformance checks, one module per spec area; importing this registers them all."""

from memspec.conformance.checks import (
    agent,  # noqa: F401
    atomic,  # noqa: F401
    concurrency,  # noqa: F401
    contract,  # noqa: F401
    crash,  # noqa: F401
    crashstates,  # noqa: F401
    drift,  # noqa: F401
    durability,  # noqa: F401
    faults,  # noqa: F401
    fence,  # noqa: F401
    files,  # noqa: F401
    interleavings,  # noqa: F401
    locking,  # noqa: F401
    patch,  # noqa: F401
    protocol,  # noqa: F401
    provider,  # noqa: F401
    read,  # noqa: F401
    recovery,  # noqa: F401
    scan,  # noqa: F401
    tool,  # noqa: F401
)
