"""Backends broken on purpose: the reference store with one defect each, wrapped through the
contract (they change what the store answers or writes, never its internals)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from memspec.reference_impl import open_store


class Wrapper:
    """Delegates every contract method to a reference store on the same root."""

    def __init__(self, root: Path, **limits: int) -> None:
        self.root = root
        self.inner = open_store(root, **limits)
        self.features = self.inner.features

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FloatPercent(Wrapper):
    """Computes the header percent with float division (29/100 shows 28%; SNAP-6)."""

    def snapshot(self, target: str) -> str | None:
        block = self.inner.snapshot(target)
        if block is None:
            return None

        def redo(match: re.Match[str]) -> str:
            used, limit = (int(n.replace(",", "")) for n in match.group(2, 3))
            return f"[{int(used / limit * 100 * 0.999999)}% — {match.group(2)}/{match.group(3)}"

        return re.sub(r"\[(\d+)% — ([\d,]+)/([\d,]+)", redo, block, count=1)


class DedupOnRead(Wrapper):
    """Drops duplicate entries when reading (Hermes' silent dedup; READ-5, DUP-4)."""

    def entries(self, target: str) -> list[str]:
        return list(dict.fromkeys(self.inner.entries(target)))


class AcceptsDelimiter(Wrapper):
    """Stores content holding a delimiter line as it is (hermes-agent #54403; ENTRY-3)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        answer = self.inner.add(target, content)
        if answer["code"] == "E_DELIMITER" and isinstance(content, str):
            path = self.root / ("MEMORY.md" if target == "memory" else "USER.md")
            old = path.read_bytes() if path.exists() else b""
            path.write_bytes(old + (b"\n\xc2\xa7\n" if old else b"") + content.encode())
            return {"ok": True, "code": "OK"}
        return answer


class TruncatesToFit(Wrapper):
    """Cuts content down to fit instead of refusing it (LIMIT-3)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        answer = self.inner.add(target, content)
        while answer["code"] == "E_LIMIT" and len(content) > 1:
            content = content[: len(content) // 2]
            answer = self.inner.add(target, content)
        return answer


class RaisesOnAdd(Wrapper):
    """Raises out of ``add`` instead of answering (CONTRACT-6)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        raise RuntimeError("boom: add is broken")


class HangsOnAdd(Wrapper):
    """Never returns from ``add`` (a hung backend must not hang the harness)."""

    def add(self, target: str, content: str) -> dict[str, Any]:
        time.sleep(3600)
        return {}


class ThreadBound(Wrapper):
    """A correct store whose resources belong to the thread that opened it, as a ``sqlite3``
    connection's do: a call from any other thread raises."""

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.owner = threading.get_ident()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if not callable(found):
            return found

        def on_the_owner(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.owner:
                raise RuntimeError(f"{name} called from a thread that did not open the store")
            return found(*args, **kwargs)

        return on_the_owner


class HangsOnClose(Wrapper):
    """Never returns from ``close``."""

    def close(self) -> None:
        time.sleep(3600)


class ClaimsNoBatch(Wrapper):
    """A correct store that claims only ``core`` (feature-gated checks must be skipped)."""

    features = ("core",)

    def __init__(self, root: Path, **limits: int) -> None:
        super().__init__(root, **limits)
        self.features = ("core",)


def float_percent(root: Path, **limits: int) -> FloatPercent:
    return FloatPercent(root, **limits)


def dedup_on_read(root: Path, **limits: int) -> DedupOnRead:
    return DedupOnRead(root, **limits)


def accepts_delimiter(root: Path, **limits: int) -> AcceptsDelimiter:
    return AcceptsDelimiter(root, **limits)


def truncates_to_fit(root: Path, **limits: int) -> TruncatesToFit:
    return TruncatesToFit(root, **limits)


def raises_on_add(root: Path, **limits: int) -> RaisesOnAdd:
    return RaisesOnAdd(root, **limits)


def hangs_on_add(root: Path, **limits: int) -> HangsOnAdd:
    return HangsOnAdd(root, **limits)


def thread_bound(root: Path, **limits: int) -> ThreadBound:
    return ThreadBound(root, **limits)


def hangs_on_close(root: Path, **limits: int) -> HangsOnClose:
    return HangsOnClose(root, **limits)


def core_only(root: Path, **limits: int) -> ClaimsNoBatch:
    return ClaimsNoBatch(root, **limits)


def factory_raises(root: Path, **limits: int) -> Wrapper:
    raise OSError("cannot open the store")
