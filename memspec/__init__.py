"""memspec: the conformance and fuzz harness for bounded, file-backed agent memory.

The programmatic front door is :func:`certify`; the command is ``memspec certify``::

    import memspec

    result = memspec.certify("mypackage.memory:open_store", profile="smoke")
    assert result.ok, result.summary

The specification is :mod:`memspec.spec`, the reference store :mod:`memspec.reference_impl`,
the harness :mod:`memspec.conformance`, the properties :mod:`memspec.fuzz`.
"""

from __future__ import annotations

from memspec.conformance.api import CertifyResult, certify
from memspec.conformance.backend import UsageError

__all__ = ["CertifyResult", "UsageError", "certify"]
