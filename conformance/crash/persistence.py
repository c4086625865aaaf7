"""Crash states: what a process crash or a power loss may leave of a recorded file-system trace.

Pure (no I/O, no backend): :func:`crash_states` takes a trace of logical operations
(:class:`~memspec.conformance.tamper.ops.Op`) and the files before it, and yields the states
each persistence model of :data:`MODELS` allows at each crash point, fewest deviations first;
:func:`explain` says in plain words what a state dropped and what fixes it. The models, the
crash points and the bounds are described in docs/architecture.md ("The crash suite").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from memspec.conformance.tamper.ops import DATA_OPS, ENTRY_OPS, Op
from memspec.spec.root_files import NAMED_KINDS, file_kind

MODELS = ("process-crash", "posix-weak", "ext4-ordered")
POWER_LOSS_MODELS = ("posix-weak", "ext4-ordered")
LIMIT = 2000
"""Distinct crash states a model generates at most, by default."""
PER_POINT = 32
"""Candidate states a crash point yields at most, by default."""
DEVIATIONS = 2
"""Groups of operations that may persist otherwise than whole in one state, at most."""
ALL_SUBSETS = 8
"""Unsynced directory operations up to which every subset is a candidate (above it: prefixes
and single omissions, as ALICE explores)."""

Files = tuple[tuple[str, int, bytes], ...]
"""The files of a state: (name, inode, bytes), sorted by name; names sharing an inode are
hard links."""


@dataclass(frozen=True)
class CrashState:
    """A CrashState is the files a crash may leave, and how they came about: ``point`` operations
    issued, ``acknowledged`` mutations answered, ``in_flight`` whether one was running; ``kept``
    maps an operation that persisted otherwise than whole to how (``"half"``, ``"zeros"``,
    ``"link"``), ``dropped`` lists those that did not persist at all."""

    model: str
    point: int
    files: Files
    acknowledged: int
    in_flight: bool
    dropped: tuple[int, ...] = ()
    kept: tuple[tuple[int, str], ...] = ()

    @property
    def key(self) -> tuple[object, ...]:
        """What makes two states the same: names, link structure, bytes, acknowledgements."""
        first: dict[int, int] = {}
        shape = tuple(
            (name, first.setdefault(ino, index), data)
            for index, (name, ino, data) in enumerate(self.files)
        )
        return (shape, self.acknowledged, self.in_flight)


@dataclass
class CrashStates:
    """CrashStates are the distinct states one model allows for a trace, and whether a bound
    (``limit`` or ``per_point``) stopped the enumeration early."""

    model: str
    states: list[CrashState] = field(default_factory=list)
    capped: bool = False
    candidates: int = 0


# -- replay -----------------------------------------------------------------------------------


def replay(
    initial: Mapping[str, tuple[int, bytes]], ops: Sequence[Op], plan: Mapping[int, str]
) -> Files:
    """Returns the files after replaying the operations ``plan`` keeps, in trace order: ``plan``
    maps an index to ``"all"``, ``"half"``, ``"zeros"``, ``"link"`` (a rename's new name only) or
    ``"unlink"`` (its source removal only); an index not in it is dropped."""
    entries = {name: ino for name, (ino, _) in initial.items()}
    data = {ino: bytearray(content) for ino, content in initial.values()}
    for index, how in sorted(plan.items()):
        op = ops[index]
        if op.ino is None:
            continue
        if op.kind == "create":
            entries[op.name] = op.ino
            data.setdefault(op.ino, bytearray())
        elif op.kind == "write":
            payload = op.data
            if how == "half":
                payload = payload[: len(payload) // 2]
            elif how == "zeros":
                payload = bytes(len(payload))
            buffer = data.setdefault(op.ino, bytearray())
            if len(buffer) < op.offset:
                buffer.extend(bytes(op.offset - len(buffer)))
            buffer[op.offset : op.offset + len(payload)] = payload
        elif op.kind == "truncate":
            buffer = data.setdefault(op.ino, bytearray())
            del buffer[op.length :]
            buffer.extend(bytes(op.length - len(buffer)))
        elif op.kind == "rename":
            if how in ("all", "link"):
                entries[op.name] = op.ino
            if how in ("all", "unlink") and entries.get(op.source) == op.ino and op.source:
                del entries[op.source]
        elif op.kind == "unlink" and entries.get(op.name) == op.ino:
            del entries[op.name]
    return tuple(sorted((name, ino, bytes(data.get(ino, b""))) for name, ino in entries.items()))


def grows_file(initial: Mapping[str, tuple[int, bytes]], ops: Sequence[Op]) -> frozenset[int]:
    """Returns the indices of the writes that made their file longer when they were issued."""
    sizes = {ino: len(content) for ino, content in initial.values()}
    grows = set()
    for index, op in enumerate(ops):
        if op.ino is None:
            continue
        if op.kind == "create":
            sizes.setdefault(op.ino, 0)
        elif op.kind == "truncate":
            sizes[op.ino] = op.length
        elif op.kind == "write":
            end = op.offset + len(op.data)
            if end > sizes.get(op.ino, 0):
                grows.add(index)
                sizes[op.ino] = end
    return frozenset(grows)


# -- the models -------------------------------------------------------------------------------

Choice = tuple[dict[int, str], tuple[int, ...]]
"""One way a group persists: how its kept operations persist, and the ones it drops."""


def _entry_parts(ops: Sequence[Op], indices: Sequence[int]) -> list[str]:
    """Returns the directory operations as parts; a rename is two: its new name and the
    removal of its old one, which posix-weak may persist apart."""
    parts = []
    for index in indices:
        halves = ("link", "unlink") if ops[index].kind == "rename" else ("all",)
        parts += [f"{index}:{half}" for half in halves]
    return parts


def _metadata_choices(ops: Sequence[Op], unsynced: list[int], model: str) -> list[Choice]:
    """The ways the unsynced directory operations (and, for ext4, truncates) may persist."""
    if model == "ext4-ordered":
        return [
            ({index: "all" for index in unsynced[:keep]}, tuple(unsynced[keep:]))
            for keep in range(len(unsynced), -1, -1)
        ]
    parts = _entry_parts(ops, unsynced)
    if len(parts) <= ALL_SUBSETS:
        subsets: Iterator[tuple[str, ...]] = itertools.chain.from_iterable(
            itertools.combinations(parts, size) for size in range(len(parts), -1, -1)
        )
    else:
        prefixes = (tuple(parts[:keep]) for keep in range(len(parts), -1, -1))
        omissions = (tuple(p for p in parts if p != gone) for gone in parts[:-1])
        subsets = itertools.chain(prefixes, omissions)
    choices = []
    for subset in subsets:
        kept: dict[int, str] = {}
        for part in subset:
            index_text, how = part.split(":")
            index = int(index_text)
            kept[index] = "all" if kept.get(index) or how == "all" else how
        dropped = tuple(index for index in unsynced if index not in kept)
        choices.append((kept, dropped))
    return choices


def _data_choices(unsynced: list[int], grows: frozenset[int], model: str) -> list[Choice]:
    """The ways one inode's unsynced writes (and, for posix-weak, truncates) may persist."""
    whole = {index: "all" for index in unsynced}
    choices: list[Choice] = [(whole, ())]
    for keep in range(len(unsynced) - 1, -1, -1):
        kept = {index: "all" for index in unsynced[:keep]}
        partial = unsynced[keep]
        choices.append((kept, tuple(unsynced[keep:])))
        choices.append(({**kept, partial: "half"}, tuple(unsynced[keep + 1 :])))
        if model == "posix-weak" and partial in grows:
            choices.append(({**kept, partial: "zeros"}, tuple(unsynced[keep + 1 :])))
    if model == "posix-weak":
        for gone in unsynced[:-1]:
            choices.append(({i: "all" for i in unsynced if i != gone}, (gone,)))
    return choices


def _groups(
    ops: Sequence[Op], point: int, model: str, grows: frozenset[int]
) -> tuple[dict[int, str], list[list[Choice]]]:
    """Returns what must persist at ``point`` and the groups of what may or may not."""
    ext4 = model == "ext4-ordered"
    issued = range(point)
    synced_at: dict[int, int] = {}
    last_dirsync = -1
    last_any_sync = -1
    for index in issued:
        op = ops[index]
        if op.kind == "fsync" and op.ino is not None:
            synced_at[op.ino] = index
            last_any_sync = index
        elif op.kind == "dirsync":
            last_dirsync = last_any_sync = index
    metadata_barrier = last_any_sync if ext4 else last_dirsync
    mandatory: dict[int, str] = {}
    metadata: list[int] = []
    data: dict[int, list[int]] = {}
    for index in issued:
        op = ops[index]
        is_metadata = op.kind in ENTRY_OPS or (ext4 and op.kind == "truncate")
        if is_metadata:
            if index < metadata_barrier:
                mandatory[index] = "all"
            else:
                metadata.append(index)
        elif op.kind in DATA_OPS and op.ino is not None:
            if index < synced_at.get(op.ino, -1):
                mandatory[index] = "all"
            else:
                data.setdefault(op.ino, []).append(index)
    groups = [_metadata_choices(ops, metadata, model)] if metadata else []
    groups += [_data_choices(indices, grows, model) for indices in data.values()]
    return mandatory, groups


def _violates_auto_da_alloc(ops: Sequence[Op], plan: Mapping[int, str]) -> bool:
    """Whether ``plan`` keeps a rename over an existing file but not the data written to the
    renamed inode before it (ext4's ``auto_da_alloc`` forbids that)."""
    for index, how in plan.items():
        op = ops[index]
        if op.kind == "rename" and how == "all" and op.replaced is not None:
            for earlier in range(index):
                before = ops[earlier]
                if before.kind == "write" and before.ino == op.ino and plan.get(earlier) != "all":
                    return True
    return False


def _plans(
    groups: list[list[Choice]], mandatory: dict[int, str]
) -> Iterator[tuple[dict[int, str], tuple[int, ...]]]:
    """Yields plans by increasing number of groups that deviate from "everything persisted";
    within a level, every group's first alternatives come before any group's later ones, so
    that a bound cuts evenly across groups."""
    widest = max((len(group) for group in groups), default=1)
    for level in range(min(len(groups), DEVIATIONS) + 1):
        for rank in range(1 if level else 0, widest if level else 1):
            for deviating in itertools.combinations(range(len(groups)), level):
                ranges = [range(1, min(rank, len(groups[g]) - 1) + 1) for g in deviating]
                for picks in itertools.product(*ranges):
                    if level and max(picks) != rank:
                        continue
                    chosen = dict(zip(deviating, picks, strict=True))
                    plan = dict(mandatory)
                    dropped: list[int] = []
                    for g, group in enumerate(groups):
                        kept, gone = group[chosen.get(g, 0)]
                        plan.update(kept)
                        dropped.extend(gone)
                    yield plan, tuple(sorted(dropped))


def _in_flight(ops: Sequence[Op], point: int) -> bool:
    return point > 0 and ops[point - 1].kind != "ack"


def crash_points(ops: Sequence[Op], model: str) -> list[int]:
    """Returns the crash points ``model`` considers: every point for ``process-crash``; the
    persistence points, the points after each ``ack`` and the end for the others."""
    if model == "process-crash":
        return list(range(len(ops) + 1))
    points = {len(ops)}
    for index, op in enumerate(ops):
        if op.kind in ("fsync", "dirsync"):
            points.add(index)
        elif op.kind == "ack":
            points.add(index + 1)
    return sorted(points)


def crash_states(
    initial: Mapping[str, tuple[int, bytes]],
    ops: Sequence[Op],
    model: str,
    *,
    limit: int = LIMIT,
    per_point: int = PER_POINT,
) -> CrashStates:
    """Returns the distinct crash states ``model`` allows for ``ops`` run on ``initial`` files
    (name -> (inode, bytes)), point by point (module docs)."""
    if model not in MODELS:
        raise ValueError(f"unknown persistence model {model!r}; the models are {MODELS}")
    result = CrashStates(model)
    seen: set[tuple[object, ...]] = set()
    grows = grows_file(initial, ops)
    for point in crash_points(ops, model):
        acknowledged = sum(1 for op in ops[:point] if op.kind == "ack")
        in_flight = _in_flight(ops, point)
        if model == "process-crash":
            plans: Iterator[tuple[dict[int, str], tuple[int, ...]]] = iter(
                [(dict.fromkeys(range(point), "all"), ())]
            )
        else:
            mandatory, groups = _groups(ops, point, model, grows)
            plans = _plans(groups, mandatory)
        tried = 0
        for plan, dropped in plans:
            if model == "ext4-ordered" and _violates_auto_da_alloc(ops, plan):
                continue
            if tried == per_point:
                result.capped = True
                break
            tried += 1
            result.candidates += 1
            partial = tuple(sorted((i, how) for i, how in plan.items() if how != "all"))
            state = CrashState(
                model, point, replay(initial, ops, plan), acknowledged, in_flight, dropped, partial
            )
            if state.key in seen:
                continue
            seen.add(state.key)
            result.states.append(state)
            if len(result.states) >= limit:
                result.capped = True
                return result
    return result


# -- explanations -----------------------------------------------------------------------------


def role(name: str) -> str:
    """Returns how a file is named in explanations: the data file by name, a temp by role."""
    if file_kind(name) in NAMED_KINDS:
        return name
    return f"the temp file {name}"


def _names_of(ops: Sequence[Op], initial: Mapping[str, tuple[int, bytes]]) -> dict[int, str]:
    names = {ino: name for name, (ino, _) in initial.items()}
    for op in ops:
        if op.kind == "create" and op.ino is not None:
            names.setdefault(op.ino, op.name)
    return names


def explain(
    state: CrashState,
    ops: Sequence[Op],
    initial: Mapping[str, tuple[int, bytes]],
    mutations: Sequence[str] = (),
) -> list[str]:
    """Returns, in plain words, what this state dropped or reordered and what would fix it;
    ``mutations`` names the session's mutations by index (e.g. ``"replace <k2>"``)."""
    names = _names_of(ops, initial)
    current = ops[state.point - 1].mutation if state.point else None
    partial = dict(state.kept)
    gone = set(state.dropped)

    def at(index: int) -> str:
        op = ops[index]
        where = f"step {op.step}"
        if op.mutation != current and op.mutation < len(mutations):
            where += f" of {mutations[op.mutation]}"
        return where

    def lost(index: int) -> bool:
        return index in gone or partial.get(index) in ("half", "zeros")

    def linked(index: int) -> bool:
        return index not in gone and partial.get(index) != "unlink"

    sentences: list[str] = []
    explained: set[int] = set()
    for index in range(state.point):
        op = ops[index]
        if op.kind == "rename" and linked(index):
            unsynced = [
                earlier
                for earlier in range(index)
                if ops[earlier].kind == "write" and ops[earlier].ino == op.ino and lost(earlier)
            ]
            if unsynced:
                sentences.append(
                    f"the rename at {at(index)} may persist before the data written at "
                    f"{at(unsynced[0])}: fsync {role(op.source)} before renaming it (ATOMIC-1)"
                )
                explained.update(unsynced)
            if partial.get(index) == "link":
                sentences.append(
                    f"the rename at {at(index)} may persist halfway, {op.source} and {op.name} "
                    "both naming the new file, until the directory is fsynced"
                )
        if op.kind == "truncate" and index not in gone:
            later = [
                after
                for after in range(index + 1, len(ops))
                if ops[after].kind == "write"
                and ops[after].ino == op.ino
                and (after >= state.point or lost(after))
            ]
            if later:
                sentences.append(
                    f"the truncate at {at(index)} may persist without the data written at "
                    f"{at(later[0])} (or with only part of it): "
                    f"{role(names.get(op.ino or -1, '?'))} is rewritten in place; write a temp "
                    "file and rename it instead (ATOMIC-2)"
                )
                explained.update(later)
    for index in sorted(gone | set(partial)):
        op = ops[index]
        how = partial.get(index)
        if index in explained or how == "link":
            continue
        target = role(names.get(op.ino or -1, op.name or "?"))
        if op.kind == "rename":
            acked = (
                f"acknowledged {mutations[op.mutation]}"
                if op.mutation < len(mutations)
                else "acknowledged mutation"
            )
            tail = (
                f": the {acked} is lost on power loss; fsync the directory after the rename, "
                "before answering (ATOMIC-3)"
                if op.mutation < state.acknowledged
                else " (the directory was not fsynced after it yet)"
            )
            sentences.append(f"the rename at {at(index)} onto {op.name} may be lost{tail}")
        elif op.kind == "write":
            what = {"half": "persist only in part", "zeros": "persist as zeros"}.get(
                how or "", "be lost"
            )
            sentences.append(
                f"the data written to {target} at {at(index)} may {what} (not fsynced)"
            )
        elif op.kind in ("create", "unlink", "truncate"):
            verb = {"create": "creation", "unlink": "removal", "truncate": "truncation"}[op.kind]
            sentences.append(f"the {verb} of {target} at {at(index)} may be lost")
    return sentences
