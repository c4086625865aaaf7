"""The check context: sessions on the check's root, each closed when its block ends, and what can
be done to the backend's file-system calls, handed to every check as ``ctx.tampering``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memspec.conformance.core.profiles import PROFILES
from memspec.conformance.core.registry import Check, CheckContext, run_within_budget
from memspec.conformance.processes.workers import Job
from memspec.conformance.tamper.capability import (
    Interposition,
    Strace,
    Tampering,
    Unreachable,
    tampering,
)
from memspec.conformance.transport.backend import BackendDefect, InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.verdict.findings import NotApplicable


class _Ledger:
    """The stores a factory opened, in order, and those closed since."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.opened: list[_Store] = []
        self.closed: list[_Store] = []
        self.fail_at = fail_at

    def backend(self) -> InProcessBackend:
        def open_store(root: Path, **limits: int) -> _Store:
            if len(self.opened) == self.fail_at:
                raise OSError("no more sessions here")
            store = _Store(self, root, limits)
            self.opened.append(store)
            return store

        return InProcessBackend.of_factory(open_store, 5)


class _Store:
    """A store that only says where it was opened and records its close."""

    def __init__(self, ledger: _Ledger, root: Path, limits: dict[str, int]) -> None:
        self.ledger, self.root, self.limits = ledger, root, limits

    def load(self) -> None:
        pass

    def close(self) -> None:
        self.ledger.closed.append(self)


def _context(backend: Any, tmp_path: Path, **given: Any) -> CheckContext:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return CheckContext(backend, root, tmp_path, PROFILES["ci"], **given)


def test_a_session_is_closed_when_its_block_ends(tmp_path: Path) -> None:
    ledger = _Ledger()
    ctx = _context(ledger.backend(), tmp_path)
    with ctx.session({"memory": 50}) as session:
        assert session.request("load")["ok"]
        assert ledger.closed == []
    (store,) = ledger.opened
    assert store.root == ctx.root and store.limits["memory_char_limit"] == 50
    assert ledger.closed == [store]
    with pytest.raises(KeyError), ctx.session():
        raise KeyError("a check that stops half-way")
    assert ledger.closed == ledger.opened


def test_a_session_on_another_root_of_the_check(tmp_path: Path) -> None:
    ledger = _Ledger()
    ctx = _context(ledger.backend(), tmp_path)
    probe = tmp_path / "probe"
    probe.mkdir()
    with ctx.session(root=probe):
        pass
    assert [store.root for store in ledger.closed] == [probe]


def test_sessions_are_opened_in_order_and_all_closed(tmp_path: Path) -> None:
    ledger = _Ledger()
    ctx = _context(ledger.backend(), tmp_path)
    with ctx.sessions(3, {"user": 40}) as sessions:
        assert len(sessions) == 3 and len({id(session) for session in sessions}) == 3
        assert [store.root for store in ledger.opened] == [ctx.root] * 3
        assert all(store.limits["user_char_limit"] == 40 for store in ledger.opened)
        assert ledger.closed == []
    assert sorted(map(id, ledger.closed)) == sorted(map(id, ledger.opened))


def test_sessions_opened_before_one_that_fails_are_closed(tmp_path: Path) -> None:
    ledger = _Ledger(fail_at=2)
    ctx = _context(ledger.backend(), tmp_path)
    with pytest.raises(BackendDefect, match="no more sessions"), ctx.sessions(3):
        pytest.fail("the block runs only when every session opened")
    assert len(ledger.opened) == 2
    assert sorted(map(id, ledger.closed)) == sorted(map(id, ledger.opened))


def test_claimed_features_closes_the_session_it_opens(tmp_path: Path) -> None:
    ledger = _Ledger()
    assert _context(ledger.backend(), tmp_path).claimed_features() == {"core"}
    assert ledger.closed == ledger.opened and len(ledger.opened) == 1


def test_tampering_comes_from_where_the_store_runs(tmp_path: Path) -> None:
    python = _context(InProcessBackend("memspec.reference_impl:open_store"), tmp_path)
    command = _context(CommandBackend("memspec serve --backend x:y"), tmp_path)
    assert isinstance(python.tampering, Interposition)
    assert isinstance(command.tampering, Strace)


class _Elsewhere:
    """A backend that does not say where its store runs."""

    label = "elsewhere"


def test_a_backend_whose_calls_cannot_be_reached_makes_a_check_not_applicable(
    tmp_path: Path,
) -> None:
    tamper = tampering(_Elsewhere())
    assert isinstance(tamper, Unreachable)
    job = Job(InProcessBackend("memspec.reference_impl:open_store"), tmp_path, ())
    attempts = [
        tamper.require,
        lambda: tamper.record(job, 1.0, tmp_path),
        lambda: tamper.stopped(job, tmp_path),
    ]
    for attempt in attempts:
        with pytest.raises(NotApplicable, match="Python and command backends"):
            attempt()


def test_the_tampering_handed_to_the_context_reaches_the_check(tmp_path: Path) -> None:
    handed: Tampering = Unreachable("handed over by the suite")
    seen: list[Tampering] = []
    check = Check(
        "read.unreadable_file_is_not_empty",
        ("READ-7",),
        ("core",),
        lambda ctx: seen.append(ctx.tampering),
    )
    ctx = _context(InProcessBackend("memspec.reference_impl:open_store"), tmp_path)
    run_within_budget(check, _context(ctx.backend, tmp_path, tampering=handed))
    check.run(ctx)
    assert seen[0] is handed
    assert seen[1] is ctx.tampering and isinstance(seen[1], Interposition)
