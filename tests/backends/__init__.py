"""Backends broken on purpose, for the harness's own tests."""

from pathlib import Path
from typing import Any


def factory_of(cls: type) -> Any:
    """Returns the backend factory ``(root, **limits) -> cls(root, **limits)``, documented as
    ``cls``."""

    def open_store(root: Path, **limits: int) -> Any:
        return cls(root, **limits)

    open_store.__doc__ = cls.__doc__
    return open_store
