"""Mutation testing of the checks (issue 20): every one-change mutant of every reference
solution (autograder/authoring/mutants.py) is graded as a submission; a mutant is killed when
it loses points. Prints, per exercise: mutants, killed, survived, declared equivalent (with the
reason, below) and the kill rate among the non-equivalent ones; then each survivor.

    python benchmarks/mutation.py [exercise ...] [--workers N] [--limit N]

Too slow for the suite (a few seconds per mutant: 564 mutants on 2026-11-26);
tests/exercises/test_mutants.py grades a sample.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

from autograder.authoring.mutants import EQUIVALENT, Mutant, mutants_of
from autograder.exercises import EXERCISES, reference_module, resolve
from autograder.grading.runner import grade_notebook
from autograder.grading.shared import SharedSandbox
from autograder.notebooks.notebook import to_notebook
from autograder.notebooks.render import render_cells


def notebook_with(mutant: Mutant) -> nbformat.NotebookNode:
    notebook = to_notebook(render_cells(mutant.exercise, "en"), mutant.exercise, "en")
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == mutant.target:
            cell.source = mutant.source
            return notebook
    raise LookupError(f"no solution cell {mutant.target} in {mutant.exercise}")


def changed(mutant: Mutant) -> str:
    """The mutant's first line that differs from the reference's (both as ast.unparse writes
    them)."""
    original = inspect.getsource(getattr(reference_module(mutant.exercise), mutant.target))
    before = ast.unparse(ast.parse(original)).splitlines()
    after = mutant.source.splitlines()
    pairs = zip(before, after, strict=False)
    return next((new.strip() for old, new in pairs if old != new), "?")


SHARED = SharedSandbox()  # one per worker process: mutants are the grader's own code


def grade(mutant: Mutant) -> tuple[Mutant, float, float, list[str]]:
    """(mutant, score, max score, the checks it failed)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"{mutant.exercise}.ipynb"
        nbformat.write(notebook_with(mutant), path)
        report = grade_notebook(path, shared=SHARED.get())
    failed = [check.name for check in report.checks if not check.passed]
    return mutant, report.score, report.max_score, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exercises", nargs="*", help="exercises (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="gradings at once")
    parser.add_argument("--limit", type=int, default=0, help="at most N mutants per exercise")
    options = parser.parse_args()
    exercises = [resolve(name) for name in options.exercises] or list(EXERCISES)
    rows, survivors = [], []
    for exercise in exercises:
        started = time.monotonic()
        mutants = mutants_of(exercise)[: options.limit or None]
        with ProcessPoolExecutor(options.workers) as pool:
            results = list(pool.map(grade, mutants))
        survived = [m for m, score, top, _ in results if score >= top]
        equivalent = [m for m in survived if f"{exercise} {m.id}" in EQUIVALENT]
        live = [m for m in survived if m not in equivalent]
        judged = len(mutants) - len(equivalent)
        rate = 100.0 * (judged - len(live)) / judged if judged else 100.0
        rows.append(
            (
                exercise,
                len(mutants),
                len(mutants) - len(survived),
                len(live),
                len(equivalent),
                rate,
                time.monotonic() - started,
            )
        )
        survivors += live
        print(f"{exercise}: {rows[-1][2]}/{len(mutants)} killed", file=sys.stderr, flush=True)
        for mutant in live:  # as soon as the exercise is done (a long run may be cut short)
            print(f"  survived {mutant.id}: {changed(mutant)}", file=sys.stderr, flush=True)
    print("| exercise | mutants | killed | survived | equivalent | killed of non-equivalent | s |")
    print("|---|---|---|---|---|---|---|")
    for exercise, total, killed, live, equivalent, rate, seconds in rows:
        cells = (exercise, total, killed, live, equivalent, f"{rate:.1f}%", f"{seconds:.0f}")
        print("| " + " | ".join(map(str, cells)) + " |")
    for mutant in survivors:
        print(f"\nSURVIVED {mutant.exercise} {mutant.id}: {mutant.where}\n  -> {changed(mutant)}")
    for key, why in EQUIVALENT.items():
        print(f"\nEQUIVALENT {key}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
