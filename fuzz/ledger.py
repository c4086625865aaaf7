"""The ledger of external bytes: what other writers put in each file, what the store last wrote, and
which backups it keeps — the judge of DRIFT-4 and DRIFT-5 over a whole run, for every backend.

Per target it holds the *pending* external bytes, which no rewrite by the store has replaced yet.
When the store changes the file, they must be in a backup the answer names, parse into the entries
the store last wrote (cosmetic), or parse into no entries (DRIFT-5); a second external write
replaces the first. No two backups of a target may hold the same bytes (DRIFT-4); a backup that
disappears or is overwritten is reported under DRIFT-5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memspec.conformance.transport.wire import Answer
from memspec.spec import codes
from memspec.spec.codec import decode, parse_text
from memspec.spec.drift_refusal import judge_rewrite_backup
from memspec.spec.problems import Problem


def _entries(data: bytes | None) -> list[str] | None:
    """Returns the entries a tolerant reader finds in ``data``; ``None`` when undecodable."""
    if data is None:
        return []
    text = decode(data)
    return None if text is None else parse_text(text)


@dataclass
class DriftLedger:
    """A DriftLedger follows external bytes and backups per target (DRIFT-4, DRIFT-5)."""

    own: dict[str, bytes | None] = field(default_factory=dict)
    pending: dict[str, bytes | None] = field(default_factory=dict)
    seen: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def external(self, target: str, before: bytes | None, after: bytes | None) -> None:
        """Records that another writer changed ``target``'s file from ``before`` to ``after``."""
        if after != before:
            self.pending[target] = after

    def exempt(self, target: str, data: bytes) -> bool:
        """Returns whether external ``data`` needs no backup: it parses into no entries, or into
        the entries of the bytes the store last wrote (only cosmetically different)."""
        entries = _entries(data)
        return entries is not None and (not entries or entries == _entries(self.own.get(target)))

    def store_wrote(
        self,
        target: str,
        before: bytes | None,
        after: bytes | None,
        backups: dict[str, bytes],
        answer: Answer | None = None,
        root: Path | None = None,
    ) -> Problem | None:
        """Records the store's change of ``target``'s file from ``before`` to ``after`` (no change:
        nothing happens) and returns the DRIFT-5 violation it is, if any. ``backups`` maps backup
        names to bytes; with the ``answer`` of the change and the ``root``, an ``OK`` must also
        name the backup of the external bytes it rewrote."""
        if after == before:
            return None
        external = self.pending.pop(target, None)
        exempt = external is None or self.exempt(target, external)
        self.own[target] = after
        if exempt:
            return None
        assert external is not None
        if external not in backups.values():
            return Problem(
                "DRIFT-5",
                f"the store rewrote the file that another writer had left as {external!r} "
                f"(now {after!r}) without a byte-exact backup: the backups hold "
                f"{sorted(backups.values())!r}",
            )
        if answer is None or root is None or answer.get("code") != codes.OK:
            return None
        return judge_rewrite_backup(
            answer, external, backups, root=root, clause="DRIFT-5", target=target
        )

    def backups_seen(self, target: str, backups: dict[str, bytes]) -> Problem | None:
        """Records the backups found now and returns the DRIFT-4/DRIFT-5 violation, if any."""
        seen = self.seen.setdefault(target, {})
        for name, data in seen.items():
            if name not in backups:
                return Problem("DRIFT-5", f"backup {name} holding {data!r} disappeared")
            if backups[name] != data:
                return Problem(
                    "DRIFT-5",
                    f"backup {name} was overwritten: it held {data!r} and now holds "
                    f"{backups[name]!r}, so the bytes it kept are lost",
                )
        contents = list(backups.values())
        twice = sorted({data for data in contents if contents.count(data) > 1})
        if twice:
            names = [name for name, data in backups.items() if data == twice[0]]
            return Problem("DRIFT-4", f"the same content {twice[0]!r} is backed up twice: {names}")
        seen.update(backups)
        return None
