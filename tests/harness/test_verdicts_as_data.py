"""Verdicts are data: no part of memspec reads a clause back out of text, and no check states a
verdict with a bare assertion (which is a harness error) instead of a ``Violation``.

The scan reads the source of the installed packages with :mod:`ast`, so a comment or a docstring
that mentions the old ways does not count; each rule has a case showing it finds what it forbids.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.harness.test_layers import source_modules

CLAUSE_LED = ("{clause}", "{broken}", "{problem.clause}")


def _literal_start(node: ast.expr) -> str:
    """Returns the text a string or f-string expression opens with ("" when it is another)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant):
            return str(first.value)
        if isinstance(first, ast.FormattedValue):
            return "{" + ast.unparse(first.value) + "}"
    return ""


def verdict_text_problems(source: str, where: str) -> list[str]:
    """Returns each place of ``source`` that states a verdict as text or reads one from text:
    an ``assert`` with a message or a ``raise AssertionError`` (a check raises ``Violation``),
    and a clause read from a string by splitting it at ``:`` or matching its start."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and node.msg is not None:
            found.append(f"{where}:{node.lineno}: an assert with a message states a verdict")
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            name = getattr(node.exc.func, "id", "")
            if name == "AssertionError":
                found.append(f"{where}:{node.lineno}: raise AssertionError states a verdict")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, args = node.func.attr, node.args
            if method in ("split", "partition") and args and _literal_start(args[0]) in (":", ": "):
                target = ast.unparse(node.func.value)
                if any(word in target for word in ("problem", "message", "reason", "said")):
                    found.append(f"{where}:{node.lineno}: a clause read by {method}(':')")
    return found


def test_no_verdict_is_stated_or_read_as_text() -> None:
    problems = []
    for name, path in sorted(source_modules().items()):
        top = name.split(".")[1] if "." in name else ""
        if top not in ("conformance", "fuzz", "spec"):
            continue
        if name.startswith("memspec.conformance.hermes"):
            continue  # runs inside a Hermes release's environment, its asserts are its own
        problems += verdict_text_problems(path.read_text(encoding="utf-8"), name)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        'assert answer["ok"], f"LOCK-3: lost {answer}"',
        'raise AssertionError(f"{clause}: broken")',
        'clause = problem.split(":")[0]',
        'clause, _, said = problem.partition(": ")',
    ],
)
def test_each_way_of_stating_a_verdict_as_text_is_seen(source: str) -> None:
    assert verdict_text_problems(source, "x")


def test_an_invariant_and_a_violation_are_not_seen() -> None:
    source = (
        "assert found is not None\n"
        'raise Violation("LOCK-3", f"lost {answer}")\n'
        'index, how = part.split(":")\n'
    )
    assert verdict_text_problems(source, "x") == []


def test_the_old_names_are_gone() -> None:
    """``leading_clause`` and ``_CLAUSE_OF_REFUSAL`` read and decided clauses from text and
    tables beside the model; neither is defined or used anywhere in the packages."""
    for name, path in source_modules().items():
        text = Path(path).read_text(encoding="utf-8")
        for old in ("leading_clause", "_CLAUSE_OF_REFUSAL", "clause_for("):
            assert old not in text, f"{name} still names {old}"
