"""Mutation testing of the reference store against the harness's own checks (docs/MUTATION.md).

Every mutant of ``reference_impl/store.py``, ``files.py`` and ``fence.py`` that mutmut makes is
certified with the conformance suite — the checks ``memspec certify`` runs — at the ``smoke``
profile, stopping at the first failure (``-x``). A mutant is killed when a check fails (or the
run exceeds mutmut's timeout), and survives when every check passes. ``providers.py`` is left
out: the external-provider orchestration is agent-side (PROV clauses, ``n/a`` in the matrix)
and the contract cannot observe it.

mutmut rewrites the files it mutates, so the run happens in clones of this repository (one
per group of files, run side by side) with their own virtual environment, never in the working
tree. From the project root::

    python -m benchmarks.mutation --work ../memspec-mutation        # about 20 minutes, 2 cores
    python -m benchmarks.mutation --work DIR --report-only                 # summarise a past run
    python -m benchmarks.mutation --page docs/results/mutation.md   # the page; work in a temp dir

It needs ``git`` and the package index (``mutmut==2.5.1`` and memspec's dependencies go into
one venv per clone, ``DIR/clone<N>-venv``). A clone is of the committed ``HEAD``. The summary
lists the counts and every surviving mutant as a diff; run it only after the mutation runs
ended (``mutmut show`` recomputes mutants from the files on disk).
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memspec.conformance.core.results_page import PageRun, writable_page

PROJECT = Path(__file__).resolve().parent.parent
MUTMUT = "mutmut==2.5.1"
GROUPS = (("reference_impl/store.py", "reference_impl/fence.py"), ("reference_impl/files.py",))
"""Files mutated together in one clone; the clones run side by side."""
STATUSES = ("ok_killed", "bad_survived", "bad_timeout", "ok_suspicious", "untested")
"""mutmut's statuses, in the column order of the results page (killed ... untested)."""
RUNNER = """#!/usr/bin/env bash
# One mutant: the conformance suite against the mutated reference, smoke profile, stop at the
# first failure. Bytecode of the mutated package is dropped so that no stale .pyc is loaded.
# mutmut 2 counts only exit status 1 as a kill, so every failing status (4: the mutated
# reference cannot even be imported) becomes 1.
cd "{clone}"
rm -rf reference_impl/__pycache__
printf '[pytest]\\n' > "{work}/pytest.ini"
"{python}" -m pytest -c "{work}/pytest.ini" --rootdir conformance/suite -p no:cacheprovider \\
    -x -q --tb=line --pyargs memspec.conformance.suite \\
    --memspec-backend memspec.reference_impl:open_store --memspec-profile {profile}
[ $? -eq 0 ] || exit 1
"""


def _run(argv: Sequence[str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv[:4])} failed: {' '.join(tail)}")


def _clone(work: Path, index: int) -> Path:
    return work / f"clone{index}"


def prepare(work: Path, profile: str, indices: Sequence[int]) -> None:
    """Clones the project once per chosen group, each with its own venv (memspec installed
    editable from that clone, and mutmut), and writes the runners."""
    work.mkdir(parents=True, exist_ok=True)
    for clone in (_clone(work, index) for index in indices):
        if not clone.exists():
            _run(["git", "clone", "--quiet", str(PROJECT), str(clone)])
        python = _venv(work, clone) / "bin" / "python"
        if not python.exists():
            _run([sys.executable, "-m", "venv", str(_venv(work, clone))])
            _run([str(python), "-m", "pip", "install", "--quiet", MUTMUT, "-e", str(clone)])
        runner = clone / "mutation-runner.sh"
        runner.write_text(
            RUNNER.format(clone=clone, work=work, python=python, profile=profile), encoding="utf-8"
        )


def _venv(work: Path, clone: Path) -> Path:
    return work / f"{clone.name}-venv"


def launch(work: Path, indices: Sequence[int]) -> list[subprocess.Popen[bytes]]:
    """Starts one ``mutmut run`` per chosen group, niced, logging to ``work/clone<N>.log``."""
    runs = []
    for index in indices:
        clone, group = _clone(work, index), GROUPS[index]
        log = (work / f"{clone.name}.log").open("wb")
        mutmut = _venv(work, clone) / "bin" / "mutmut"
        argv = ["nice", "-n", "10", str(mutmut), "run", "--paths-to-mutate", ",".join(group)]
        argv += ["--runner", f"bash {clone / 'mutation-runner.sh'}", "--tests-dir", "tests"]
        argv += ["--test-time-base", "60", "--no-progress", "--simple-output"]
        runs.append(subprocess.Popen(argv, cwd=clone, stdout=log, stderr=log))
    return runs


@dataclass
class Tally:
    """What a mutation run left in its clones: per-group counts and every survivor's diff."""

    groups: list[tuple[str, dict[str, int] | None]] = field(default_factory=list)
    survivors: list[tuple[str, str]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def killed(self) -> int:
        """Mutants a check failed on, or that exceeded mutmut's timeout."""
        return self.totals.get("ok_killed", 0) + self.totals.get("bad_timeout", 0)

    @property
    def tested(self) -> int:
        """Mutants certified to the end: killed, survived or suspicious."""
        survived = self.totals.get("bad_survived", 0)
        return self.killed + survived + self.totals.get("ok_suspicious", 0)


def tally(work: Path, indices: Sequence[int]) -> Tally:
    """Returns the counts per status and the diff of every surviving mutant of the groups."""
    found = Tally()
    for index in indices:
        clone = _clone(work, index)
        group = " and ".join(GROUPS[index])
        cache = clone / ".mutmut-cache"
        if not cache.exists():
            found.groups.append((group, None))
            continue
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
            rows = db.execute("select status, count(*) from Mutant group by status").fetchall()
            survivors = [r[0] for r in db.execute("select id from Mutant where status = ?",
                                                  ("bad_survived",))]  # fmt: skip
        for status, count in rows:
            found.totals[status] = found.totals.get(status, 0) + count
        found.groups.append((group, dict(rows)))
        for ident in survivors:
            mutmut = _venv(work, clone) / "bin" / "mutmut"
            shown = subprocess.run(
                [str(mutmut), "show", str(ident)], cwd=clone, capture_output=True, text=True
            ).stdout
            diff = [line for line in shown.splitlines() if line[:1] in "-+@" and line[:3] not in
                    ("---", "+++")]  # fmt: skip
            found.survivors.append((f"{clone.name}#{ident}", " | ".join(diff)))
    return found


def summary(work: Path, indices: Sequence[int], found: Tally | None = None) -> str:
    """Counts per status and the diff of every surviving mutant (of ``found`` when given, else
    of :func:`tally` of the groups)."""
    found = found or tally(work, indices)
    lines = []
    for index, (group, rows) in zip(indices, found.groups, strict=True):
        name = _clone(work, index).name
        lines.append(f"{name}: no results yet" if rows is None else f"{name} ({group}): {rows}")
    lines += [f"  survivor {ident}: {diff}" for ident, diff in found.survivors]
    lines.append(
        f"total: {found.tested} mutants tested, {found.killed} killed, "
        f"{found.totals.get('bad_survived', 0)} survived, {found.totals.get('untested', 0)} "
        f"untested; raw score {found.killed / max(found.tested, 1):.1%}"
        " (docs/MUTATION.md argues each survivor)"
    )
    return "\n".join(lines)


def render_page(found: Tally, profile: str) -> str:
    """Returns the body of the mutation results page: counts per group, the score, and every
    survivor (why each is equivalent is argued by hand in docs/MUTATION.md)."""
    survived = found.totals.get("bad_survived", 0)
    lines = [
        f"mutmut {MUTMUT.split('==')[1]} mutates the reference store; each mutant is certified "
        f"with the conformance suite at profile `{profile}`, stopping at the first failure. A "
        "mutant is *killed* when a check fails or the run exceeds mutmut's timeout, and "
        "*survives* when every check passes.",
        "",
        f"**{found.tested} mutants, {found.killed} killed, {survived} survived: raw score "
        f"{found.killed / max(found.tested, 1):.1%}.** Why each survivor is equivalent (no "
        "behaviour the contract can observe changes) is argued by hand in "
        "[docs/MUTATION.md](../MUTATION.md).",
        "",
        "| files | mutants | killed by a check | survived | killed by timeout | suspicious "
        "| untested |",
        "|---|---|---|---|---|---|---|",
    ]
    for group, rows in found.groups:
        if rows is None:
            lines.append(f"| {group} | no results | | | | | |")
            continue
        counts = [rows.get(k, 0) for k in STATUSES]
        lines.append(
            f"| {group} | {sum(rows.values())} | " + " | ".join(str(n) for n in counts) + " |"
        )
    lines += ["", f"## Survivors ({len(found.survivors)})", ""]
    lines += [f"- `{ident}`: `{diff}`" for ident, diff in found.survivors] or ["- none"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.mutation", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--work", metavar="DIR", help="clones, venv, logs (with --page: a new temporary one)"
    )
    parser.add_argument("--profile", default="smoke", choices=("smoke", "ci"))
    parser.add_argument("--report-only", action="store_true", help="summarise a past run")
    parser.add_argument(
        "--groups",
        default=",".join(str(i) for i in range(len(GROUPS))),
        help=f"indices of the groups to mutate: {', '.join(map(str, range(len(GROUPS))))} = "
        + "; ".join(" and ".join(group) for group in GROUPS),
    )
    parser.add_argument(
        "--page", metavar="FILE", help="also write the results page (docs/results/mutation.md)"
    )
    args = parser.parse_args(argv)
    page_run = PageRun.start("python -m benchmarks.mutation", argv)
    if args.page and writable_page(args.page):
        parser.error(str(writable_page(args.page)))
    if not args.work and (args.report_only or not args.page):
        parser.error("--work DIR is required (or --page FILE, to mutate in a temporary one)")
    chosen = args.groups.split(",")
    if not set(chosen) <= {str(i) for i in range(len(GROUPS))}:
        parser.error(f"--groups takes indices below {len(GROUPS)}, got {args.groups!r}")
    work = Path(args.work or tempfile.mkdtemp(prefix="memspec-mutation-")).absolute()
    indices = sorted({int(i) for i in chosen})
    if not args.report_only:
        try:
            work.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            parser.error(f"--work {args.work}: {error.strerror or error}")
    if not args.report_only:
        prepare(work, args.profile, indices)
        runs = launch(work, indices)
        print(f"mutating groups {indices} in {work} (logs: clone<N>.log)", flush=True)
        for run in runs:
            run.wait()
    found = tally(work, indices)
    print(summary(work, indices, found))
    if args.page:
        body = render_page(found, args.profile)
        title = "Mutation testing of the reference store"
        print(f"page: {page_run.write(args.page, title, body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
