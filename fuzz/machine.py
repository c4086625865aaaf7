"""The stateful differential test: a backend and the spec model driven in lockstep.

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    precondition,
    rule,
)

from memspec.conformance.core.registry import CheckContext, check
from memspec.conformance.core.search import plan
from memspec.conformance.examples.failure import show
from memspec.conformance.transport.wire import Answer, Request, fields_of
from memspec.conformance.verdict.blame import UNKNOWN, Answered, blame
from memspec.conformance.verdict.findings import Violation
from memspec.fuzz.ledger import DriftLedger
from memspec.fuzz.oracle import (
    allowed_answers,
    match_answer,
    snapshot_clause,
    snapshot_problem,
)
from memspec.fuzz.roots import FuzzRoot
from memspec.fuzz.strategies import WORDS, batch_items, contents, external_edits, old_texts
from memspec.spec import codes, model
from memspec.spec.codec import classify_bytes, encode_entries, held_as_given
from memspec.spec.drift_refusal import judge_drift_refusal
from memspec.spec.operations import ExternalWrite, Load, Mutation
from memspec.spec.problems import Problem
from memspec.spec.requests import mutation_of
from memspec.spec.rules import misapplied_write
from memspec.spec.targets import TARGETS

LIMITS = {"memory": 64, "user": 48}
SESSIONS = st.sampled_from(("a", "b"))
TARGET = st.sampled_from(TARGETS)
CONTENT = contents(tuple(LIMITS.values()))
STEPS_MAX = 50
"""The longest program: ``profile.operations`` steps, at most this many (Hypothesis' default)."""
MAX_OTHER_FILES = 8
"""Lock files, sidecars and in-flight temp files a root may hold besides data and backups."""


class MemoryMachine(RuleBasedStateMachine):
    """A MemoryMachine runs one program against a fresh root and the model side by side.
    ``versions[target]`` lists the entries of every state of the file (``None``: unreadable);
    ``floor[(session, target)]`` indexes the oldest a session's ``entries`` may still report
    (CONTRACT-8, READ-8)."""

    ctx: ClassVar[CheckContext]
    features: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.world = FuzzRoot(self.ctx, LIMITS)
        self.state = model.initial_state(LIMITS["memory"], LIMITS["user"])
        self.ledger = DriftLedger()
        self.versions: dict[str, list[tuple[str, ...] | None]] = {t: [()] for t in TARGETS}
        self.floor: dict[tuple[str, str], int] = {}
        self.loaded: dict[str, dict[str, tuple[str, ...] | None]] = {}
        self.captured: dict[str, dict[str, str | None]] = {}
        # the reading rule an external edit put to the test, until a store rewrites the file
        self.read_rule: dict[str, str | None] = dict.fromkeys(TARGETS)
        self.last = "opening session a"
        self.completed = False
        self._load("a")
        self.completed = True

    def teardown(self) -> None:
        """Compares everything once more (unless a step already failed: its failure is the one
        to report), then closes every session and removes the root."""
        try:
            if self.completed:
                self.last = "the last step"
                self._compare()
        finally:
            self.world.close()

    # --- rules ------------------------------------------------------------------------------

    @rule(session=SESSIONS, store=TARGET, content=st.sampled_from(WORDS))
    def add_note(self, session: str, store: str, content: str) -> None:
        """Adds a plain note: most are accepted, so the files grow and fill."""
        self._mutate(session, {"op": "add", "target": store, "content": content})

    @rule(session=SESSIONS, store=TARGET, content=CONTENT)
    def add(self, session: str, store: str, content: str) -> None:
        self._mutate(session, {"op": "add", "target": store, "content": content})

    @rule(session=SESSIONS, store=TARGET, old_text=old_texts(), new_content=CONTENT)
    def replace(self, session: str, store: str, old_text: str, new_content: str) -> None:
        self._mutate(
            session,
            {"op": "replace", "target": store, "old_text": old_text, "new_content": new_content},
        )

    @rule(session=SESSIONS, store=TARGET, old_text=old_texts())
    def remove(self, session: str, store: str, old_text: str) -> None:
        self._mutate(session, {"op": "remove", "target": store, "old_text": old_text})

    @rule(session=SESSIONS, store=TARGET, index=st.integers(0, 7), whole=st.booleans())
    def remove_nth(self, session: str, store: str, index: int, whole: bool) -> None:
        """Removes the entry at ``index`` (modulo the count) by its whole text or its first half."""
        entries = model.entries_on_disk(self.state, store) or ("nothing",)
        entry = entries[index % len(entries)]
        old_text = entry if whole else entry[: max(1, len(entry) // 2)]
        note(f"# remove_nth: old_text={old_text!r}")
        self._mutate(session, {"op": "remove", "target": store, "old_text": old_text})

    @precondition(lambda self: "patch" in self.features)
    @rule(session=SESSIONS, store=TARGET, old_text=old_texts(), content=CONTENT | st.just(""))
    def patch(self, session: str, store: str, old_text: str, content: str) -> None:
        """Patches a span named by any text (PATCH-1): many miss, some are ambiguous."""
        self._mutate(
            session, {"op": "patch", "target": store, "old_text": old_text, "content": content}
        )

    @precondition(lambda self: "patch" in self.features)
    @rule(
        session=SESSIONS,
        store=TARGET,
        index=st.integers(0, 7),
        span=st.tuples(st.integers(0, 40), st.integers(1, 12)),
        content=st.sampled_from(WORDS) | st.just(""),
    )
    def patch_nth(
        self, session: str, store: str, index: int, span: tuple[int, int], content: str
    ) -> None:
        """Patches a span cut out of the entry at ``index`` (modulo the count), so that the
        patch mostly applies: the span may repeat in its entry (PATCH-3), the result may be
        empty, a threat or over the limit (PATCH-6, PATCH-7)."""
        entries = model.entries_on_disk(self.state, store) or ("nothing",)
        entry = entries[index % len(entries)]
        start = span[0] % len(entry)
        old_text = entry[start : start + span[1]]
        note(f"# patch_nth: old_text={old_text!r}")
        self._mutate(
            session, {"op": "patch", "target": store, "old_text": old_text, "content": content}
        )

    @precondition(lambda self: "batch" in self.features)
    @rule(session=SESSIONS, store=TARGET, operations=batch_items(tuple(LIMITS.values())))
    def batch(self, session: str, store: str, operations: list[Any]) -> None:
        self._mutate(session, {"op": "batch", "target": store, "operations": operations})

    @rule(session=SESSIONS)
    def load(self, session: str) -> None:
        self.completed = False
        self.last = f"load in session {session}"
        self._load(session)
        self._compare()
        self.completed = True

    @rule(store=TARGET, edit=st.one_of(external_edits(tuple(LIMITS.values())), st.none()))
    def edit_file(self, store: str, edit: Any) -> None:
        """Another writer edits the file in place, creates it from nothing, or (``None``)
        deletes it."""
        data = None if edit is None else edit(self.world.disk(store) or b"")
        self._external(store, data, repr(edit), getattr(edit, "clause", None))

    # --- steps ------------------------------------------------------------------------------

    def _load(self, session: str) -> None:
        if session in self.world.sessions:
            self.world.request(session, "load")
        else:
            self.world.session(session)
        _, self.state = model.step(self.state, Load(session))
        self.loaded[session] = {t: model.entries_on_disk(self.state, t) for t in TARGETS}
        self.captured[session] = {}
        for target in TARGETS:
            current = len(self.versions[target]) - 1
            # READ-8: a load that finds the file unreadable leaves what the session last read.
            if self.versions[target][current] is not None or (session, target) not in self.floor:
                self.floor[(session, target)] = current
            block = self.world.snapshot(session, target)
            problem = snapshot_problem(
                target, self.loaded[session][target], block, self.features, LIMITS[target]
            )
            clause = (
                self._misread(session, target) if problem is not None else None
            ) or snapshot_clause(target, self.loaded[session][target], block, LIMITS[target])
            # SNAP-2: a load captures exactly the block the model renders from the disk.
            if problem is not None:
                raise Violation(
                    clause,
                    f"after {self.last}, session {session} loaded {target} as {block!r}: {problem}",
                )
            self.captured[session][target] = block

    def _external(
        self, target: str, data: bytes | None, what: str, read_rule: str | None = None
    ) -> None:
        self.completed = False
        # an edit that tries no reading rule keeps the one an earlier edit tried (a byte order
        # mark stays at the start when a paragraph is appended)
        self.read_rule[target] = read_rule or self.read_rule[target]
        before = self.world.disk(target)
        self.world.put(target, data)
        _, self.state = model.step(self.state, ExternalWrite(target, data))
        self.ledger.external(target, before, data)
        self.versions[target].append(model.entries_on_disk(self.state, target))
        self.last = f"external edit of {target}: {what}"
        self._compare(targets=(target,), snapshots=())
        self.completed = True

    def _mutate(self, session: str, request: Request) -> None:
        self.completed = False
        if session not in self.world.sessions:
            self._load(session)
        target = request["target"]
        sent = f"{show(request)} in session {session}"
        operation = mutation_of(request["op"], request, session)
        allowed = allowed_answers(self.state, operation, self.features)
        before = self.world.disk(target)
        kind = classify_bytes(before, LIMITS[target]).kind
        answer = self.world.request(session, request["op"], **fields_of(request))
        after = self.world.disk(target)
        found = match_answer(allowed, answer, after, target)
        if found is None:
            stale = self._decided_on_its_copy(session, operation, answer)
            seen = Answered(request, answer, allowed[0].outcome, kind, stale=stale)
            problems = blame(seen) or (Problem(UNKNOWN, "no allowed answer"),)
            # CONTRACT-4, CONTRACT-5: the code is the model's, or an alternative the spec allows;
            # LOCK-2: one the spec allows on the copy the session loaded, not on the file.
            raise Violation(
                problems[0].clause,
                f"{sent} answered {answer}; the spec allows "
                f"{', '.join(f'{a.outcome.code} ({a.why})' for a in allowed)}"
                + (
                    " on the file, and the answer only on the session's own earlier copy of it"
                    if stale
                    else ""
                ),
            )
        self._judge_write(sent, operation, answer, (before, after), found.state)
        # SNAP-11, MATCH-5, DUP-1: optional Outcome fields, when given, are the model's; LOCK-2
        # when they are those of the session's own earlier copy of the file.
        wrong = blame(Answered(request, answer, found.outcome, kind))
        if wrong:
            stale = self._decided_on_its_copy(session, operation, answer)
            (problem,) = blame(Answered(request, answer, found.outcome, kind, stale=stale))
            raise Violation(problem.clause, f"{sent} answered {answer}: {problem.text}")
        if answer["code"] == codes.E_DRIFT and before is not None:
            backups = self.world.backups(target)
            refusal = judge_drift_refusal(
                answer, before, backups, root=self.world.root, target=target
            )
            # DRIFT-3: E_DRIFT names a byte-exact NAME.bak.<suffix> in the root, with a message.
            if refusal is not None:
                raise Violation.of(refusal, f"{sent}; the backups hold {backups!r}")
        changed = model.disk(found.state, target) != model.disk(self.state, target)
        # ATOMIC-5: the result of an acknowledged change is in the file when the answer comes.
        if answer["ok"] and changed and after == before:
            raise Violation(
                "ATOMIC-5",
                f"{sent} answered {answer['code']}, but {target}'s file is byte for byte "
                "what it was before, where the model's changed",
            )
        self.state = found.state
        if changed:
            self.versions[target].append(model.entries_on_disk(self.state, target))
            self.read_rule[target] = None
        if answer["ok"] and changed:
            self.floor[(session, target)] = len(self.versions[target]) - 1
        self.last = sent
        backups = self.world.backups(target)
        wrote = self.ledger.store_wrote(target, before, after, backups, answer, self.world.root)
        # DRIFT-5: every backend keeps the external bytes it rewrites, in a backup it names.
        if wrote is not None:
            raise Violation.of(wrote)
        self._compare(expected_ok=answer["ok"], targets=(target,), snapshots=(session,))
        self.completed = True

    def _judge_write(
        self,
        sent: str,
        op: Mutation,
        answer: Answer,
        files: tuple[bytes | None, bytes | None],
        state: model.State,
    ) -> None:
        """Fails the clause of the action whose write (``files``: before and after) left other
        entries than the model's ``state``, when the spec's rules tell it
        (:func:`misapplied_write`: the chosen entry written wrong, others moved or dropped, the
        file's duplicates dropped), so that an ``OK`` whose ``usage`` measures that write is not
        blamed on SNAP-11."""
        want = model.entries_on_disk(state, op.target)
        found = misapplied_write(op, bool(answer.get("ok")), files, want, LIMITS[op.target])
        # REPLACE-1, REPLACE-4, PATCH-4, REMOVE-1, DUP-4, BATCH-2: the write is the action's.
        if found is not None:
            raise Violation(
                found.clause,
                f"{sent} answered {answer}, and turned the entries "
                f"{list(found.before)} into {list(found.after)}, where the spec's rules give "
                f"{list(want or ())}",
            )

    def _compare(
        self,
        expected_ok: bool = True,
        targets: tuple[str, ...] = TARGETS,
        snapshots: tuple[str, ...] | None = None,
    ) -> None:
        """Compares the files, backups and every session's entries of ``targets`` with the
        model, and the snapshots of the sessions in ``snapshots`` (``None``: of all of them;
        the last step compares all, so a snapshot changed by another session is caught too)."""
        for target in targets:
            actual, want = self.world.disk(target), model.disk(self.state, target)
            clause = "FORMAT-4" if expected_ok else "CONTRACT-4"
            # FORMAT-4, DRIFT-1: the file is byte for byte what the model wrote or was given.
            if not (actual == want):
                raise Violation(
                    clause,
                    f"after {self.last}, {target}'s file holds {actual!r}; the model's "
                    f"holds {want!r}",
                )
            self._compare_backups(target)
            for session in self.world.sessions:
                self._compare_session(session, target)
                if snapshots is None or session in snapshots:
                    self._compare_snapshot(session, target)
        others = self.world.other_files()
        # FILES-5, CONTRACT-11: temp files and sidecars do not accumulate in the root.
        if not (len(others) <= MAX_OTHER_FILES):
            raise Violation(
                "FILES-5",
                f"after {self.last}, the root holds {others}, more files than lock files "
                "and sidecars account for",
            )

    def _compare_backups(self, target: str) -> None:
        found = self.world.backups(target)
        missing = model.backups_of(self.state, target) - set(found.values())
        # DRIFT-5: every foreign content refused or rewritten is kept in a byte-exact backup
        # (a refusal's own backup is judged where it is answered, DRIFT-3).
        if missing:
            raise Violation(
                "DRIFT-5",
                f"after {self.last}, no backup of {target} holds {sorted(missing)!r}; "
                f"the backups are {found!r}",
            )
        problem = self.ledger.backups_seen(target, found)
        if problem is not None:
            raise Violation.of(problem, f"after {self.last}")

    def _compare_session(self, session: str, target: str) -> None:
        reported = tuple(self.world.entries(session, target))
        versions = self.versions[target]
        floor = self.floor[(session, target)]
        allowed = [v for v in versions[floor:] if v is not None]
        if versions[floor] is None:
            # READ-8: a session that never read the file readable reports no entries.
            allowed.append(())
        if reported in allowed:
            return
        # FORMAT-5: with nothing changed since its last load or write, a session reports exactly
        # what the file reads back as; after changes by others, CONTRACT-8 bounds how stale.
        # entries no version of the file ever read as are the reading rule's that the last
        # external edit tried, when one did (READ-1 to READ-4)
        clause = "FORMAT-5" if floor == len(versions) - 1 else "CONTRACT-8"
        if reported not in versions:
            clause = self.read_rule[target] or clause
            # READ-5: the entries of a version the session may report, its duplicates dropped
            if any(tuple(dict.fromkeys(v)) == reported for v in allowed):
                clause = "READ-5"
            # ENTRY-1: a version the session may report, but held as given, not normalised
            if any(held_as_given(reported, v) for v in allowed):
                clause = "ENTRY-1"
        # CONTRACT-8, LOCK-2: entries are at least as fresh as the last load or accepted write.
        raise Violation(
            clause,
            f"after {self.last}, session {session} reports {target} entries "
            f"{list(reported)!r}; its last load or write saw {versions[floor]!r} and the file "
            f"now reads {versions[-1]!r}",
        )

    def _foreign(self, target: str) -> bool:
        """Whether the file of ``target`` holds an entry over its limit (DRIFT-2)."""
        data = model.disk(self.state, target)
        return classify_bytes(data, model.limit_of(self.state, target)).kind == "foreign"

    def _decided_on_its_copy(self, session: str, op: Mutation, answer: Answer) -> bool:
        """Whether ``answer`` (its code and fields) is one the spec allows had the file still
        held what ``session`` last loaded or wrote, which others have changed since: a decision
        on that copy, not on the file re-read under the lock (LOCK-2)."""
        versions = self.versions[op.target]
        seen = versions[self.floor[(session, op.target)]]
        if seen is None or seen == versions[-1]:
            return False
        _, then = model.step(self.state, ExternalWrite(op.target, encode_entries(seen)))
        return any(
            a.outcome.code == answer.get("code") and not blame(Answered({}, answer, a.outcome))
            for a in allowed_answers(then, op, self.features)
        )

    def _misread(self, session: str, target: str) -> str | None:
        """Returns the reading rule the last external edit of ``target`` tried (READ-1 to READ-4)
        when ``session`` reports other entries than its load read: a block that differs then
        shows the misread, not a wrong rendering (SNAP-2)."""
        loaded = self.loaded[session][target]
        rule = self.read_rule[target]
        if rule is None or loaded is None:
            return None
        return rule if tuple(self.world.entries(session, target)) != loaded else None

    def _compare_snapshot(self, session: str, target: str) -> None:
        block = self.world.snapshot(session, target)
        # SNAP-1, SNAP-10: a snapshot changes only at its own session's next load.
        if block != self.captured[session][target]:
            raise Violation(
                "SNAP-1",
                f"after {self.last}, session {session}'s snapshot of {target} is {block!r}; "
                f"its last load captured {self.captured[session][target]!r}",
            )


@check(
    "CONTRACT-4", "CONTRACT-5", "CONTRACT-8", "FORMAT-4", "FORMAT-5", "DUP-1", "DUP-4",
    "MATCH-1", "MATCH-3", "MATCH-4", "MATCH-5", "REPLACE-1", "REMOVE-1", "LIMIT-2", "LOCK-2",
    "SNAP-1", "SNAP-2", "SNAP-10", "DRIFT-1", "DRIFT-3", "DRIFT-4", "DRIFT-5", "READ-5",
    "READ-6", "BATCH-3",
    id="machine.memory_machine",
)  # fmt: skip
def memory_machine(ctx: CheckContext) -> None:
    """Random programs of store calls, loads, external edits and a second session, run against
    the backend and the spec model in lockstep; after every step the codes, files, backups, live
    entries and snapshots must agree, up to the choices the spec leaves open (BATCH-8, a missing
    or stricter threat scan, a missing drift guard, CONTRACT-8's fresher entries)."""
    features = ctx.claimed_features()
    steps = min(STEPS_MAX, max(5, ctx.profile.operations))
    run = plan(ctx, stateful_step_count=steps)
    machine = type("MemoryMachine", (MemoryMachine,), {"ctx": ctx, "features": features})
    test = get_state_machine_test(machine, settings=run.settings)
    run.run(run.apply(test, with_settings=False))
