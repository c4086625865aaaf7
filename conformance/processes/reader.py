"""A reader process that samples a root's files while sessions write them (ATOMIC-2, LOCK-3).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypedDict

from memspec.conformance.core.waits import (
    READER_EXIT_GRACE,
    REAP_TIMEOUT,
    START_TIMEOUT,
    STOP_TIMEOUT,
)
from memspec.conformance.processes.workers import process_context
from memspec.conformance.transport.wire import HistoryRecord, Request, Sample
from memspec.conformance.verdict.findings import HarnessError
from memspec.spec.codec import decode, parse_text
from memspec.spec.targets import FILENAMES

PAUSE = 0.0005
"""Seconds between two rounds of reads."""
MAX_SAMPLES = 500_000
"""Samples kept before the reader stops sampling (it then only waits for the stop)."""


class Samples(TypedDict):
    """What the reader process sends: each value it read, once, and each sample as (target,
    call time, return time, index of its value)."""

    values: list[bytes | str | None]
    samples: list[tuple[str, float, float, int]]


class ReaderError(HarnessError):
    """The reader process did not hand over its samples (it died or hung): memspec's bug."""


def _read(path: Path) -> bytes | str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{type(error).__name__}: {error}"


def sample_files(
    paths: Sequence[tuple[str, str]],
    stop: Any,
    sender: Any,
    pause: float = PAUSE,
    ready: Any = None,
) -> None:
    """The reader's body: samples ``paths`` (target, file) until ``stop`` is set, then once more,
    and sends ``{"values": [...], "samples": [(target, call, ret, value index)]}``; a value is the
    bytes, ``None`` (no file) or the error text. ``ready`` is set after the first round."""
    values: list[bytes | str | None] = []
    index: dict[bytes | str | None, int] = {}
    samples: list[tuple[str, float, float, int]] = []

    def take() -> None:
        for target, path in paths:
            call = time.monotonic()
            value = _read(Path(path))
            ret = time.monotonic()
            if value not in index:
                index[value] = len(values)
                values.append(value)
            samples.append((target, call, ret, index[value]))

    take()
    if ready is not None:
        ready.set()
    while not stop.is_set():
        if len(samples) < MAX_SAMPLES:
            take()
        time.sleep(pause)
    take()
    try:
        sender.send(Samples(values=values, samples=samples))
    finally:
        with suppress(OSError):
            sender.close()


def sample_value(value: bytes | str | None) -> Sample:
    """Returns the history value of a sample: ``{"entries": [...]}`` (no file: no entries) or
    ``{"unreadable": true}`` (bytes that do not decode, with ``error`` when the read failed)."""
    if value is None:
        return {"entries": []}
    if isinstance(value, str):
        return {"unreadable": True, "error": value}
    text = decode(value)
    return {"unreadable": True} if text is None else {"entries": parse_text(text)}


class Reader:
    """A Reader is a running reader process on ``root``'s ``targets``; ``process`` is the
    process number of its reads in the history."""

    def __init__(
        self, root: Path, targets: Sequence[str], *, process: int, pause: float = PAUSE
    ) -> None:
        context = process_context()
        self.process_number = process
        self.targets = tuple(targets)
        self._stop = context.Event()
        ready = context.Event()
        self._receiver, sender = context.Pipe(duplex=False)
        paths = [(target, str(Path(root) / FILENAMES[target])) for target in self.targets]
        self._process = context.Process(
            target=sample_files,
            args=(paths, self._stop, sender, pause, ready),
            name="memspec-reader",
            daemon=True,
        )
        self._process.start()
        sender.close()
        self._events: list[HistoryRecord] | None = None
        if not ready.wait(START_TIMEOUT):
            self._stop.set()
            self._reap(0)
            raise ReaderError(f"the reader took no sample within {START_TIMEOUT:g} s")

    def stop(self, timeout: float = STOP_TIMEOUT) -> list[HistoryRecord]:
        """Stops sampling, reaps the process and returns the samples as history records in the
        format of :mod:`memspec.conformance.history.history`, in the order taken; raises ReaderError
        when the reader sends nothing within ``timeout`` seconds."""
        if self._events is not None:
            return self._events
        self._stop.set()
        try:
            if not self._receiver.poll(timeout):
                raise ReaderError(f"the reader sent no samples within {timeout:g} s")
            record = self._receiver.recv()
        except (EOFError, OSError) as error:
            raise ReaderError(f"the reader died before sending its samples ({error})") from None
        finally:
            self._reap(REAP_TIMEOUT)
        self._events = self._to_events(record)
        return self._events

    def _to_events(self, record: Samples) -> list[HistoryRecord]:
        values = [sample_value(value) for value in record["values"]]
        events: list[HistoryRecord] = []
        process = self.process_number
        for target, call, ret, index in record["samples"]:
            request: Request = {"op": "read", "target": target}
            events.append({"type": "invoke", "process": process, "op": request, "time": call})
            value = values[index]
            events.append(
                {"type": "ok", "process": process, "op": request, "time": ret, "value": value}
            )
        return events

    def _reap(self, timeout: float) -> None:
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        with suppress(OSError):
            self._receiver.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._events is None:
            self._stop.set()
            self._reap(READER_EXIT_GRACE)
