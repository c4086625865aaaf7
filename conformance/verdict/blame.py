"""Blame: which clause a wrong answer breaks. One function, :func:`blame`, that the examples, the
state machine, the history checkers and the transport's answer check all call, so that one
answer is blamed on one clause wherever it is met.

The model decides every refusal with the clause whose condition decided it
(:attr:`~memspec.spec.rules.Outcome.rule`: ``ENTRY-3`` for a delimiter line, ``BATCH-4`` for a
batch over the limit); blame adds what an answer alone cannot say:

- an answer that is not a response of the contract, or refuses an action of ``core`` as
  unsupported, breaks CONTRACT-2 (with the action's own clause, REPLACE-1 or REMOVE-1);
- a refusal whose text is in the file anyway is BATCH-2's (a batch), LIMIT-3's (the limit) or
  CONTRACT-3's;
- a code the spec allows only on the session's own earlier copy of the file is LOCK-2's;
- another code than the model's is the clause of the condition the answer misread: ``E_DRIFT``
  on a file a mutation works on is DRIFT-1's, on a foreign file the mutation may repair
  DRIFT-7's; ``E_THREAT`` for ordinary text the scan's (SCAN-2's, the patterns'); a refused
  duplicate DUP-1's (DUP-2's when full); a batch refused for a limit its result meets, or for
  the limit where an item's own condition refuses it, BATCH-4's (the limit is the final
  result's);
  a refusal the model does not make, the clause of that refusal's condition
  (:data:`MISREAD`); a refusal the model makes and the backend does not, the model's rule;
- an answer with the model's code and other fields breaks the field's clause: ``matches``
  MATCH-5, ``duplicate`` DUP-1, ``usage`` SNAP-11, a field of the wrong type CONTRACT-2.

An example (or check) that judges a condition cites its clause: ``cited`` names them, and a
difference of a code the cited clauses decide (:data:`~memspec.spec.codes.CODE_CLAUSES`) is
theirs — the NFKC example's missed ``E_THREAT`` is SCAN-3's, not the ``add`` path's SCAN-1 — and
an example of the order of conditions owns a refusal for another condition than the expected one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from memspec.spec import codes
from memspec.spec.drift_refusal import wrong_drift_clause
from memspec.spec.problems import Problem
from memspec.spec.rules import LIMIT_RULES_BY_OP, Outcome
from memspec.spec.snapshot import label_clauses, label_limit
from memspec.spec.tool import CORE_ACTIONS

MISREAD = {
    codes.E_DRIFT: "DRIFT-1",
    codes.E_LIMIT: "LIMIT-2",
    codes.E_NOMATCH: "MATCH-1",
    codes.E_AMBIGUOUS: "MATCH-3",
    codes.E_DELIMITER: "ENTRY-5",
    codes.E_EMPTY: "ENTRY-1",
    codes.E_UNREADABLE: "READ-1",
    codes.E_TARGET: "CONTRACT-4",
    codes.E_INVALID: "ENTRY-7",
    codes.E_THREAT: "SCAN-2",
    codes.E_IO: "ATOMIC-4",
}
"""The clause a refusal breaks where the spec accepts, or refuses for a condition later in
CONTRACT-5's order: the clause whose condition the backend misread (an ``E_NOMATCH`` for text an
entry holds is MATCH-1's)."""

UNKNOWN = "CONTRACT-5"
"""The clause of a code the tables do not place: CONTRACT-5 orders every code."""

FIELD_CLAUSES = {"matches": "MATCH-5", "duplicate": "DUP-1", "usage": "SNAP-11"}
"""The clause that gives each optional Outcome field its value (CONTRACT-3)."""

FIELD_TYPES = {"matches": list, "duplicate": bool, "usage": str}


@dataclass(frozen=True)
class Answered:
    """An Answered request is what was sent (``request``: its ``op`` and fields) and what came
    back (``answer``), with what the spec knows of it: the model's decision (``expected``;
    ``None`` judges the answer's shape alone), the kind of the target's file before the request
    (``file_kind``: absent, canonical, cosmetic, foreign, unreadable), the clauses of the example
    or check judging it (``cited``), the backend's claims (``features``), whether the answer is
    the one the spec gives on the session's own earlier copy of the file (``stale``) and whether
    a refusal's text is in the file anyway (``written``)."""

    request: Mapping[str, Any]
    answer: object
    expected: Outcome | None = None
    file_kind: str = ""
    cited: Collection[str] = ()
    features: Collection[str] = ()
    stale: bool = False
    written: bool = False


def blame(seen: Answered) -> tuple[Problem, ...]:
    """Returns the clauses the answer of ``seen`` breaks, each with one line saying how (rules in
    the module docstring); empty when the spec allows the answer."""
    shape, answer, expected = _shape(seen), seen.answer, seen.expected
    # an answer _shape finds nothing wrong with is a mapping; isinstance says so to mypy too
    if shape or expected is None or not isinstance(answer, Mapping):
        return shape
    code = answer.get("code")
    if seen.written and code != codes.OK:
        clause = written_clause(str(seen.request.get("op")), str(code))
        return (Problem(clause, f"{_sent(seen)} answered {code}, yet its text is in the file"),)
    if code != expected.code:
        owners = ("LOCK-2",) if seen.stale else _owners(code_clause(seen))
        said = f"{_sent(seen)} answered {code}; the spec answers {expected.code}"
        return tuple(Problem(c, said) for c in owners)
    problem = _field_problem(answer, expected)
    if problem is None:
        return ()
    if seen.stale:
        problem = Problem(
            "LOCK-2", f"{problem.text}, which is what the session's earlier copy gives"
        )
    return (problem,)


def code_clause(seen: Answered) -> str | tuple[str, ...]:
    """Returns the clause (or the cited clauses) an answer of another code than the model's
    breaks (the module docstring, without LOCK-2)."""
    assert seen.expected is not None and isinstance(seen.answer, Mapping)
    expected, answered = seen.expected, str(seen.answer.get("code"))
    op = str(seen.request.get("op"))
    drifted = wrong_drift_clause(seen.file_kind, seen.answer, expected.code, op)
    if drifted:
        return drifted
    cited = set(seen.cited)
    limit_clause = _limit_clause(seen)
    if limit_clause and expected.code == codes.OK:
        return limit_clause  # what the result itself shows, whichever limit clause is cited
    if limit_clause and limit_clause not in cited:
        return _cited_for(codes.E_LIMIT, cited) or limit_clause
    if expected.code == codes.OK and answered == codes.E_THREAT:
        # the scan refused ordinary text: the cited scan clauses own it, else the corpus of
        # ordinary text (SCAN-2)
        return tuple(sorted(c for c in cited if c.startswith("SCAN-"))) or "SCAN-2"
    if expected.code == codes.OK and expected.duplicate and answered != codes.OK:
        return "DUP-2" if answered == codes.E_LIMIT else "DUP-1"
    if expected.code == codes.OK and op == "batch" and answered == codes.E_LIMIT:
        return "BATCH-4"
    if op == "batch" and answered == codes.E_LIMIT and expected.code not in (codes.OK, answered):
        # the limit judged before the items' own conditions: not the final result's, whether or
        # not the judging example is one of the order of conditions
        return "BATCH-4"
    ordering = tuple(sorted(cited & codes.PRECEDENCE_CLAUSES))
    if ordering and answered != codes.OK and expected.code != codes.OK:
        return ordering  # an example of the order of conditions owns another condition's code
    order = codes.PRECEDENCE
    earlier = answered in order and expected.code in order
    if expected.code == codes.OK or (
        earlier and order.index(answered) < order.index(expected.code)
    ):
        return _cited_for(answered, cited) or MISREAD.get(answered, UNKNOWN)
    rule = expected.rule or UNKNOWN
    return rule if rule in cited else (_cited_for(expected.code, cited) or rule)


def _limit_clause(seen: Answered) -> str | None:
    """Returns the clause of a limit decision the backend made otherwise than the model (one of
    the two answered ``E_LIMIT``, the other ``OK``), by the limit the answer's ``usage`` label
    states: LIMIT-6 when it is not the target's own (the store counted against another limit),
    the clause the model gives a refused acceptance (LIMIT-2 for a result of exactly the limit,
    LIMIT-1 for one that fits in code points only:
    :func:`~memspec.spec.rules.acceptance_limit_rule`),
    the operation's own limit clause (:data:`~memspec.spec.rules.LIMIT_RULES_BY_OP`) when the
    model refused only because the result would fit the other target's limit (its rule LIMIT-6)
    and nothing shows the store used that limit; None for any other answer."""
    assert seen.expected is not None and isinstance(seen.answer, Mapping)
    expected, answered = seen.expected, seen.answer.get("code")
    if {expected.code, answered} != {codes.OK, codes.E_LIMIT}:
        return None
    own, stated = label_limit(expected.usage), label_limit(seen.answer.get("usage"))
    if own is not None and stated is not None and stated != own:
        return "LIMIT-6"
    if expected.code == codes.OK and expected.rule:
        return expected.rule  # a result of exactly the limit, or one counted otherwise
    if expected.rule == "LIMIT-6":
        return LIMIT_RULES_BY_OP.get(str(seen.request.get("op")))
    return None


def _cited_for(code: str, cited: Collection[str]) -> tuple[str, ...]:
    """Returns the cited clauses that decide the condition of ``code``
    (:data:`~memspec.spec.codes.CODE_CLAUSES`), not those that only order conditions
    (:data:`~memspec.spec.codes.PRECEDENCE_CLAUSES`)."""
    deciding = codes.CODE_CLAUSES.get(code, frozenset()) - codes.PRECEDENCE_CLAUSES
    return tuple(sorted(set(cited) & deciding))


def _owners(clause: str | tuple[str, ...]) -> tuple[str, ...]:
    return (clause,) if isinstance(clause, str) else clause


def written_clause(op: str, code: str) -> str:
    """The clause a refused mutation breaks when its text is in the file anyway: a batch's is
    BATCH-2 (all or nothing), a refusal for the limit LIMIT-3 (it writes nothing), any other
    CONTRACT-3 (a refusal changes nothing)."""
    if op == "batch":
        return "BATCH-2"
    return "LIMIT-3" if code == codes.E_LIMIT else "CONTRACT-3"


def _field_problem(answer: Mapping[str, Any], outcome: Outcome) -> Problem | None:
    """Returns how the optional Outcome fields of ``answer`` disagree with the model's, when they
    do (CONTRACT-3 lists them: ``matches`` MATCH-5, ``duplicate`` DUP-1; ``usage`` is the label of
    the target as the operation left it, the unchanged one after ``E_LIMIT``, and absent after
    ``E_TARGET`` and ``E_UNREADABLE``, SNAP-11). They are compared when given; one of another type
    is CONTRACT-2's."""
    for name, kind in FIELD_TYPES.items():
        if answer.get(name) is not None and not isinstance(answer[name], kind):
            return Problem("CONTRACT-2", f"{name} {answer[name]!r} is not a {kind.__name__}")
    matches = answer.get("matches")
    wrong = matches is not None and list(matches) != list(outcome.matches)
    if outcome.code == codes.E_AMBIGUOUS and wrong:
        return Problem("MATCH-5", f"matches {matches!r}, expected {list(outcome.matches)!r}")
    if "duplicate" in answer and bool(answer["duplicate"]) != outcome.duplicate:
        return Problem(
            "DUP-1", f"duplicate {answer['duplicate']!r}, expected {outcome.duplicate!r}"
        )
    given = answer.get("usage")
    if given is not None and outcome.usage is not None and given != outcome.usage:
        clause = label_clauses(outcome.usage, given)[0]
        return Problem(clause, f"usage {given!r}, expected {outcome.usage!r}")
    if given is not None and outcome.code in (codes.E_TARGET, codes.E_UNREADABLE):
        return Problem("SNAP-11", f"usage {given!r} on {outcome.code}, which has no file to count")
    return None


def _sent(seen: Answered) -> str:
    op = seen.request.get("op", "?")
    target = seen.request.get("target")
    return f"{op} {target}" if isinstance(target, str) else str(op)


# -- the shape of an answer (the transport's check) -------------------------------------------


UNSUPPORTED_CLAUSES = {"replace": "REPLACE-1", "remove": "REMOVE-1"}
"""The action's own clause that an ``E_UNSUPPORTED`` refusal of it breaks beside CONTRACT-2."""


def unsupported_clauses(action: str) -> tuple[str, ...]:
    """Returns the clauses a backend breaks when it answers ``E_UNSUPPORTED`` to ``action``, one
    of :data:`~memspec.spec.tool.CORE_ACTIONS`: CONTRACT-2 (every backend executes core's add,
    replace and remove), and the action's own clause."""
    own = UNSUPPORTED_CLAUSES.get(action)
    return ("CONTRACT-2", own) if own else ("CONTRACT-2",)


def refused_core_action(
    request: Mapping[str, Any], code: object, features: Collection[str]
) -> str | None:
    """Returns the action of ``core`` that ``request`` asked for and its answer ``code`` refused
    as unsupported, or ``None``: the request's own op, or for a batch of a backend that claims
    ``batch``, its first item that edits (``replace``, ``remove``) or else adds."""
    if code != codes.E_UNSUPPORTED:
        return None
    op = request.get("op")
    if op in CORE_ACTIONS:
        return str(op)
    items = request.get("operations") if op == "batch" and "batch" in features else None
    actions = [i.get("action") for i in items if isinstance(i, Mapping)] if items else []
    core = [a for a in actions if a in CORE_ACTIONS]
    return next((a for a in core if a != "add"), core[0] if core else None)


def _shape(seen: Answered) -> tuple[Problem, ...]:
    """Returns the CONTRACT-2 problem of an answer that is not a response of the contract (with
    the action's own clause for a core action refused as unsupported); empty when it is one."""
    op = str(seen.request.get("op"))
    answer = seen.answer
    if not isinstance(answer, Mapping):
        return (
            Problem("CONTRACT-2", f"{op} answered with a {type(answer).__name__}, not a mapping"),
        )
    ok, code = answer.get("ok"), answer.get("code")
    if not isinstance(ok, bool) or not codes.is_known_code(code):
        return (Problem("CONTRACT-2", f"{op} answered without a bool 'ok' and a contract 'code'"),)
    if ok != (code == codes.OK):
        return (Problem("CONTRACT-2", f"{op} answered ok={ok} with code {code}"),)
    if ok:
        wrong = _result_shape(op, answer)
        if wrong:
            return (Problem("CONTRACT-2", wrong),)
    refused = refused_core_action(seen.request, code, seen.features)
    if refused is not None:
        said = f" ({answer['message']})" if isinstance(answer.get("message"), str) else ""
        asked = refused if op == refused else f"a {op} with {refused}"
        text = (
            f"{asked} answered E_UNSUPPORTED{said}; every backend executes core's add, replace "
            f"and remove (CONTRACT-2): what was to be verified through {refused} here is not "
            "verified"
        )
        return tuple(Problem(clause, text) for clause in unsupported_clauses(refused))
    return ()


def _result_shape(op: str, answer: Mapping[str, Any]) -> str:
    """Returns what is wrong with the result fields of an accepted ``op`` ("" when nothing)."""
    if op == "entries":
        entries = answer.get("entries")
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            return "entries must be a list of str"
    if op == "snapshot" and not isinstance(answer.get("snapshot", ...), str | None):
        return "snapshot must be a str or null"
    if op == "fence" and not isinstance(answer.get("block"), str):
        return "fence must return a str block"
    if op == "tool_schema" and not isinstance(answer.get("schema"), Mapping):
        return "tool_schema must return a 'schema' object"
    if op == "tool_call" and not isinstance(answer.get("result"), str):
        return "tool_call must return the result text as a str"
    return ""
