"""``memspec.certify``: certify a backend from Python, without a subprocess.

It runs exactly what ``memspec certify`` runs and returns the structured result instead of an exit
status, so a project can certify its store from its own test suite.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from memspec.conformance.commands.certify import (
    CertifyRequest,
    CertifyResult,
    probe_backend,
    run_certification,
    start_coverage,
)
from memspec.conformance.core.settings import make_settings
from memspec.conformance.transport.backend import (
    BackendDefect,
    InProcessBackend,
    factory_name,
)
from memspec.spec.errors import UsageError

__all__ = ["CertifyResult", "certify"]

Factory = Callable[..., Any]


def certify(
    backend: str | Factory | None = None,
    *,
    backend_cmd: str | None = None,
    profile: str = "ci",
    report: str | PathLike[str] | None = None,
    expected_failures: str | PathLike[str] | None = None,
    workers: int | str | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    select: str | None = None,
    hypothesis_db: str | None = None,
    keep_temp: bool = False,
    coverage: bool = False,
    verbose: bool = False,
    hermes_class: str | None = None,
    hermes_rules: str | PathLike[str] | None = None,
    hermes_between: str | None = None,
    hermes_snapshot: str | None = None,
) -> CertifyResult:
    """Returns the result of certifying a backend with the whole harness.

    ``backend`` is a ``"MODULE:FACTORY"`` name or the factory itself; ``backend_cmd`` a command that
    speaks JSON Lines instead; the other arguments are the options of ``memspec certify``. A factory
    with no importable name is certified in this process and cannot be combined with ``workers``. A
    script that calls this must guard its entry point with ``if __name__ == "__main__":``. Unless
    ``verbose``, nothing is printed (pytest's output is ``result.output``). ``coverage`` measures a
    Python backend named ``"MODULE:FACTORY"`` (or defined at a module's top level) as
    ``--coverage`` does: the figures are in ``result.notes`` and, with ``report``, in
    ``coverage.json`` and the reports.

    ``hermes_class`` (``"MODULE:CLASS"`` or ``"PATH.py:CLASS"``) certifies a class with Hermes'
    ``MemoryStore`` shape instead, as ``--hermes-class`` does, with ``hermes_rules``,
    ``hermes_between`` and ``hermes_snapshot`` as its options (docs/hermes-class.md).

    Raises UsageError for a bad argument; a backend that cannot be opened is a result with status 2
    and the reason in its notes.
    """
    hermes = (hermes_rules, hermes_between, hermes_snapshot)
    if hermes_class is not None:
        if backend is not None or backend_cmd is not None:
            raise UsageError("give one backend: backend, backend_cmd or hermes_class")
        from memspec.conformance.hermes.store_class import command

        backend_cmd, _ = command(
            hermes_class,
            rules=None if hermes_rules is None else str(hermes_rules),
            between=hermes_between,
            snapshot=hermes_snapshot,
        )
    elif any(value is not None for value in hermes):
        raise UsageError("hermes_rules, hermes_between and hermes_snapshot need hermes_class")
    if workers is not None and str(workers) != "auto" and not str(workers).isdigit():
        raise UsageError(f"workers must be a positive int or 'auto', got {workers!r}")
    name, given = _backend_name(backend, timeout)
    settings = make_settings(
        base=Path.cwd(),
        backend=name,
        backend_cmd=backend_cmd,
        given=given,
        profile=profile,
        timeout=timeout,
        seed=seed,
        report=report,
        expected_failures=expected_failures,
        hypothesis_db=hypothesis_db,
    )
    request = CertifyRequest(
        settings,
        workers=str(workers) if workers else None,
        select=select,
        verbose=verbose,
        progress=verbose,
        keep_temp=keep_temp,
        coverage=coverage,
    )
    measured = start_coverage(request) if coverage else None
    try:
        request = probe_backend(request)
    except BackendDefect as defect:
        if measured is not None:
            measured.cov.stop()
        counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
        return CertifyResult(2, counts, [], [f"the backend could not be started: {defect}"])
    return run_certification(request, measured)


def _backend_name(
    backend: str | Factory | None, timeout: float | None
) -> tuple[str | None, InProcessBackend | None]:
    """Returns the ``MODULE:FACTORY`` name of ``backend`` (a factory defined at module level is
    named, so that every process can import it), or the backend object of a factory that has
    no importable name."""
    if backend is None or isinstance(backend, str):
        return backend, None
    if not callable(backend):
        raise UsageError(
            f"backend must be 'MODULE:FACTORY' or a factory callable, got {type(backend).__name__}"
        )
    name = factory_name(backend)
    return (name, None) if name else (None, InProcessBackend.of_factory(backend, timeout))
