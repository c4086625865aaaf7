"""A sound Hermes memory provider plugin, small and file-backed: what ``memspec provider`` must
certify without a failure (PLUGIN), as the reference store is for ``memspec certify``.

It runs inside a Hermes environment (it subclasses the release's ``MemoryProvider``), never in
memspec's own: ``memspec provider tests.backends.providers:FileProvider``. Turns, mirrored writes
and what its tool saves are JSON lines in ``<hermes_home>/memspec-file-provider/records.jsonl``,
written at once under a lock (nothing to flush at shutdown, no thread of its own); a prefetch
returns the records that share a word with the query, each line stripped of everything but
letters, digits and plain punctuation, so that no fence tag or system note can be read in it
(PLUGIN-10). ``tests/backends/providers_broken.py`` breaks it one defect at a time.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from agent.memory_provider import MemoryProvider

FOLDER = "memspec-file-provider"
RECORDS = "records.jsonl"
MAX_RECALL = 4000
KEPT = re.compile(r"[^\w\s.,:;!?'\"()/-]")
WORD = re.compile(r"\w{4,}")
TOOL = "file_memory_search"


def inert(text: str) -> str:
    """Returns ``text`` with every character dropped but letters, digits, spaces and plain
    punctuation: no angle or square bracket, no ``&``, so no fence tag and no system note."""
    return KEPT.sub("", text)


def words(text: str) -> set[str]:
    """Returns the words of four letters or more in ``text``, lower-cased."""
    return {word.lower() for word in WORD.findall(text)}


class FileProvider(MemoryProvider):
    """A provider that keeps every turn and mirrored write in a file under ``hermes_home``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._writes = False
        self._session = ""

    @property
    def name(self) -> str:
        return "memspec-file"

    def is_available(self) -> bool:
        return True

    def backup_paths(self) -> list[str]:
        return []

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._session = session_id
        self._path = Path(kwargs["hermes_home"]) / FOLDER / RECORDS
        self._writes = kwargs.get("agent_context", "primary") == "primary"

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "name": TOOL,
                "description": "Search what this provider remembers of earlier conversations.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "what to look for"}},
                    "required": ["query"],
                },
            }
        ]

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        query = args.get("query") if isinstance(args, dict) else None
        if tool_name != TOOL or not isinstance(query, str):
            return json.dumps({"error": "give 'query', a string"})
        return json.dumps({"results": self._matches(query)})

    def _records(self) -> list[dict[str, str]]:
        if self._path is None or not self._path.exists():
            return []
        with self._lock:
            lines = self._path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def _append(self, record: dict[str, str]) -> None:
        if self._path is None or not self._writes:
            return
        with self._lock:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with self._path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(record) + "\n")

    def _matches(self, query: str) -> list[str]:
        wanted = words(query)
        found: list[str] = []
        for record in self._records():
            text = inert(record["text"])
            if wanted & words(text) and text not in found:
                found.append(text)
        return found

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        return "\n".join(f"- {text}" for text in self._matches(query))[:MAX_RECALL]

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        self._append({"kind": "turn", "text": f"{user_content} {assistant_content}"})

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        if action == "add" and any(r["text"] == content for r in self._records()):
            return  # a repeated write is a no-op (PLUGIN-14)
        self._append({"kind": f"memory-{action}", "text": content})

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        self._session = new_session_id

    def system_prompt_block(self) -> str:
        return f"Earlier conversations can be searched with {TOOL}."


class RestrictsItsFiles(FileProvider):
    """The sound provider that keeps its files to its owner, as verbatim-memory 1.0.0 does:
    ``initialize`` creates a lock file (0600) beside its records, and ``shutdown()``, in every
    context, sets 0600 on the records, the lock and an SQLite-style ``-wal`` side file, each
    of which has that mode already or is not there. No mode changes, so in a non-primary
    context it writes nothing (PLUGIN-8); ``LoosensItsFiles``
    (``tests/backends/providers_broken.py``) changes one."""

    MODE = 0o600

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        super().initialize(session_id, **kwargs)
        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = self._path.with_name("records.lock")
        self._lock_file.touch(mode=0o600)
        self._lock_file.chmod(0o600)

    def shutdown(self) -> None:
        assert self._path is not None
        for path in (self._path, self._lock_file, self._path.with_name(RECORDS + "-wal")):
            try:
                os.chmod(path, self.MODE)
            except FileNotFoundError:
                continue


DATA_HOME = "MEMSPEC_FILE_PROVIDER_HOME"
"""The variable that names ``KeepsItsDataHome``'s data directory."""


class KeepsItsDataHome(FileProvider):
    """The sound provider with its records in a data directory of its own that a variable names
    (``MEMSPEC_FILE_PROVIDER_HOME``, else ``~/.memspec-file-provider``), outside
    ``hermes_home``, as nyx-memory 7.16.0 keeps its under ``NEXSANDBASE_HOME``: it makes that
    directory, names it in ``backup_paths()``, and silences a library's output into
    ``/dev/null``. Every write is where PLUGIN-7 allows it."""

    @staticmethod
    def _home() -> Path:
        return Path(os.environ.get(DATA_HOME) or Path.home() / ".memspec-file-provider")

    def backup_paths(self) -> list[str]:
        return [str(self._home())]

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        super().initialize(session_id, **kwargs)
        self._home().mkdir(parents=True, exist_ok=True)
        self._path = self._home() / RECORDS
        with open(os.devnull, "w", encoding="utf-8") as silenced:
            print("loading the index", file=silenced)


INSTALLED = "memspec-installed.txt"
"""The file ``NeedsItsInstaller`` runs only beside: its installer's record, holding the home."""


class NeedsItsInstaller(FileProvider):
    """The sound provider that runs only in a Hermes home its installer prepared, as
    hermes-scope-recall 3.15.1 binds to the manifest ``scope-recall apply-install`` writes:
    ``initialize`` raises unless ``hermes_home`` holds ``memspec-installed.txt`` naming that very
    home (what ``memspec provider --home-setup`` runs in each new home writes)."""

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        home = Path(kwargs["hermes_home"])
        record = home / INSTALLED
        if not record.is_file() or record.read_text(encoding="utf-8") != str(home):
            raise RuntimeError(f"{home} was not installed into: run the installer first")
        super().initialize(session_id, **kwargs)
