"""The settings of one certification: one frozen value, built once from ``memspec certify``,
``memspec.certify()`` or the pytest plugin's options, and handed to every part of the run.

:func:`make_settings` is the one place that checks them, resolves every path against the starting
directory and reads the run's SPEC.md; :meth:`Settings.to_json` is the form that crosses into
pytest-xdist's workers, derived from the fields and their types (a field of a type with no codec
here fails at import, never mid-run).
"""

from __future__ import annotations

import importlib.util
import tempfile
import types
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from os import PathLike
from pathlib import Path
from typing import Any

from memspec.conformance.core.profiles import Profile, resolve_profile
from memspec.conformance.core.registry import RETIRED_IDS, all_checks
from memspec.conformance.core.waits import CALL_TIMEOUT, RELEASE_CALL_TIMEOUT
from memspec.conformance.transport.backend import Address, Backend, InProcessBackend, subject_of
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.conformance.transport.provider import ProviderBackend
from memspec.spec.clauses import PROVIDER, STORE
from memspec.spec.document import Spec, installed_spec, parse_spec, read_spec
from memspec.spec.errors import SpecError, UsageError

ONE_BACKEND = "give exactly one of --backend MODULE:FACTORY and --backend-cmd CMD"
NAMELESS = (
    "a factory with no importable name (a lambda, or a function defined inside another) runs "
    "in one process: define it at module level to use workers"
)


@dataclass(frozen=True)
class Settings:
    """Settings are a certification's options, checked and resolved: what to certify (``backend``;
    ``None`` only under a user's own pytest given no backend option), against which spec
    (``spec``, the installed SPEC.md unless a file was given), how each check runs, and how the
    run goes (processes, selection, coverage, output, temporary files). ``features`` is ``None``
    until a probe of the backend read them."""

    backend: Backend | None
    profile: Profile = field(default_factory=lambda: resolve_profile(None))
    timeout: float = CALL_TIMEOUT
    seed: int | None = None
    report: Path | None = None
    expected_failures: frozenset[str] = frozenset()
    expected_failures_file: Path | None = None
    spec: Spec = field(default_factory=installed_spec)
    """The one parsed SPEC.md of the run: its examples are the suite's, its clauses judge the
    records (the report, the level, the summary), its version is the report's."""
    hypothesis_db: str | None = None
    features: frozenset[str] | None = None
    nameless: bool = False
    """Whether the backend is a factory object with no name to import it by: it cannot reach
    another process, so its run has no workers."""
    backend_shape: str | None = None
    """For a class certified with ``--hermes-class``, its shape as inspected (what was found
    where), which certify prints before the run."""
    workers: str | None = None
    """pytest-xdist's ``-n`` (certify's; under a user's own pytest, pytest's own options say how
    the run goes, and these keep their defaults)."""
    select: str | None = None
    """pytest's ``-k``: only the checks whose id matches."""
    coverage: bool = False
    verbose: bool = False
    """pytest's line per check and every failure's whole message (``certify -v``)."""
    quiet: bool = False
    """Nothing printed while the checks run (``certify -q``; ``memspec.certify()`` unless
    ``verbose``): pytest's output is kept in the result instead."""
    keep_temp: bool = False

    def with_features(self, features: frozenset[str]) -> Settings:
        """Returns these settings with the features a probe of the backend read."""
        return replace(self, features=features)

    def to_json(self) -> dict[str, Any]:
        """Returns the settings as data, for a worker process: each field by the codec of its
        type (a backend given by object, with no name to import it by, cannot travel: such a
        run has no workers)."""
        if self.nameless:
            raise UsageError(NAMELESS)
        return {name: codec.dump(getattr(self, name)) for name, codec in _CODECS.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        """Returns the settings :meth:`to_json` gave, in a worker process."""
        return cls(**{name: codec.load(data[name]) for name, codec in _CODECS.items()})


@dataclass(frozen=True)
class Codec:
    """A Codec is how a value of one type crosses into a worker process as JSON: ``dump`` makes
    it built-in types, ``load`` makes it again."""

    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]


def backend_at(address: Address, timeout: float | None) -> Backend:
    """Returns the backend found at ``address`` (a command, or a ``MODULE:FACTORY``), waiting at
    most ``timeout`` seconds for one call."""
    if address.subject == PROVIDER:
        return ProviderBackend(
            address.command,
            timeout or RELEASE_CALL_TIMEOUT,
            cwd=address.cwd,
            home_setup=address.home_setup,
        )
    if address.command:
        return CommandBackend(address.command, timeout or CALL_TIMEOUT, cwd=address.cwd)
    return InProcessBackend(address.factory, timeout)


def _dump_spec(spec: Spec) -> dict[str, str | None] | None:
    """The installed SPEC.md as a store's run reads it travels as nothing (every process has it);
    another subject's view of it as that subject; a given file as its path, text and subject, so
    that every worker judges by the very text the run started with."""
    if spec is installed_spec(STORE):
        return None
    installed = installed_spec()
    if spec.text == installed.text and spec.path == installed.path:
        return {"subject": spec.subject}
    return {"path": str(spec.path), "text": spec.text, "subject": spec.subject}


def _load_spec(data: dict[str, str | None] | None) -> Spec:
    if data is None:
        return installed_spec(STORE)
    text, path, subject = data.get("text"), data.get("path"), data.get("subject")
    if text is None:
        return installed_spec(subject)
    whole = parse_spec(text, Path(str(path)))
    return whole if subject is None else whole.of_subject(subject)


def _dump_backend(backend: Backend) -> dict[str, Any]:
    return {**asdict(backend.address()), "timeout": backend.timeout}


def _load_backend(data: dict[str, Any]) -> Backend:
    fields_of = {key: value for key, value in data.items() if key != "timeout"}
    return backend_at(Address(**fields_of), data["timeout"])


TYPE_CODECS: dict[type, Codec] = {
    Path: Codec(str, Path),
    frozenset: Codec(sorted, frozenset),
    Profile: Codec(lambda profile: profile.name, resolve_profile),
    Spec: Codec(_dump_spec, _load_spec),
    Backend: Codec(_dump_backend, _load_backend),
}
"""The codec of each type a field of :class:`Settings` may have beyond JSON's own."""
_JSON_TYPES = (str, int, float, bool)


def codec_of(hint: Any) -> Codec:
    """Returns the codec of a field's type: JSON's own types pass as they are, ``X | None`` is
    ``X``'s codec with ``None`` passing as it is; raises TypeError for a type with no codec."""
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
    if optional:
        (hint,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
    base = typing.get_origin(hint) or hint
    if base in _JSON_TYPES:
        return Codec(_same, _same)
    if base not in TYPE_CODECS:
        raise TypeError(f"Settings has a field of type {hint!r}, which no codec carries")
    codec = TYPE_CODECS[base]
    if not optional:
        return codec
    return Codec(
        lambda value: None if value is None else codec.dump(value),
        lambda value: None if value is None else codec.load(value),
    )


def _same(value: Any) -> Any:
    return value


_CODECS = {
    each.name: codec_of(typing.get_type_hints(Settings)[each.name]) for each in fields(Settings)
}
"""The codec of every field of :class:`Settings`, by name, made once at import."""


def make_settings(
    *,
    base: Path,
    backend: str | None = None,
    backend_cmd: str | None = None,
    provider_cmd: str | None = None,
    home_setup: str | None = None,
    given: Backend | None = None,
    require_backend: bool = True,
    profile: str | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    report: str | PathLike[str] | None = None,
    expected_failures: str | PathLike[str] | None = None,
    hypothesis_db: str | None = None,
    spec: str | PathLike[str] | None = None,
    backend_shape: str | None = None,
    workers: int | str | None = None,
    select: str | None = None,
    coverage: bool = False,
    verbose: bool = False,
    quiet: bool = False,
    keep_temp: bool = False,
) -> Settings:
    """Returns the settings of a run started in directory ``base``, every path resolved against
    it and the SPEC.md ``spec`` names read (the installed one when ``None``), as the view of the
    subject the backend is (SPEC.md, "Subjects": ``provider_cmd`` names a provider plugin's
    driver, ``memspec provider``, and ``home_setup`` the command run in each new Hermes home
    before it starts); raises UsageError, naming what was given and what is expected."""
    named = [bool(backend), bool(backend_cmd), bool(provider_cmd), given is not None]
    if sum(named) > 1 or (require_backend and sum(named) != 1):
        raise UsageError(ONE_BACKEND)
    if timeout is not None and not timeout > 0:
        raise UsageError(f"timeout must be positive seconds, got {timeout!r}")
    if workers is not None and str(workers) != "auto" and not str(workers).isdigit():
        raise UsageError(f"workers must be a positive int or 'auto', got {workers!r}")
    if given is not None and workers:
        raise UsageError(NAMELESS)
    if home_setup and not provider_cmd:
        raise UsageError("--home-setup prepares a provider's Hermes home: give it with a provider")
    seconds = timeout or CALL_TIMEOUT
    chosen: Backend | None = given
    if backend:
        chosen = InProcessBackend(backend, seconds)
    elif backend_cmd:
        chosen = CommandBackend(backend_cmd, seconds)
    elif provider_cmd:
        chosen = ProviderBackend(
            provider_cmd,
            timeout or RELEASE_CALL_TIMEOUT,
            cwd=str(base),
            home_setup=home_setup or "",
        )
    resolved = resolve_profile(profile)
    subject = subject_of(chosen) if chosen is not None else STORE
    the_spec = spec_of((base / spec).absolute()).of_subject(subject) if spec else None
    the_spec = the_spec or installed_spec(subject)
    report_dir = (base / report).absolute() if report else None
    if report_dir is not None:
        confirm_writable(report_dir)
    listed = (base / expected_failures).absolute() if expected_failures else None
    if not hypothesis_db and report_dir is not None and not resolved.derandomize:
        hypothesis_db = str(report_dir / "hypothesis")
    return Settings(
        backend=chosen,
        profile=resolved,
        timeout=seconds,
        seed=seed,
        report=report_dir,
        expected_failures=read_expected_failures(listed, the_spec),
        expected_failures_file=listed,
        spec=the_spec,
        hypothesis_db=hypothesis_database(hypothesis_db, base),
        nameless=given is not None,
        backend_shape=backend_shape,
        workers=str(workers) if workers else None,
        select=select,
        coverage=coverage,
        verbose=verbose,
        quiet=quiet,
        keep_temp=keep_temp,
    )


def spec_of(path: Path | None) -> Spec:
    """Returns the SPEC.md at ``path`` (``None``: the installed one), parsed; a file that cannot
    be read, is no SPEC.md or is malformed is a UsageError naming it."""
    try:
        return read_spec(path)
    except SpecError as error:
        raise UsageError(f"the spec {path} is malformed: {error}") from None


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


def known_ids(spec: Spec | None = None) -> frozenset[str]:
    """Returns every id an expected-failures file may list: the clauses of ``spec`` (the
    installed SPEC.md by default), its examples and the named checks, each also as the test id
    ``AREA/name`` certify reports."""
    spec = spec or installed_spec()
    named = [(example.id, example.clauses) for example in spec.examples]
    named += [(check.id, check.clauses) for check in all_checks().values()]
    tests = {f"{clauses[0].rsplit('-', 1)[0]}/{name}" for name, clauses in named if clauses}
    return frozenset({c.id for c in spec.clauses} | {name for name, _ in named} | tests)


def read_expected_failures(path: Path | None, spec: Spec | None = None) -> frozenset[str]:
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
    known = known_ids(spec)
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
