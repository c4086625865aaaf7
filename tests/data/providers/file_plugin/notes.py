"""The plugin's store: one JSON line per note under ``hermes_home``, written at once."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

WORD = re.compile(r"\w{4,}")
KEPT = re.compile(r"[^\w\s.,:;!?'\"()/-]")


class Notes:
    """Notes kept in ``<hermes_home>/notes-plugin/notes.jsonl``."""

    def __init__(self, hermes_home: str) -> None:
        self.path = Path(hermes_home) / "notes-plugin" / "notes.jsonl"
        self.lock = threading.Lock()

    def add(self, text: str) -> None:
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(text) + "\n")

    def search(self, query: str) -> list[str]:
        wanted = {w.lower() for w in WORD.findall(query)}
        if not wanted or not self.path.exists():
            return []
        with self.lock:
            notes = [json.loads(line) for line in self.path.read_text("utf-8").splitlines()]
        found = []
        for note in notes:
            clean = KEPT.sub("", note)
            if wanted & {w.lower() for w in WORD.findall(clean)} and clean not in found:
                found.append(clean)
        return found
