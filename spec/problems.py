"""What a judge of the spec finds wrong, as data: the clause broken and one line saying how.

Every judge of ``spec/`` (a drift refusal, a tool result, an agent's turn, a snapshot) returns
:class:`Problem` values, never text that opens with a clause id: a caller reads the clause from
``problem.clause``, and a check raises it as a violation of that clause
(``memspec.conformance.verdict.findings.Violation.of``), so no part of memspec reads a clause back
out of a message.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """A Problem is one clause a judge found broken (``clause``, such as ``DRIFT-3``) and what it
    saw (``text``, one line without the clause id). ``str()`` shows both, ``DRIFT-3: ...``."""

    clause: str
    text: str

    def __str__(self) -> str:
        return f"{self.clause}: {self.text}"

    def also(self, context: str) -> Problem:
        """Returns the problem with ``context`` (what was sent, what the files held) added to
        its text in parentheses."""
        return Problem(self.clause, f"{self.text} ({context})")
