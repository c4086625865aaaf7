"""Where ``memspec doctor`` looks and which limits it judges by: Hermes' memory directory of the
active profile (``$HERMES_HOME/memories``, else ``~/.hermes/memories``) and the limits of its
``config.yaml`` (``memory.memory_char_limit``, ``memory.user_char_limit``), each said with where
it came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

CONFIG_KEYS = {"memory": "memory_char_limit", "user": "user_char_limit"}
"""The keys of the ``memory:`` section of Hermes' ``config.yaml``, by target."""


class DoctorError(Exception):
    """Bad input to doctor: a directory, a file or a config it cannot use (exit status 2)."""


@dataclass(frozen=True)
class Limit:
    """A Limit is a target's character limit and where it came from."""

    value: int
    source: str


def hermes_home() -> Path:
    """Returns the active profile's home: ``$HERMES_HOME``, else ``~/.hermes``."""
    home = os.environ.get("HERMES_HOME")
    return Path(home) if home else Path.home() / ".hermes"


def default_directory() -> Path:
    """Returns Hermes' memory directory of the active profile."""
    return hermes_home() / "memories"


def config_of(directory: Path) -> Path | None:
    """Returns the ``config.yaml`` that governs ``directory``: the one beside a ``memories``
    folder (its profile's home), or ``$HERMES_HOME``'s; ``None`` when there is none."""
    candidates = [directory.parent / "config.yaml"] if directory.name == "memories" else []
    candidates.append(hermes_home() / "config.yaml")
    return next((path for path in candidates if path.is_file()), None)


def read_limits(
    directory: Path, given: Mapping[str, str | None]
) -> tuple[dict[str, Limit], Path | None]:
    """Returns each target's limit — ``given`` (the command line's text) first, then the
    profile's ``config.yaml``, then the defaults — and the config read. Raises DoctorError for a
    config that is not YAML, and for a limit, given or in the config, that is not a positive
    integer."""
    config = config_of(directory)
    section: Mapping[str, object] = {}
    if config is not None:
        try:
            data = yaml.safe_load(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise DoctorError(f"cannot read {config}: {first}") from None
        memory = data.get("memory") if isinstance(data, dict) else None
        section = memory if isinstance(memory, dict) else {}
    limits: dict[str, Limit] = {}
    for target in TARGETS:
        key = CONFIG_KEYS[target]
        flag = f"--{key.replace('_', '-')}"
        text = given.get(target)
        if text is not None:
            value = int(text) if text.isascii() and text.isdigit() else None
            limits[target] = Limit(_positive(value, f"{flag} is {text!r}"), flag)
        elif key in section:
            where = f"{config}: memory.{key} is {section[key]!r}"
            limits[target] = Limit(_positive(section[key], where), f"memory.{key} in {config}")
        else:
            limits[target] = Limit(DEFAULT_LIMITS[target], "the default")
    return limits, config


def _positive(value: object, where: str) -> int:
    """Returns ``value`` when it is a positive integer; raises DoctorError saying ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DoctorError(f"{where}, not a positive integer")
    return value
