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

from memspec.spec.errors import MemspecError
from memspec.spec.targets import DEFAULT_LIMITS, TARGETS

CONFIG_KEYS = {"memory": "memory_char_limit", "user": "user_char_limit"}
"""The keys of the ``memory:`` section of Hermes' ``config.yaml``, by target."""


class DoctorError(MemspecError):
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
    """Returns the ``config.yaml`` that governs ``directory``: its profile's, beside a
    ``memories`` folder (as named, or where a link leads), and ``$HERMES_HOME``'s when
    ``directory`` is that profile's memory directory; ``None`` when there is none."""
    places = [directory.absolute(), directory.resolve()]
    candidates = [place.parent / "config.yaml" for place in places if place.name == "memories"]
    if directory.resolve() == default_directory().resolve():
        candidates.append(hermes_home() / "config.yaml")
    return next((path for path in candidates if path.is_file()), None)


def read_limits(
    directory: Path, given: Mapping[str, str | None]
) -> tuple[dict[str, Limit], Path | None]:
    """Returns each target's limit — ``given`` (the command line's text) first, then the
    profile's ``config.yaml``, then the defaults — and the config read (none when the command
    line gives both). Raises DoctorError for a config that is not YAML, and for a limit, given
    or in the config, that is not a positive integer."""
    config = None if all(given.get(t) is not None for t in TARGETS) else config_of(directory)
    section = _memory_section(config) if config is not None else {}
    limits: dict[str, Limit] = {}
    for target in TARGETS:
        key = CONFIG_KEYS[target]
        flag = f"--{key.replace('_', '-')}"
        text = given.get(target)
        if text is not None:
            value = int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None
            limits[target] = Limit(_positive(value, f"{flag} is {text!r}"), flag)
        elif key in section:
            where = f"{config}: memory.{key} is {section[key]!r}"
            limits[target] = Limit(_positive(section[key], where), f"memory.{key} in {config}")
        else:
            limits[target] = Limit(DEFAULT_LIMITS[target], "the default")
    return limits, config


def _memory_section(config: Path) -> Mapping[str, object]:
    """Returns the ``memory:`` section of Hermes' ``config.yaml`` (empty when it has none)."""
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DoctorError(
            f"cannot read {config}: {error.problem or error.context}{where}"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise DoctorError(f"cannot read {config}: {first}") from None
    memory = data.get("memory") if isinstance(data, dict) else None
    return memory if isinstance(memory, dict) else {}


def _positive(value: object, where: str) -> int:
    """Returns ``value`` when it is a positive integer (``2200.0`` is, as Hermes reads it) of
    at most 12 digits; raises DoctorError saying ``where``."""
    if isinstance(value, float) and value.is_integer() and 1 <= value < 1e12:
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 10**12:
        raise DoctorError(f"{where}, not a positive integer of at most 12 digits")
    return value
