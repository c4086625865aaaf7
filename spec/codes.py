"""Outcome codes of the backend contract (CONTRACT-4) and their precedence (CONTRACT-5)."""

from __future__ import annotations

from typing import Final

OK: Final = "OK"
E_EMPTY: Final = "E_EMPTY"
E_TARGET: Final = "E_TARGET"
E_LIMIT: Final = "E_LIMIT"
E_NOMATCH: Final = "E_NOMATCH"
E_AMBIGUOUS: Final = "E_AMBIGUOUS"
E_THREAT: Final = "E_THREAT"
E_DELIMITER: Final = "E_DELIMITER"
E_DRIFT: Final = "E_DRIFT"
E_UNREADABLE: Final = "E_UNREADABLE"
E_INVALID: Final = "E_INVALID"
E_IO: Final = "E_IO"
E_UNSUPPORTED: Final = "E_UNSUPPORTED"

PRECEDENCE: Final[tuple[str, ...]] = (
    E_TARGET,
    E_INVALID,
    E_EMPTY,
    E_DELIMITER,
    E_THREAT,
    E_UNREADABLE,
    E_DRIFT,
    E_NOMATCH,
    E_AMBIGUOUS,
    E_LIMIT,
    E_IO,
)
"""When several conditions hold, the first of these is reported (CONTRACT-5)."""

PRECEDENCE_CLAUSES: Final[frozenset[str]] = frozenset(
    ("CONTRACT-5", "REPLACE-2", "PATCH-5", "PATCH-10", "BATCH-6")
)
"""The clauses that order the conditions: where one of them is judged, a refusal for another
condition than the expected one is theirs to own, not the expected condition's clause's."""

OUTCOME_CODES: Final[frozenset[str]] = frozenset((OK, *PRECEDENCE))
"""Every code an operation may return; ``E_UNSUPPORTED`` is a protocol answer, not an outcome."""

PROTOCOL_CODES: Final[frozenset[str]] = OUTCOME_CODES | {E_UNSUPPORTED}


def is_known_code(code: object) -> bool:
    """Returns whether ``code`` is one of the contract's codes (protocol codes included)."""
    return isinstance(code, str) and code in PROTOCOL_CODES


CODE_CLAUSES: Final[dict[str, frozenset[str]]] = {
    E_TARGET: frozenset({"CONTRACT-4"}),
    E_INVALID: frozenset({"ENTRY-7", "BATCH-5", "PATCH-5"}),
    E_EMPTY: frozenset({"ENTRY-2", "ENTRY-6", "BATCH-5", "PATCH-5"}),
    E_DELIMITER: frozenset({"ENTRY-3", "ENTRY-4", "REPLACE-2", "PATCH-5", "PATCH-6", "BATCH-7"}),
    E_THREAT: frozenset({"SCAN-1", "SCAN-2", "SCAN-3", "SCAN-4", "SCAN-5", "SCAN-8"})
    | frozenset({"REPLACE-2", "PATCH-5", "PATCH-6", "BATCH-7"}),
    E_UNREADABLE: frozenset({"READ-6", "READ-7"}),
    E_DRIFT: frozenset({"DRIFT-2"}),
    E_NOMATCH: frozenset({"MATCH-1", "MATCH-2", "REMOVE-3"}),
    E_AMBIGUOUS: frozenset({"MATCH-5", "PATCH-3"}),
    E_LIMIT: frozenset(
        {"LIMIT-1", "LIMIT-2", "LIMIT-4", "LIMIT-5", "LIMIT-6", "REPLACE-3", "PATCH-7", "BATCH-4"}
    ),
    E_IO: frozenset({"ATOMIC-4", "FILES-3"}),
}
"""Per refusal code, the clauses whose conditions decide it (which patterns a scan knows, how usage
is counted, which limit applies): an example that cites one of them judges that condition, so a
refusal it expected and did not get is that clause's, not the rule the model names for the path
the example happens to take."""
