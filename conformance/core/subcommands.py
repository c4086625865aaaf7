"""Adding a subcommand to the ``memspec`` parser: argparse alone, so that ``memspec serve``, which
starts once per session of a command backend, imports nothing else to build its parser."""

from __future__ import annotations

import argparse
from typing import Any


def add_command(commands: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """Adds the subcommand ``name`` to ``commands`` (an ``add_subparsers`` action): ``summary``
    is its line in ``memspec --help`` and the description of its own ``--help``, and the parser
    is kept as the ``command_parser`` default so that a usage error names this subcommand."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=summary[0].upper() + summary[1:] + "."
    )
    parser.set_defaults(command_parser=parser)
    return parser
