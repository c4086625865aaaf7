"""``memspec.certify``: certify a backend from Python, without a subprocess.

It builds the same settings and calls the same library function as ``memspec certify``
(:func:`~memspec.conformance.commands.certify.run_certification`), and returns the structured
result instead of an exit status, so a project can certify its store from its own test suite.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from memspec.conformance.commands.certify import (
    CertifyResult,
    Factory,
    run_certification,
    settings_for,
)

__all__ = ["CertifyResult", "certify"]


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
    spec: str | PathLike[str] | None = None,
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
    ``coverage.json`` and the reports. ``spec`` is a SPEC.md to certify against instead of the
    installed one, as ``--spec`` is: its examples run, its clauses judge the result.

    ``hermes_class`` (``"MODULE:CLASS"`` or ``"PATH.py:CLASS"``) certifies a class with Hermes'
    ``MemoryStore`` shape instead, as ``--hermes-class`` does, with ``hermes_rules``,
    ``hermes_between`` and ``hermes_snapshot`` as its options (docs/hermes-class.md).

    Raises UsageError for a bad argument; a backend that cannot be opened is a result with status 2
    and the reason in its notes.
    """
    settings = settings_for(
        base=Path.cwd(),
        backend=backend,
        backend_cmd=backend_cmd,
        hermes_class=hermes_class,
        hermes_rules=hermes_rules,
        hermes_between=hermes_between,
        hermes_snapshot=hermes_snapshot,
        profile=profile,
        timeout=timeout,
        seed=seed,
        report=report,
        expected_failures=expected_failures,
        hypothesis_db=hypothesis_db,
        spec=spec,
        workers=workers,
        select=select,
        coverage=coverage,
        verbose=verbose,
        quiet=not verbose,
        keep_temp=keep_temp,
    )
    return run_certification(settings)
