"""The batch table `attn-grade autograde` prints: one line per submission."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
    answer's state (written_state) and the note (engine.table_notes)."""
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
