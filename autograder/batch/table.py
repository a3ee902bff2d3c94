"""What `attn-grade autograde` says at its end: the table (one line per submission), the item
analysis, what was not graded and why, and the exit code."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.audit import log as audit
from autograder.core.errors import EnvironmentFailure
from autograder.core.status import Status

ENVIRONMENT, GRADER = "environment", "grader"  # Outcome.failed


@dataclass(frozen=True)
class Submitted:
    exercise: str
    student: str
    path: Path


@dataclass
class Outcome:
    """What the batch table and the item analysis need of one submission."""

    reason: str | None = None  # why it was not graded, if it was not
    report: dict | None = None
    skipped: bool = False  # up to date: graded by an earlier batch
    failed: str | None = None  # not graded by this run: ENVIRONMENT (exit 5) or GRADER (exit 1)


def written_state(submission) -> str:
    """The table's `manual` column: `pending` (to grade), `review` (graded, then changed),
    the hand score once graded, `blank` (an untouched answer: zero without a look), or `-`."""
    answers = [
        grade
        for notebook in submission.notebooks
        for grade in notebook.grades
        if grade.cell_type == "markdown"
    ]
    if any(grade.needs_manual_grade for grade in answers):
        needing = [grade for grade in answers if grade.needs_manual_grade]
        return "review" if any(g.manual_score is not None for g in needing) else "pending"
    if any(grade.manual_score is not None for grade in answers):
        return f"{submission.written_score:g}/{submission.max_written_score:g}"
    return "blank" if answers else "-"


def score_table(api, submissions: Sequence[Any], notes: dict) -> str:
    """One line per submission (engine.Submitted): student, exercise, auto score, the written
    answer's state (written_state) and the note (table_notes)."""
    from nbgrader.api import Gradebook, MissingEntry

    width = max([len(item.student) for item in submissions] + [len("student")])
    rows = [f"{'student':<{width}} {'exercise':<28} {'auto':>9}  {'manual':<8}  note"]
    with Gradebook(api.coursedir.db_url, api.coursedir.course_id) as gradebook:
        for item in submissions:
            try:
                submission = gradebook.find_submission(item.exercise, item.student)
            except MissingEntry:  # a worker failed on its first grading: no row yet
                manual, auto = "-", "-"
            else:
                manual = written_state(submission)
                auto = f"{submission.code_score:g}/{submission.max_code_score:g}"
            note = notes.get((item.exercise, item.student)) or ""
            rows.append(
                f"{item.student:<{width}} {item.exercise:<28} {auto:>9}  {manual:<8}  {note}"
            )
    return "\n".join(rows)


def summarize(api, course: Path, submissions, accounting, outcomes, reports: list[dict]) -> int:
    """The batch table, the item analysis of `reports` (the whole course's: resume.course_reports)
    and the exit code: 5 when the environment failed on some submission, 1 when some could not
    be graded for another reason, else 0."""
    from autograder.core.results import GradeReport
    from autograder.report.item_analysis import format_items, write_item_analysis

    notes = table_notes(submissions, accounting.notes, outcomes)
    print(score_table(api, submissions, notes))
    for problem in accounting.problems:
        print(f"NOT GRADED   {problem}")
    graded = [GradeReport.from_dict(report) for report in reports]
    rows = write_item_analysis(graded, course / "item_analysis.csv")
    print(f"\nitem analysis of the course ({course / 'item_analysis.csv'}):")
    print(format_items(rows))
    print(f"\naudit log: {audit.log_path(course)} (`attn-grade verify` regrades from it)")
    if accounting.problems:
        print(f"submissions not graded: {len(accounting.problems)} (listed above)")
    failed = {kind: [i for i in submissions if outcomes.get(i, Outcome()).failed == kind]
              for kind in (ENVIRONMENT, GRADER)}  # fmt: skip
    if failed[GRADER]:
        print(
            f"not graded because the grader failed on them: {len(failed[GRADER])} (said "
            "above); run the batch again to grade them"
        )
    if failed[ENVIRONMENT]:
        print(
            f"attn-grade autograde: not graded because the environment failed: "
            f"{len(failed[ENVIRONMENT])} (each said above); nothing of them was recorded: "
            "run the same command again once it is fixed",
            file=sys.stderr,
        )
        return EnvironmentFailure.exit_code
    return 1 if accounting.problems or failed[GRADER] else 0


def table_notes(submissions, accounting_notes: dict, outcomes: dict) -> dict:
    """The note column of the batch table, per (exercise, student)."""
    notes = {}
    for item in submissions:
        outcome = outcomes.get(item, Outcome(reason="not graded (the batch was interrupted)"))
        note = "; ".join(filter(None, [outcome.reason, accounting_notes.get(_key(item))]))
        status = (outcome.report or {}).get("status", Status.OK)
        if status != Status.OK:  # timeout, crashed, tampered, ...: the instructor should look
            note = f"status {status}" + (f"; {note}" if note else "")
        if outcome.skipped:
            note = "; ".join(filter(None, [note, "up to date"]))
        notes[_key(item)] = note
    return notes


def stopped(name: str, signum: int, submissions: list, outcomes: dict) -> int:
    """The one line a stopped batch says, and its exit code (128 + the signal's number)."""
    graded = sum(1 for o in outcomes.values() if not o.failed and not o.skipped)
    left = sum(1 for item in submissions if item not in outcomes or outcomes[item].failed)
    print(
        f"attn-grade autograde: stopped by {name}; the {graded} submission(s) graded by this "
        f"run are kept (gradebook, autograded notebook, audit log) and {left} are not graded: "
        "run the same command again to grade them",
        file=sys.stderr,
    )
    return 128 + signum


def _key(item: Submitted) -> tuple[str, str]:
    return (item.exercise, item.student)
