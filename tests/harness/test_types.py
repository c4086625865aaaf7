"""memspec type-checks whole: mypy, with the ``[tool.mypy]`` section of ``pyproject.toml``, finds
no error anywhere in ``memspec`` and the packages installed under it (``memspec.spec``,
``memspec.reference_impl``, ``memspec.conformance``, ``memspec.fuzz``, ``memspec.doctor``),
and every ``# type: ignore`` says why.

mypy cannot follow the import hook of an editable install, and the folders are not named as
they are installed (``spec/`` is ``memspec.spec``), so ``mypy -p memspec`` run in the
repository sees ``memspec/__init__.py`` alone. The test therefore builds, in a temporary
directory, the package tree that setuptools installs, made of symbolic links to the folders
``pyproject.toml`` maps (``memspec/spec -> <repo>/spec``, ...), and runs mypy on it, so that
each module is checked under its real name; it then counts the source files mypy checked,
so that a tree mypy did not see whole cannot pass. Run it alone with
``python -m pytest tests/harness/test_types.py``.

A comment ``# type: ignore[code]  # reason`` silences one error, and says why on its line;
``warn_unused_ignores`` makes mypy report one that silences nothing.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

MYPY_LINE = re.compile(r"^(?P<path>memspec/\S+?\.py):\d+:(?:\d+:)? (?P<severity>error|note):")
"""A line of mypy's report about one place: ``memspec/spec/model.py:56: error: ...``."""

TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<codes>\[[^\]]*\])?(?P<rest>.*)")
"""A ``# type: ignore`` comment, with its error codes and what follows on the line."""

EXPLAINED_IGNORE = re.compile(r"\[\s*[\w-]+(\s*,\s*[\w-]+)*\s*\]\s+#\s*\S")
"""What an accepted ``# type: ignore`` has right after it: ``[code, ...]  # reason``."""


def package_folders() -> dict[str, Path]:
    """Returns each installed package's folder in the repository, by its dotted name, from
    ``[tool.setuptools.package-dir]`` of ``pyproject.toml``."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {
        package: REPO / folder
        for package, folder in config["tool"]["setuptools"]["package-dir"].items()
    }


def build_tree(base: Path) -> Path:
    """Builds under ``base`` the installed package tree ``memspec/`` out of symbolic links to
    the repository's files and folders, and returns it."""
    folders = package_folders()
    top = base / "memspec"
    top.mkdir()
    for child in folders.pop("memspec").iterdir():
        if child.name != "__pycache__":
            (top / child.name).symlink_to(child, target_is_directory=child.is_dir())
    for package, folder in folders.items():
        parent, _, name = package.rpartition(".")
        (base / parent.replace(".", "/") / name).symlink_to(folder, target_is_directory=True)
    return top


def source_files(top: Path) -> list[Path]:
    """Returns the Python source files of a package tree, through its symbolic links."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(top, followlinks=True):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return found


def repo_path(installed: str) -> str:
    """Returns the path in the repository of a module's path in the installed tree:
    ``memspec/spec/model.py`` is ``spec/model.py``."""
    parts = installed.split("/")
    for package, folder in package_folders().items():
        depth = package.count(".") + 1
        if package != "memspec" and parts[:depth] == package.split("."):
            return "/".join([folder.relative_to(REPO).as_posix(), *parts[depth:]])
    return installed


def unexplained_ignores(path: Path) -> list[str]:
    """Returns the lines of ``path`` whose ``# type: ignore`` names no error code or gives no
    reason after it (``# type: ignore[code]  # reason`` is the accepted form)."""
    source = path.read_text(encoding="utf-8")
    found: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        match = TYPE_IGNORE.search(token.string)
        if match and not EXPLAINED_IGNORE.match((match["codes"] or "") + match["rest"]):
            found.append(f"{token.start[0]}: {token.line.strip()}")
    return found


def report_failures(report: list[str]) -> list[str]:
    """Returns mypy's report (its lines before the summary), each place named by its path in
    the repository, when it holds an error in any file or a line about no one place (a module
    it could not find twice, say); ``[]`` when it holds notes alone, or nothing."""
    shown: list[str] = []
    failing = False
    for line in report:
        match = MYPY_LINE.match(line)
        if match is None:
            shown.append(line)
            failing = True
            continue
        shown.append(repo_path(match["path"]) + line[match.end("path") :])
        failing = failing or match["severity"] == "error"
    return shown if failing else []


def checked_sources() -> list[tuple[str, Path]]:
    """Returns the source files of the installed packages, with their paths relative to the
    repository."""
    found: list[tuple[str, Path]] = []
    for folder in package_folders().values():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" not in path.parts:
                found.append((path.relative_to(REPO).as_posix(), path))
    return found


def test_mypy_finds_no_error_in_the_installed_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = pytest.importorskip(
        "mypy.api", reason="mypy is not installed: pip install -e '.[test]' brings it"
    )
    top = build_tree(tmp_path)
    monkeypatch.chdir(tmp_path)  # mypy looks for the package memspec here first
    out, err, status = api.run(
        ["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", os.devnull,
         "--hide-error-context", "--no-pretty", "-p", "memspec"]
    )  # fmt: skip
    # mypy exits 0 (no error) or 1 (errors found); 2 is a crash or a bad configuration, and
    # what it writes to stderr (an option of [tool.mypy] it does not know, say) is wrong too.
    assert status in (0, 1) and not err, f"mypy could not run as configured:\n{err}{out}"
    *report, summary = out.splitlines()
    # Every source file of the tree was checked: a tree mypy did not see whole cannot pass
    # (mypy counts a folder without __init__.py, such as spec/data/, as a module too).
    checked = re.search(r"(\d+) source files?\)?$", summary)
    assert checked, f"no summary line in mypy's report:\n{out}"
    assert int(checked[1]) >= len(source_files(top)), summary
    failures = report_failures(report)
    if failures:
        pytest.fail("mypy found errors:\n" + "\n".join(failures), pytrace=False)


def test_every_type_ignore_names_its_codes_and_says_why() -> None:
    unexplained = {
        relative: lines
        for relative, path in checked_sources()
        if (lines := unexplained_ignores(path))
    }
    if unexplained:
        lines = [f"{path}:{line}" for path, found in unexplained.items() for line in found]
        pytest.fail(
            "a '# type: ignore' names its error codes and says why on its line, as in "
            "'# type: ignore[attr-defined]  # set by @given':\n" + "\n".join(lines),
            pytrace=False,
        )


def test_a_bare_or_unexplained_type_ignore_is_found(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "a: int = 'x'  # type: ignore\n"
        "b: int = 'x'  # type: ignore[assignment]\n"
        "c: int = 'x'  # type: ignore[assignment] because\n"
        "d: int = 'x'  # type: ignore[assignment]  # a reason\n"
        "e: int = 'x'  # type:ignore[assignment, misc]  #why\n"
        "f = '# type: ignore'\n",
        encoding="utf-8",
    )
    assert [line.split(":")[0] for line in unexplained_ignores(source)] == ["1", "2", "3"]


def test_an_error_in_any_file_fails_and_is_shown_where_it_is() -> None:
    error = "memspec/conformance/checks/crash.py:194:5: error: Argument 1 is bad  [arg-type]"
    note = "memspec/conformance/checks/crash.py:194:5: note: See the docs"
    assert report_failures([error, note]) == [
        "conformance/checks/crash.py:194:5: error: Argument 1 is bad  [arg-type]",
        "conformance/checks/crash.py:194:5: note: See the docs",
    ]
    assert report_failures(["memspec/__init__.py:3: error: Name 'x' is not defined"]) == [
        "memspec/__init__.py:3: error: Name 'x' is not defined"
    ]
    assert report_failures(["memspec: error: no module named memspec.gone"]) != []
    assert report_failures([note]) == []
    assert report_failures([]) == []
