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
    directory: Path, given: Mapping[str, int | None]
) -> tuple[dict[str, Limit], Path | None]:
    """Returns each target's limit — ``given`` (the command line) first, then the profile's
    ``config.yaml``, then the defaults — and the config read. Raises DoctorError for a config
    that is not YAML or holds a limit that is not a positive integer."""
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
        if given.get(target) is not None:
            limits[target] = Limit(int(given[target] or 0), f"--{key.replace('_', '-')}")
        elif key in section:
            value = section[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DoctorError(f"{config}: memory.{key} is {value!r}, not a positive integer")
            limits[target] = Limit(value, f"memory.{key} in {config}")
        else:
            limits[target] = Limit(DEFAULT_LIMITS[target], "the default")
    return limits, config
