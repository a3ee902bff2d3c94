"""Mutation testing of the checks, under the rule of validity round 4: every one-change mutant of
every reference solution (autograder/authoring/mutants.py) is graded as a submission, and counts
as killed only when it breaks a clause of the contract on an input the contract allows. It does
when it loses points: every check tests clauses of the contract (each exercise's clauses.toml,
kept complete by tests/exercises/test_clauses.py) on inputs the contract allows (every check gives
the blind corpus of independent correct solutions full marks, tests/exercises/test_blind_corpus.py);
the clauses of the checks it failed are the ones it broke. A mutant that keeps every point is
equivalent for grading when its exercise's mutants.toml names the clause that allows it, and a
survivor otherwise: an input class the checks never draw, or a question for the contract.

    python benchmarks/mutation.py [exercise ...] [--workers N] [--limit N] [--clauses]

Prints, per exercise: clauses (and arguments) of its table, checks, catalogued mistakes, mutants,
killed, equivalent, survived and the blind corpus size; then each survivor (with `--clauses`, the
clauses each killed mutant broke). Too slow for the suite (a few seconds per mutant);
tests/exercises/test_mutants.py grades a sample.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

from autograder.authoring.catalogue import catalogue_for
from autograder.authoring.mutants import Mutant, equivalent_mutants, equivalent_to, mutants_of
from autograder.core.registry import EXERCISES, exercise_dir, resolve
from autograder.grading.runner import grade_notebook
from autograder.grading.shared import SharedSandbox
from autograder.notebooks.notebook import to_notebook
from autograder.notebooks.render import render_cells

BLIND = Path(__file__).resolve().parents[1] / "tests" / "exercises" / "blind"


def notebook_with(mutant: Mutant) -> nbformat.NotebookNode:
    notebook = to_notebook(render_cells(mutant.exercise, "en"), mutant.exercise, "en")
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == mutant.target:
            cell.source = mutant.source
            return notebook
    raise LookupError(f"no solution cell {mutant.target} in {mutant.exercise}")


SHARED = SharedSandbox()  # one per worker process: mutants are the grader's own code


def grade(mutant: Mutant) -> tuple[Mutant, float, float, list[str]]:
    """(mutant, score, max score, the checks it failed)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"{mutant.exercise}.ipynb"
        nbformat.write(notebook_with(mutant), path)
        report = grade_notebook(path, shared=SHARED.get())
    failed = [check.name for check in report.checks if not check.passed]
    return mutant, report.score, report.max_score, failed


def clause_table(exercise: str) -> dict[str, list[dict]]:
    return tomllib.loads((exercise_dir(exercise) / "clauses.toml").read_text())


def clauses_of_checks(exercise: str) -> dict[str, list[str]]:
    """check name -> the clauses (`function: clause`) it tests."""
    found: dict[str, list[str]] = {}
    for name, entries in clause_table(exercise).items():
        for entry in entries:
            said = entry.get("clause") or f"argument {entry.get('argument')}"
            for check in entry.get("checks", []):
                found.setdefault(check, []).append(f"{name}: {said}")
    return found


def sizes(exercise: str) -> tuple[str, int, int, int]:
    """(clauses and arguments, checks, catalogued mistakes, blind solutions) of an exercise."""
    table = clause_table(exercise)
    clauses = sum(1 for entries in table.values() for e in entries if "clause" in e)
    arguments = sum(1 for entries in table.values() for e in entries if "argument" in e)
    checks = len(clauses_of_checks(exercise))
    blind = len(list(BLIND.glob(f"*/{exercise}.py")))
    return f"{clauses} (+{arguments})", checks, len(catalogue_for(exercise)), blind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exercises", nargs="*", help="exercises (default: all)")
    parser.add_argument("--workers", type=int, default=2, help="gradings at once")
    parser.add_argument("--limit", type=int, default=0, help="at most N mutants per exercise")
    parser.add_argument("--clauses", action="store_true", help="the clauses each kill broke")
    options = parser.parse_args()
    exercises = [resolve(name) for name in options.exercises] or list(EXERCISES)
    rows, survivors = [], []
    for exercise in exercises:
        started = time.monotonic()
        mutants = mutants_of(exercise)[: options.limit or None]
        with ProcessPoolExecutor(options.workers) as pool:
            results = list(pool.map(grade, mutants))
        table, clauses = equivalent_mutants(exercise), clauses_of_checks(exercise)
        kept = [m for m, score, top, _ in results if score >= top]
        equivalent = [m for m in kept if equivalent_to(m, table) is not None]
        live = [m for m in kept if m not in equivalent]
        broken = Counter(
            clause
            for _, score, top, failed in results
            if score < top
            for clause in dict.fromkeys(c for check in failed for c in clauses.get(check, []))
        )
        killed = len(mutants) - len(kept)
        seconds = time.monotonic() - started
        rows.append((exercise, *sizes(exercise), len(mutants), killed, len(equivalent), live))
        print(f"{exercise}: {killed}/{len(mutants)} killed ({seconds:.0f} s)", file=sys.stderr)
        if options.clauses:
            for clause, count in broken.most_common():
                print(f"  {count:3d} mutants broke {clause}", file=sys.stderr)
        for mutant in live:  # as soon as the exercise is done (a long run may be cut short)
            print(
                f"  survived {mutant.target} {mutant.operator}: {mutant.changed}", file=sys.stderr
            )
        survivors += live
        sys.stderr.flush()
    print(
        "| exercise | clauses (+ arguments) | checks | mistakes | mutants | killed "
        "| equivalent | survived | blind corpus |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for exercise, clauses_, checks, mistakes, total, killed, equivalent, live, blind in (
        (r[0], r[1], r[2], r[3], r[5], r[6], r[7], len(r[8]), r[4]) for r in rows
    ):
        cells = (exercise, clauses_, checks, mistakes, total, killed, equivalent, live, blind)
        print("| " + " | ".join(map(str, cells)) + " |")
    for mutant in survivors:
        print(f"\nSURVIVED {mutant.exercise} {mutant.target} {mutant.operator}: {mutant.changed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
