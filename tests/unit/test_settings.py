"""The settings of a run are one frozen value (``conformance/core/settings.py``): built by
``make_settings`` for every front door, and carried into an xdist worker as data derived from its
fields, every field included."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memspec.conformance.core.profiles import resolve_profile
from memspec.conformance.core.settings import (
    Settings,
    backend_at,
    codec_of,
    make_settings,
)
from memspec.conformance.transport.backend import Address, InProcessBackend
from memspec.conformance.transport.jsonlines import CommandBackend
from memspec.spec.clauses import STORE
from memspec.spec.document import installed_spec, read_spec
from memspec.spec.errors import UsageError

REFERENCE = "memspec.reference_impl:open_store"


def _given_spec(directory: Path) -> Path:
    path = directory / "SPEC.md"
    path.write_text(installed_spec().text.replace("Version 2.2 (", "Version 7.0 ("), "utf-8")
    return path


def test_every_field_crosses_to_a_worker(tmp_path: Path) -> None:
    """Each field, set to a value other than its default, comes back from its JSON form: the
    form is derived from the fields, so a field added later travels too."""
    command = CommandBackend("memspec serve --backend x", 3.0, cwd=str(tmp_path))
    chosen = {
        "backend": command,
        "profile": resolve_profile("thorough"),
        "timeout": 3.0,
        "seed": 7,
        "report": tmp_path / "report",
        "expected_failures": frozenset({"FORMAT-1", "LOCK-2"}),
        "expected_failures_file": tmp_path / "expected.txt",
        "spec": read_spec(_given_spec(tmp_path)),
        "hypothesis_db": "redis://localhost:6379/0",
        "features": frozenset({"core", "batch"}),
        "backend_shape": "a shape",
        "workers": "2",
        "select": "FORMAT",
        "coverage": True,
        "verbose": True,
        "quiet": True,
        "keep_temp": True,
    }
    defaults = Settings(backend=None)
    unset = {f.name for f in dataclasses.fields(Settings)} - set(chosen) - {"nameless"}
    assert not unset, f"give the new fields a value here: {unset}"
    settings = Settings(**chosen)
    assert all(getattr(settings, name) != getattr(defaults, name) for name in chosen)
    data = json.loads(json.dumps(settings.to_json()))
    assert set(data) == {f.name for f in dataclasses.fields(Settings)}
    back = Settings.from_json(data)
    assert back == settings
    assert back.spec.version == "7.0" and back.spec.path == settings.spec.path


def test_the_installed_spec_travels_as_nothing_and_comes_back_as_itself() -> None:
    # a store's run judges by the installed SPEC.md's store view (SPEC.md, "Subjects")
    settings = make_settings(base=Path.cwd(), backend=REFERENCE)
    assert settings.spec is installed_spec(STORE)
    data = settings.to_json()
    assert data["spec"] is None
    back = Settings.from_json(data)
    assert back.spec is installed_spec(STORE) and back == settings


def test_a_field_of_a_type_no_codec_carries_is_refused() -> None:
    with pytest.raises(TypeError, match="which no codec carries"):
        codec_of(complex)
    assert codec_of(int | None).dump(None) is None
    assert codec_of(Path | None).dump(Path("/x")) == "/x"


def test_a_nameless_factory_cannot_travel_or_have_workers() -> None:
    nameless = InProcessBackend.of_factory(lambda root, **limits: None, None)
    settings = make_settings(base=Path.cwd(), given=nameless)
    with pytest.raises(UsageError, match="runs in one process"):
        settings.to_json()
    with pytest.raises(UsageError, match="runs in one process"):
        make_settings(base=Path.cwd(), given=nameless, workers=2)


def test_relative_paths_resolve_against_the_start(tmp_path: Path) -> None:
    _given_spec(tmp_path)
    settings = make_settings(base=tmp_path, backend=REFERENCE, spec="SPEC.md", report="out")
    assert settings.spec.path == tmp_path / "SPEC.md" and settings.spec.version == "7.0"
    assert settings.report == tmp_path / "out" and (tmp_path / "out").is_dir()


def test_a_backend_is_found_again_at_its_address(tmp_path: Path) -> None:
    command = backend_at(Address(command="node b.js", cwd=str(tmp_path)), 4.0)
    assert isinstance(command, CommandBackend) and command.address().cwd == str(tmp_path)
    assert command.timeout == 4.0
    factory = backend_at(Address(factory=REFERENCE), None)
    assert isinstance(factory, InProcessBackend) and factory.address().factory == REFERENCE


def test_a_provider_home_setup_travels_to_a_worker(tmp_path: Path) -> None:
    from memspec.conformance.transport.provider import ProviderBackend

    setup = "installer apply --home {home}"
    settings = make_settings(base=tmp_path, provider_cmd="python driver.py x:Y", home_setup=setup)
    again = Settings.from_json(json.loads(json.dumps(settings.to_json())))
    assert isinstance(again.backend, ProviderBackend) and again.backend.home_setup == setup
    assert again.backend.setup is not None
    assert again.backend.setup.argv(tmp_path) == ["installer", "apply", "--home", str(tmp_path)]
    with pytest.raises(UsageError, match="--home-setup prepares a provider's Hermes home"):
        make_settings(base=tmp_path, backend=REFERENCE, home_setup=setup)
