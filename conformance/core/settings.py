"""The settings of one certification, built once from ``memspec certify``, ``memspec.certify()`` or
the pytest plugin's options.

:func:`make_settings` is the one place that checks them and resolves every path against the starting
directory; :meth:`Settings.to_json` is the form that crosses into pytest-xdist's workers.
"""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memspec.conformance.core.profiles import Profile, resolve_profile
from memspec.conformance.core.registry import RETIRED_IDS, all_checks
from memspec.conformance.core.waits import CALL_TIMEOUT
from memspec.conformance.transport.backend import Backend, InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.spec.clauses import parse_clauses
from memspec.spec.document import installed_spec
from memspec.spec.errors import UsageError
from memspec.spec.examples import parse_examples

ONE_BACKEND = "give exactly one of --backend MODULE:FACTORY and --backend-cmd CMD"
NAMELESS = (
    "a factory with no importable name (a lambda, or a function defined inside another) runs "
    "in one process: define it at module level to use workers"
)


@dataclass(frozen=True)
class Settings:
    """Settings are a certification's options, checked and resolved; ``backend`` is ``None`` only
    under a user's own pytest given no backend option, ``features`` ``None`` until a probe read
    them."""

    backend: Backend | None
    profile: Profile
    timeout: float = CALL_TIMEOUT
    seed: int | None = None
    report: Path | None = None
    expected_failures: frozenset[str] = frozenset()
    expected_failures_file: Path | None = None
    spec_path: Path | None = None
    hypothesis_db: str | None = None
    features: frozenset[str] | None = None
    nameless: bool = False
    """Whether the backend is a factory object with no name to import it by: it cannot reach
    another process, so its run has no workers."""

    def with_features(self, features: frozenset[str]) -> Settings:
        """Returns these settings with the features a probe of the backend read."""
        return replace(self, features=features)

    def to_json(self) -> dict[str, Any]:
        """Returns the settings as data, for a worker process (a backend given by object, with
        no name to import it by, cannot travel: such a run has no workers)."""
        if self.nameless:
            raise UsageError(NAMELESS)
        backend = self.backend.address() if self.backend is not None else None
        return {
            "factory": backend.factory if backend else "",
            "command": backend.command if backend else "",
            "cwd": backend.cwd if backend else "",
            "profile": self.profile.name,
            "timeout": self.timeout,
            "seed": self.seed,
            "report": str(self.report) if self.report else None,
            "expected_failures": sorted(self.expected_failures),
            "expected_failures_file": (
                str(self.expected_failures_file) if self.expected_failures_file else None
            ),
            "spec_path": str(self.spec_path) if self.spec_path else None,
            "hypothesis_db": self.hypothesis_db,
            "features": sorted(self.features) if self.features is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        """Returns the settings :meth:`to_json` gave, in a worker process."""
        backend: Backend | None = None
        if data["factory"]:
            backend = InProcessBackend(data["factory"], data["timeout"])
        elif data["command"]:
            backend = CommandBackend(data["command"], data["timeout"], cwd=data["cwd"])
        path = lambda value: Path(value) if value else None  # noqa: E731
        features = data["features"]
        return cls(
            backend=backend,
            profile=resolve_profile(data["profile"]),
            timeout=data["timeout"],
            seed=data["seed"],
            report=path(data["report"]),
            expected_failures=frozenset(data["expected_failures"]),
            expected_failures_file=path(data["expected_failures_file"]),
            spec_path=path(data["spec_path"]),
            hypothesis_db=data["hypothesis_db"],
            features=frozenset(features) if features is not None else None,
        )


def make_settings(
    *,
    base: Path,
    backend: str | None = None,
    backend_cmd: str | None = None,
    given: Backend | None = None,
    require_backend: bool = True,
    profile: str | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    report: str | Path | None = None,
    expected_failures: str | Path | None = None,
    hypothesis_db: str | None = None,
    spec_path: str | Path | None = None,
) -> Settings:
    """Returns the settings of a run started in directory ``base``, every path resolved against
    it (raises UsageError, naming what was given and what is expected)."""
    named = [bool(backend), bool(backend_cmd), given is not None]
    if sum(named) > 1 or (require_backend and sum(named) != 1):
        raise UsageError(ONE_BACKEND)
    if timeout is not None and not timeout > 0:
        raise UsageError(f"timeout must be positive seconds, got {timeout!r}")
    seconds = timeout or CALL_TIMEOUT
    chosen: Backend | None = given
    if backend:
        chosen = InProcessBackend(backend, seconds)
    elif backend_cmd:
        chosen = CommandBackend(backend_cmd, seconds)
    resolved = resolve_profile(profile)
    report_dir = (base / report).absolute() if report else None
    if report_dir is not None:
        confirm_writable(report_dir)
    listed = (base / expected_failures).absolute() if expected_failures else None
    spec_file = (base / spec_path).absolute() if spec_path else None
    if not hypothesis_db and report_dir is not None and not resolved.derandomize:
        hypothesis_db = str(report_dir / "hypothesis")
    return Settings(
        backend=chosen,
        profile=resolved,
        timeout=seconds,
        seed=seed,
        report=report_dir,
        expected_failures=read_expected_failures(listed, spec_file),
        expected_failures_file=listed,
        spec_path=spec_file,
        hypothesis_db=hypothesis_database(hypothesis_db, base),
        nameless=given is not None,
    )


def confirm_writable(directory: Path) -> None:
    """Creates the report directory and writes a probe file in it, before any check runs, so that
    a directory the run cannot write is a usage error and not a lost run (raises UsageError)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise UsageError(
            f"cannot write the report directory {str(directory)!r}: "
            f"{error.strerror or error}; give --report a directory this run may write"
        ) from None


def known_ids(spec_file: Path | None = None) -> frozenset[str]:
    """Returns every id an expected-failures file may list: the clauses of SPEC.md (the
    installed one, or ``spec_file``), its examples and the named checks, each also as the test
    id ``AREA/name`` certify reports."""
    text = spec_file.read_text(encoding="utf-8") if spec_file is not None else installed_spec().text
    named = [(example.id, example.clauses) for example in parse_examples(text)]
    named += [(check.id, check.clauses) for check in all_checks().values()]
    tests = {f"{clauses[0].rsplit('-', 1)[0]}/{name}" for name, clauses in named if clauses}
    return frozenset({c.id for c in parse_clauses(text)} | {name for name, _ in named} | tests)


def read_expected_failures(path: Path | None, spec_file: Path | None = None) -> frozenset[str]:
    """Returns the ids listed in an expected-failures file (``#`` starts a comment), a retired
    check id read as the check that does its work now; an id that names no clause, example or
    check is a usage error (a typo would otherwise expect nothing, silently)."""
    if path is None:
        return frozenset()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the expected-failures file {str(path)!r}: {error}") from None
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    listed = {number: RETIRED_IDS.get(line, line) for number, line in enumerate(lines, 1) if line}
    known = known_ids(spec_file)
    unknown = [f"{name} (line {number})" for number, name in listed.items() if name not in known]
    if unknown:
        raise UsageError(
            f"the expected-failures file {str(path)!r} lists ids that name no clause, example or "
            f"check: {', '.join(unknown)}; list clause ids such as FORMAT-1, or check ids such as "
            "drift.external_bytes_survive_rewrite (memspec spec --clause ID shows a clause and "
            "its checks)"
        )
    return frozenset(listed.values())


def hypothesis_database(location: str | None, base: Path) -> str | None:
    """Returns the example database location to use: a ``redis://`` URL as given (the ``redis``
    package must be installed), or a directory made absolute against ``base``."""
    if not location:
        return None
    if location.startswith(("redis://", "rediss://", "unix://")):
        if importlib.util.find_spec("redis") is None:
            raise UsageError(
                f"the example database {location} needs the redis package: "
                "pip install 'memspec[campaign]'"
            )
        return location
    return str((base / location).absolute())
