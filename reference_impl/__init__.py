"""The reference implementation of bounded, file-backed agent memory.

``open_store`` is the factory named by ``memspec certify --backend
memspec.reference_impl:open_store``; it keeps every clause of SPEC.md and claims every feature.
"""

from memspec.reference_impl.store import FEATURES, Store, open_store

__all__ = ["FEATURES", "Store", "open_store"]
