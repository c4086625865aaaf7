"""The drift property: whatever another writer does to a memory file, the store neither refuses
cosmetic edits, nor loses external bytes, nor locks the model out (DRIFT-1 to DRIFT-5, DRIFT-7,
READ-6). A drift guard (DRIFT-2, DRIFT-3) is judged where claimed; every backend must keep the bytes
it rewrites in a backup (DRIFT-5). More in docs/architecture.md, "Module notes"."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from hypothesis import example, given
from hypothesis import strategies as st

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.search import plan
from memspec.conformance.examples.failure import show
from memspec.conformance.transport.wire import Answer, Request, fields_of
from memspec.conformance.verdict.findings import HarnessError, Unverified, Violation
from memspec.fuzz.ledger import DriftLedger
from memspec.fuzz.oracle import ARGUMENT_CODES, allowed_answers, match_answer
from memspec.fuzz.roots import FuzzRoot
from memspec.fuzz.strategies import (
    WORDS,
    AppendParagraph,
    claimed_ops,
    external_edits,
    foreign_edits,
    requests,
)
from memspec.spec import codes, model
from memspec.spec.codec import (
    classify_bytes,
    decode,
    encode_entries,
    only_not_canonical,
    parse_text,
)
from memspec.spec.drift_refusal import judge_drift_refusal, judge_rewrite_backup
from memspec.spec.requests import mutation_of
from memspec.spec.targets import DEFAULT_LIMITS

LIMITS = (40, DEFAULT_LIMITS["memory"])


class DriftCase(TypedDict):
    """A case of the drift property: the limit, the entries added first, then rounds of an
    external edit and the requests that follow it."""

    limit: int
    seed: list[str]
    rounds: list[tuple[Callable[[bytes], bytes], list[Request]]]


KEPT_FOREIGN_REMOVE: DriftCase = {
    "limit": 40,
    "seed": ["User prefers tabs"],
    "rounds": [(AppendParagraph(40), [{"op": "remove", "target": "memory",
                                       "old_text": "User prefers tabs"}])],
}  # fmt: skip
"""Run first under every profile: the remove that repairs a foreign file goes through (DRIFT-7)."""

KEPT_FOREIGN_REPLACE: DriftCase = {
    "limit": LIMITS[1],
    "seed": ["Shell: zsh", "tabs in Go"],
    "rounds": [(AppendParagraph(LIMITS[1]), [{"op": "replace", "target": "memory",
                                              "old_text": "Shell: zsh", "new_content": "vim"}])],
}  # fmt: skip
"""Run first under every profile: a shrinking replace of a foreign file keeps a backup (DRIFT-2)."""


def changes_of(seed: list[str]) -> st.SearchStrategy[Request]:
    """Returns a strategy for a remove or a replace naming an entry added first: the changes that
    do not grow a file, which a foreign file must let through with a backup (DRIFT-2, DRIFT-7)."""
    old_text = st.sampled_from(seed)
    return st.one_of(
        st.fixed_dictionaries({"op": st.just("remove"), "target": st.just("memory"),
                               "old_text": old_text}),
        st.fixed_dictionaries({"op": st.just("replace"), "target": st.just("memory"),
                               "old_text": old_text,
                               "new_content": st.sampled_from(("tabs", "Go", "vim"))}),
    )  # fmt: skip


def _drift_step(
    world: FuzzRoot, ledger: DriftLedger, request: Request, features: frozenset[str]
) -> str | None:
    """Sends one mutation and judges it by the kind of file it met (DRIFT-1..5, DRIFT-7,
    READ-6). Returns why the case cannot go on when the store, on a file no other writer made
    different from its own (absent or canonical), answered or wrote otherwise than the spec
    without refusing it as drift: no drift is in play, the difference is the clauses' of that
    operation (the examples judge them), and the model no longer holds the store's state."""
    target, sent = request["target"], show(request)
    before = world.disk(target)
    kind = classify_bytes(before, world.limits[target]).kind
    allowed = allowed_answers(world.model_state(), mutation_of(request["op"], request), features)
    answer = world.request("a", request["op"], **fields_of(request))
    after = world.disk(target)
    backups = world.backups(target)
    found = match_answer(allowed, answer, after, target)
    met = f"{sent} on a {kind} file {before!r}"
    options = "; ".join(f"{a.outcome.code}, {model.disk(a.state, target)!r}" for a in allowed)
    expected = allowed[0].outcome.code
    if kind in ("absent", "canonical", "cosmetic"):
        # DRIFT-1: a canonical or cosmetic file is never refused as drift.
        if answer["code"] == codes.E_DRIFT:
            raise Violation("DRIFT-1", f"{met} was refused: {answer}")
        if kind != "cosmetic" and (found is None or model.disk(found.state, target) != after):
            return (
                f"{met} answered {answer['code']} and left {after!r}; the spec allows (code, "
                f"file): {options}"
            )
        canonical_only = any(
            only_not_canonical(model.disk(a.state, target), after)
            for a in allowed
            if a.outcome.code == answer["code"]
        )
        # DRIFT-1: the store works on the entries the file parses into and writes them canonically
        # (the right entries in other bytes are FORMAT-4's).
        if found is None or model.disk(found.state, target) != after:
            if _wrong_on_canonical_too(world, request, before, answer, features):
                return (
                    f"{met} answered {answer['code']} and left {after!r}, and the same on the "
                    f"canonical file of its entries; the spec allows (code, file): {options}"
                )
            raise Violation(
                "FORMAT-4" if canonical_only else "DRIFT-1",
                f"{met} answered {answer['code']} and left {after!r}; the spec allows (code, "
                f"file): {options}",
            )
    elif expected not in ARGUMENT_CODES and kind == "foreign":
        # DRIFT-7: a change that does not grow a foreign file is never refused for its state.
        clause = "DRIFT-7" if expected == codes.OK and not answer["ok"] else "DRIFT-2"
        # DRIFT-2: growth, or a change that does not apply, is refused with the file untouched;
        # a change that applies and does not grow the file goes through, written canonically.
        if not (found is not None and model.disk(found.state, target) == after):
            raise Violation(
                clause,
                f"{met} answered {answer['code']} and left {after!r}; the spec allows "
                f"(code, file): {options}",
            )
        if before is None:
            raise HarnessError(f"{met} is foreign but absent")
        if answer["code"] == codes.E_DRIFT:
            problem = judge_drift_refusal(answer, before, backups, root=world.root, target=target)
            # DRIFT-3: E_DRIFT names a byte-exact NAME.bak.<suffix> in the root, with a message.
            if problem is not None:
                raise Violation.of(problem, f"{met}; the backups hold {backups!r}")
        elif after != before and "drift-guard" in features:
            problem = judge_rewrite_backup(
                answer, before, backups, root=world.root, clause="DRIFT-2", target=target
            )
            # DRIFT-2: a drift guard backs a foreign file up before rewriting it, and says where.
            if problem is not None:
                raise Violation.of(problem, f"{met}; the backups hold {backups!r}")
    elif (
        expected not in ARGUMENT_CODES
        and kind == "unreadable"
        and not (found is not None and after == before)
    ):
        # READ-6: an undecodable file refuses every mutation and is left as it was.
        raise Violation(
            "READ-6",
            f"{met} answered {answer['code']} and left {after!r}; expected E_UNREADABLE "
            "and the file untouched",
        )
    for problem in (
        ledger.backups_seen(target, backups),
        ledger.store_wrote(target, before, after, backups, answer, world.root),
    ):
        # DRIFT-4, DRIFT-5: external bytes are kept in backups the answers name, never lost.
        if problem is not None:
            raise Violation.of(problem, f"after {sent}")
    return None


def _wrong_on_canonical_too(
    world: FuzzRoot,
    request: Request,
    cosmetic: bytes | None,
    answer: Answer,
    features: frozenset[str],
) -> bool:
    """Whether ``request``, sent on a fresh root holding the canonical file of the entries the
    ``cosmetic`` file parses into, gets the same code as ``answer`` and an answer or file the spec
    does not allow there either: the store does that on any file, so the difference is the
    operation's own clauses' (the examples judge them), not a misread cosmetic file's (DRIFT-1)."""
    text = None if cosmetic is None else decode(cosmetic)
    if text is None:
        return False
    target = request["target"]
    with FuzzRoot(world.ctx, {target: world.limits[target]}) as control:
        control.put(target, encode_entries(parse_text(text)))
        allowed = allowed_answers(
            control.model_state(), mutation_of(request["op"], request), features
        )
        again = control.request("a", request["op"], **fields_of(request))
        found = match_answer(allowed, again, control.disk(target), target)
        wrong = found is None or model.disk(found.state, target) != control.disk(target)
    return wrong and again.get("code") == answer.get("code")


@check(
    "DRIFT-1",
    "DRIFT-2",
    "DRIFT-3",
    "DRIFT-4",
    "DRIFT-5",
    "DRIFT-7",
    "READ-6",
    id="drift_properties.external_edits_are_kept",
)
def external_edits_are_kept(ctx: CheckContext) -> None:
    """After any external edit and any operations, whatever the backend claims: cosmetic edits are
    never refused (DRIFT-1), foreign content is never silently rewritten nor locks the target
    (DRIFT-2, DRIFT-3, DRIFT-7), external bytes stay recoverable from the file or a named backup
    (DRIFT-5), and backups are never lost or doubled (DRIFT-4)."""
    features = ctx.claimed_features()
    run = plan(ctx)
    seeds = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True)

    def scenario(limit: int, seed: list[str]) -> st.SearchStrategy[DriftCase]:
        operations = st.lists(
            st.one_of(
                requests(("memory",), limits=(limit,), **claimed_ops(features)),
                changes_of(seed),
            ),
            min_size=1,
            max_size=3,
        )
        edits = st.one_of(foreign_edits((limit,)), external_edits((limit,)))
        rounds = st.lists(st.tuples(edits, operations), min_size=1, max_size=3)
        return rounds.map(lambda drawn: {"limit": limit, "seed": seed, "rounds": drawn})

    cases = st.tuples(st.sampled_from(LIMITS), seeds).flatmap(lambda drawn: scenario(*drawn))

    judged: list[bool] = []
    cut: list[str] = []

    @given(case=cases)
    @example(case=KEPT_FOREIGN_REMOVE)
    @example(case=KEPT_FOREIGN_REPLACE)
    def drift_property(case: DriftCase) -> None:
        with FuzzRoot(ctx, {"memory": case["limit"]}) as world:
            ledger = DriftLedger()
            for content in case["seed"]:
                seed: Request = {"op": "add", "target": "memory", "content": content}
                if reason := _drift_step(world, ledger, seed, features):
                    cut.append(reason)
                    return
            for edit, requests_ in case["rounds"]:
                before = world.disk("memory")
                world.put("memory", edit(before or b""))
                ledger.external("memory", before, world.disk("memory"))
                for request in requests_:
                    if reason := _drift_step(world, ledger, request, features):
                        cut.append(reason)
                        return
                judged.append(True)

    run.run(run.apply(drift_property))
    if cut and not judged:
        raise Unverified(
            f"no case reached an external edit the store was judged on: {cut[0]}; a difference "
            "on a file no other writer touched is not drift (the examples judge it)"
        )
