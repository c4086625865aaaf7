"""The ``provider`` subcommand of ``memspec``: certify a Hermes memory provider plugin (PLUGIN).

``memspec provider TARGET`` builds (or reuses) the environment of a Hermes release as
``memspec hermes`` does (``releases.py``), and certifies the provider ``TARGET`` names — a plugin
folder, or ``MODULE:CLASS`` importable from the directory memspec was called from; with
``--package NAME[==VERSION]``, the plugin folder that package installs, in an environment of its
own where it is installed from the package index beside Hermes — through the
one library run of a certification, whose backend is the provider driven by memspec's driver
(``provider_driver.py``, through ``transport/provider.py``). Its output, reports and exit status
are ``memspec certify``'s. More in docs/providers.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

from memspec.conformance.core.locations import scratch_root
from memspec.conformance.core.options import PROFILE, TIMEOUT, WORKERS, add_options
from memspec.conformance.core.subcommands import add_command
from memspec.conformance.core.waits import RELEASE_CALL_TIMEOUT
from memspec.conformance.hermes.cli import (
    CACHE,
    PYTHON,
    RUN_OPTIONS,
    prepare,
    release_settings,
)
from memspec.conformance.hermes.releases import Release
from memspec.spec.errors import UsageError

DRIVER = Path(__file__).resolve().with_name("provider_driver.py")
"""memspec's driver of a provider, run by path in a Hermes environment (``-I``: it never sees
memspec, and memspec never imports the provider)."""
DEFAULT_HERMES = "0.19.0"
"""The hermes-agent release a provider is certified in unless ``--hermes-version`` names another:
the one the PLUGIN clauses cite."""
_MODULE_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(==(?P<version>[^=\s]+))?$")


def package_release(requirement: str) -> Release:
    """Returns the release ``--package`` names: ``NAME==VERSION`` as given, ``NAME`` as the
    newest version on the package index; raises UsageError (one line) for anything else, and
    for a package the index does not list."""
    from memspec.conformance.hermes.releases import index_versions

    found = _REQUIREMENT.match(requirement.strip())
    if found is None:
        raise UsageError(
            f"--package expects a distribution NAME or NAME==VERSION, got {requirement!r}"
        )
    name, version = found.group("name"), found.group("version")
    # the index is asked first: a release it does not list costs no Hermes environment
    versions = index_versions(name)
    if version is not None and version not in versions:
        listed = ", ".join(versions[-10:]) or "none"
        raise UsageError(f"{name} {version} is not on the package index; it has {listed}")
    if not versions:
        raise UsageError(f"the package index lists no release of {name}")
    return Release(name, version or versions[-1])


def target_problem(target: str, base: Path) -> str | None:
    """Returns why ``target`` names no provider at all (a folder that does not exist, a
    ``MODULE:CLASS`` that is malformed), or ``None``; what the target holds is for the driver to
    find out, in the Hermes environment."""
    folder = base / target
    if folder.exists():
        return (
            None if folder.is_dir() else f"{target} is a file: give a plugin folder or MODULE:CLASS"
        )
    if ":" in target and not _MODULE_CLASS.match(target):
        return f"expected a plugin folder or MODULE:CLASS, got {target!r}"
    if ":" not in target:
        return f"the plugin folder {folder} does not exist (or give MODULE:CLASS)"
    return None


def provider_command(
    target: str,
    hermes: str,
    cache: str | None,
    python: str | None,
    package: Release | None = None,
) -> str:
    """Returns the command that drives ``target`` in the environment of hermes-agent ``hermes``
    (with ``package`` installed beside it), building the environment first if needed (it prints
    what it prepares)."""
    from memspec.conformance.transport.provider import driver_command

    interpreter = prepare(Release("hermes-agent", hermes), cache, python, package)
    return driver_command(interpreter, DRIVER, target)


PROVIDER_TIMEOUT = dataclasses.replace(
    TIMEOUT,
    help=f"longest wait for one call to the provider, loading included; default "
    f"{RELEASE_CALL_TIMEOUT:g} (each hook's own budget is its clause's)",
)
"""``--timeout`` as ``provider`` takes it: the driver imports Hermes and the provider first."""


def _cmd_provider(args: argparse.Namespace) -> int:
    from memspec.conformance.commands.certify import run_certification
    from memspec.conformance.commands.terminal import print_result
    from memspec.conformance.transport.backend import BackendDefect
    from memspec.conformance.transport.provider import provider_label, setup_words

    base = Path.cwd()
    if args.home_setup is not None:
        setup_words(args.home_setup)  # refused before any environment is built
    if args.target is not None:
        problem = target_problem(args.target, base)
        if problem is not None:
            raise UsageError(problem)
    elif not args.package:
        raise UsageError("give a provider: a plugin folder, MODULE:CLASS, or --package NAME")
    package = package_release(args.package) if args.package else None
    # a package's own plugin folder is named to the driver as NAME==VERSION (found there)
    target = args.target if args.target is not None else package.label if package else ""
    command = provider_command(target, args.hermes_version, args.cache, args.python, package)
    settings = release_settings(
        args, provider_cmd=command, verbose=args.verbose, home_setup=args.home_setup
    )
    backend = settings.backend
    assert backend is not None  # make_settings made the provider's backend
    try:
        with scratch_root("memspec-provider-") as root, backend.open(root) as session:
            print(f"memspec: provider {provider_label(session)}", flush=True)
    except BackendDefect as defect:
        raise UsageError(str(defect).splitlines()[0]) from None
    return print_result(run_certification(settings))


def add_parser(commands: Any) -> None:
    """Adds the ``provider`` subcommand to memspec's parser."""
    parser = add_command(
        commands, "provider", "certify a Hermes memory provider plugin in a Hermes environment"
    )
    parser.add_argument(
        "target",
        metavar="TARGET",
        nargs="?",
        help="a provider plugin folder (as Hermes loads one: register(ctx), else its "
        "MemoryProvider subclass) or MODULE:CLASS importable from this directory (or from "
        "--package's environment); with --package, default: the plugin folder it installs",
    )
    parser.add_argument(
        "--package",
        metavar="NAME[==VERSION]",
        help="install this provider package from the package index (default: its newest "
        "version) beside Hermes, in an environment of its own, and certify its plugin folder",
    )
    parser.add_argument(
        "--hermes-version",
        default=DEFAULT_HERMES,
        metavar="VERSION",
        help=f"the hermes-agent release whose environment runs the provider (default "
        f"{DEFAULT_HERMES})",
    )
    parser.add_argument(
        "--home-setup",
        metavar="CMD",
        help="a command run once in each new Hermes home before the provider starts there "
        "({home} stands for it; in it, with the provider's environment, within --timeout): "
        "the installer of a provider that runs only in a home it prepared",
    )
    add_options(parser.add_argument, (CACHE, PYTHON))
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print a line per check and every failure's whole message, not only the progress",
    )
    add_options(parser.add_argument, RUN_OPTIONS)
    add_options(
        parser.add_argument, (PROFILE, WORKERS, PROVIDER_TIMEOUT), defaults={"profile": "ci"}
    )
    parser.set_defaults(run=_cmd_provider)
