"""Generated session programs for the concurrency checks (LOCK-*, ATOMIC-*, LIMIT-*, BATCH-*).

More in docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from memspec.conformance.history.history import to_mutation
from memspec.conformance.transport.wire import BatchItem, Request
from memspec.spec.codec import usage
from memspec.spec.model import entries_on_disk, initial_state, step
from memspec.spec.requests import MUTATIONS
from memspec.spec.targets import TARGETS

NOTES = (
    "User prefers tabs over spaces",
    "Project uses Go 1.22 with modules",
    "Editor: helix; shell: fish",
    "Deploys go through the staging cluster first, never straight to prod",
    "Name: Ada; works in London (UTC+0)",
    "Runs tests with pytest -n 2 before every commit",
    "Prefers short answers with one code sample",
    "The CI badge is red on Mondays: nightly jobs overlap",
)
"""The text after each tag: 26 to 68 code points, so entries vary in size."""
WEIGHTS = {"add": 40, "replace": 20, "remove": 20, "batch": 12, "load": 8}
"""Relative frequency of each kind of step (a replace or remove without an own entry to act
on becomes an add)."""
TARGET_WEIGHTS = {"memory": 3, "user": 1}
"""How often each target is chosen when a program writes to several."""
AMPLE = 1_000_000


def tag(process: int, index: int, item: int | None = None) -> str:
    """Returns the ``old_text`` unique to the entry written at step ``index`` (and batch
    ``item``) of ``process``."""
    return f"[p{process}.{index}]" if item is None else f"[p{process}.{index}.{item}]"


def _content(rng: random.Random, label: str) -> str:
    return f"{label} {rng.choice(NOTES)}"


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    names = list(weights)
    return rng.choices(names, weights=[weights[name] for name in names])[0]


def generate_program(
    process: int,
    rng: random.Random,
    count: int,
    targets: Sequence[str] = ("memory",),
    *,
    batch: bool = True,
) -> tuple[Request, ...]:
    """A session's operations as protocol request dicts: a first load, then ``count`` steps of adds
    of entries unique to (process, index), replaces, removes and batches of this process's earlier
    entries, and occasional loads; ``batch=False`` leaves batches out (BATCH-1)."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count!r}")
    unknown = [target for target in targets if target not in TARGETS]
    if unknown or not targets:
        raise ValueError(f"targets must be some of {TARGETS}, got {tuple(targets)!r}")
    weights = {kind: w for kind, w in WEIGHTS.items() if batch or kind != "batch"}
    chances = {target: TARGET_WEIGHTS[target] for target in targets}
    mine: dict[str, list[str]] = {target: [] for target in targets}
    steps: list[Request] = [{"op": "load"}]
    for index in range(count):
        kind = _pick(rng, weights)
        if kind == "load":
            steps.append({"op": "load"})
            continue
        target = _pick(rng, chances)
        own = mine[target]
        if kind in ("replace", "remove") and not own:
            kind = "add"
        if kind == "add":
            label = tag(process, index)
            own.append(label)
            steps.append({"op": "add", "target": target, "content": _content(rng, label)})
        elif kind == "replace":
            old = own.pop(rng.randrange(len(own)))
            label = tag(process, index)
            own.append(label)
            steps.append(
                {
                    "op": "replace",
                    "target": target,
                    "old_text": old,
                    "new_content": _content(rng, label),
                }
            )
        elif kind == "remove":
            old = own.pop(rng.randrange(len(own)))
            steps.append({"op": "remove", "target": target, "old_text": old})
        else:
            items = _batch_items(process, index, rng, own)
            steps.append({"op": "batch", "target": target, "operations": items})
    return tuple(steps)


def _batch_items(process: int, index: int, rng: random.Random, own: list[str]) -> list[BatchItem]:
    """Two or three items: each adds a new entry or acts on a distinct earlier own entry."""
    items: list[BatchItem] = []
    for item in range(rng.randint(2, 3)):
        action = rng.choice(("add", "add", "replace", "remove")) if own else "add"
        if action == "add":
            label = tag(process, index, item)
            own.append(label)
            items.append({"action": "add", "content": _content(rng, label)})
            continue
        old = own.pop(rng.randrange(len(own)))
        if action == "remove":
            items.append({"action": "remove", "old_text": old})
            continue
        label = tag(process, index, item)
        own.append(label)
        items.append({"action": "replace", "old_text": old, "content": _content(rng, label)})
    return items


def peak_usage(programs: Sequence[Sequence[Request]]) -> dict[str, int]:
    """Returns each target's largest usage when ``programs`` run one step of each in turn
    (round robin) with no limit: about the most that a concurrent run of them holds."""
    state = initial_state(AMPLE, AMPLE)
    peak: dict[str, int] = dict.fromkeys(TARGETS, 0)
    longest = max((len(program) for program in programs), default=0)
    for position in range(longest):
        for program in programs:
            if position >= len(program):
                continue
            request = program[position]
            if request["op"] not in MUTATIONS:
                continue
            mutation = to_mutation(request)
            _, state = step(state, mutation)
            target = str(mutation.target)
            peak[target] = max(peak[target], usage(entries_on_disk(state, target) or ()))
    return peak


def limits_for(programs: Sequence[Sequence[Request]]) -> dict[str, int]:
    """Returns the limits of a concurrent run of ``programs``: ``memory`` twice the peak usage of a
    round-robin run, so its histories are about lost updates alone, and ``user`` half of it (at
    least one entry's room), so which add it refuses with ``E_LIMIT`` depends on the interleaving
    (LIMIT-2)."""
    peak = peak_usage(programs)
    longest_note = max(len(tag(99, 9999, 9)) + 1 + len(note) for note in NOTES)
    return {
        "memory": max(2 * peak["memory"], 4 * longest_note),
        "user": max(peak["user"] // 2, 2 * longest_note),
    }
