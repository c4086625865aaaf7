"""The ``memspec`` command describes itself: ``--version``, a description for every subcommand,
help for every option, and usage errors in the words of the subcommand that was given."""

from __future__ import annotations

import argparse

import pytest

from memspec.conformance.commands.cli import build_parser, main
from memspec.spec.document import installed_version


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def test_version_names_the_package_and_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("memspec ") and f"SPEC.md version {installed_version().number}" in out


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_and_option_is_described(name: str) -> None:
    command = _subcommands()[name]
    assert command.description, f"memspec {name} --help has no description"
    undescribed = [
        action.option_strings[0] if action.option_strings else action.dest
        for action in command._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert not undescribed, f"memspec {name}: options without help: {undescribed}"


@pytest.mark.parametrize(
    "argv",
    [
        ["certify", "--backend", "x", "--no-such-option"],
        ["examples", "--backend", "x", "--no-such-option"],
        ["spec", "--check", "--no-such-option"],
        ["sweep", "--no-such-option"],
    ],
)
def test_an_unknown_option_prints_the_subcommands_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith(f"usage: memspec {argv[0]} ")
    assert "unrecognized arguments: --no-such-option" in err


@pytest.mark.parametrize(
    ("backend", "status"),
    [("tests.backends.naive:open_store", 0), ("tests.backends.naive_broken:TrailingNewline", 1)],
)
def test_examples_skip_unclaimed_features_and_end_in_a_summary(
    backend: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memspec examples`` on a store that claims neither ``tool`` nor ``patch``: their examples
    are skipped, never failed or crashed on, and the run ends with the summary line."""
    assert main(["examples", "--backend", backend]) == status
    out = capsys.readouterr().out
    passed, failed, skipped = (int(word) for word in out.splitlines()[-1].split()[::2])
    assert passed > 0 and skipped > 0 and (failed > 0) == bool(status) and "Traceback" not in out
    assert "needs feature" not in out, "an unclaimed feature's example was reported"
