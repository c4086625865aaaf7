"""memspec: the conformance and fuzz harness for bounded, file-backed agent memory.

The programmatic front door is :func:`certify`; the command is ``memspec certify``::

    import memspec

    result = memspec.certify("mypackage.memory:open_store", profile="smoke")
    assert result.ok, result.summary

The specification is :mod:`memspec.spec`, the reference store :mod:`memspec.reference_impl`,
the harness :mod:`memspec.conformance`, the properties :mod:`memspec.fuzz`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memspec.conformance.commands.api import CertifyResult, certify
    from memspec.spec.errors import MemspecError, UsageError

__all__ = ["CertifyResult", "MemspecError", "UsageError", "__version__", "certify"]

__version__ = "0.1.0"
"""memspec's version, read by the build (pyproject.toml) and by a backend served from memspec
itself, without the cost of looking up installed distributions."""

_HOMES = {
    "CertifyResult": "memspec.conformance.commands.api",
    "certify": "memspec.conformance.commands.api",
    "MemspecError": "memspec.spec.errors",
    "UsageError": "memspec.spec.errors",
}
"""Where each public name lives. They are imported when first asked for, so that a program
that imports a submodule (``memspec serve``, a worker process) does not load pytest."""


def __getattr__(name: str) -> Any:
    """Returns the public name ``name``, importing its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
