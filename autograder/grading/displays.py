"""What the student's demo cells show (printed numbers, plots, training curves), for hand grading.

The demo cells run in a fresh sandbox after the checks, with the same limits and a budget of
their own; outputs of the submitted notebook are never used (a student could fake them). What
the child sends back is untrusted: only text and PNG images pass, each checked and bounded, and
they become nbformat outputs of the autograded notebook (nbconvert escapes text in HTML).
"""

from __future__ import annotations

import ast
import re
import time

from autograder.grading.budget import Budget
from autograder.grading.notebook import ProgramCell
from autograder.grading.outputs import MAX_NOTEBOOK_PNG_BYTES, clean_text, note, png_bytes
from autograder.grading.submission import StudentError, Submission, Unavailable
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import SandboxDied


def names_used(source: str) -> set[str]:
    """The names a cell's code refers to (every identifier when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(re.findall(r"[A-Za-z_]\w*", source))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


DEMO_BUDGET = Budget(cell_timeout=60.0, call_timeout=60.0, max_restarts=1, total_seconds=120.0)


def run_demos(
    program: list[ProgramCell],
    demos: dict[str, ProgramCell],
    limits: Limits | None = None,
    budget: Budget = DEMO_BUDGET,
    submission: Submission | None = None,
) -> dict[str, list[dict]]:
    """grade id of each demo cell -> its outputs: the demo cells in order, after the program,
    in `submission`'s sandbox once its checks are done (or in a fresh one), each within the
    demo budget; a cell past the budget or after a crash says so instead."""
    if submission is None:
        with Submission(program, limits or Limits(), budget) as fresh:
            return run_demos(program, demos, budget=budget, submission=fresh)
    shown: dict[str, list[dict]] = {}
    started, png_total = time.monotonic(), 0
    for grade_id, cell in demos.items():
        left = budget.total_seconds - (time.monotonic() - started)
        if left < 1:
            shown[grade_id] = [
                note(f"not run: the {budget.total_seconds:g} s for demo cells are spent")
            ]
            continue
        stuck = sorted(names_used(cell.source) & submission.stuck_functions().keys())
        if stuck:
            calls = ", ".join(f"{name}()" for name in stuck)
            shown[grade_id] = [
                note(f"not run: it calls {calls}, which stopped the notebook's process earlier")
            ]
            continue
        try:
            outputs = submission.display(cell, timeout=min(budget.cell_timeout, left))
        except SandboxDied as died:
            outputs = [note(f"this cell stopped the notebook ({died.status}: {died.detail})")]
        except (Unavailable, StudentError) as error:
            outputs = [note(f"not run: {clean_text(str(error), 500)}")]
        size = png_bytes(outputs)
        if png_total + size > MAX_NOTEBOOK_PNG_BYTES:
            outputs = [o for o in outputs if "image/png" not in o.get("data", {})]
            outputs.append(note("figures left out: the notebook's figures are too large"))
            size = 0
        png_total += size
        shown[grade_id] = outputs
    return shown
