"""An exercise's grades as an LMS export and the report read them: final or not.

- Each score is the gradebook's after the late penalty of the final score, hand grades included
  (`nbgrader_plugins/late_penalty.py` settles it first).
- A grade is final when nothing waits for anyone (`unfinished`): no answer waits for its first
  hand grade, no hand grade is under review (its answer changed after it was given), and the
  notebook in `submitted/` is the one that was autograded (not handed in again since, not
  waiting for its first autograde).
"""

from __future__ import annotations

import datetime
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Grade:
    """One student's grade for one exercise (every notebook of it)."""

    student: str
    raw: float  # auto and hand points, before the late penalty
    penalty: float
    max_score: float
    timestamp: datetime.datetime | None  # submission time (UTC)
    seconds_late: float  # past the due date, the student's extension included

    @property
    def score(self) -> float:
        """What the student gets: the raw score less the late penalty, never below 0."""
        return max(0.0, self.raw - self.penalty)


def exercise_grades(gradebook, config, exercise: str) -> dict[str, Grade]:
    """student id -> Grade, for every submission of the exercise in the gradebook, the late
    penalties settled first (`config`: the course's nbgrader config, which names the plugin)."""
    from autograder.nbgrader_plugins.late_penalty import settle_late_penalties

    settle_late_penalties(gradebook, config, exercise)
    found = {}
    for submission in gradebook.assignment_submissions(exercise):
        found[submission.student.id] = Grade(
            student=submission.student.id,
            raw=float(submission.score or 0.0),
            penalty=float(submission.late_submission_penalty or 0.0),
            max_score=float(submission.max_score or 0.0),
            timestamp=_naive_utc(submission.timestamp),
            seconds_late=float(submission.total_seconds_late),
        )
    return found


def unfinished(gradebook, coursedir, exercise: str, students: Collection[str]) -> dict[str, str]:
    """student id -> what still waits before the student's grade is final (module doc), for
    those of `students` whose grade is not."""
    from nbgrader.api import MissingEntry

    handed_in = _handed_in(Path(coursedir.root), exercise)
    waiting = {}
    for student in sorted(students):
        try:
            submission = gradebook.find_submission(exercise, student)
        except MissingEntry:
            if student in handed_in:
                waiting[student] = "handed in, not autograded yet (attn-grade autograde)"
            continue
        if student in handed_in and handed_in[student] != _naive_utc(submission.timestamp):
            waiting[student] = "handed in again after it was autograded (attn-grade autograde)"
            continue
        first: list[str] = []
        review: list[str] = []
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                if grade.needs_manual_grade:
                    (first if grade.manual_score is None else review).append(grade.name)
        reasons = []
        if first:
            reasons.append(f"not graded by hand yet: {', '.join(sorted(first))}")
        if review:
            reasons.append(
                "hand grade under review (the answer changed after it was given): "
                + ", ".join(sorted(review))
            )
        if reasons:
            waiting[student] = "; ".join(reasons)
    return waiting


def _handed_in(course: Path, exercise: str) -> dict[str, datetime.datetime | None]:
    """student id -> the submission time (timestamp.txt, which autograde copies into the
    gradebook) of each notebook in submitted/ that autograde would grade (`submitted.account`,
    which reads the tree without following links)."""
    from nbgrader.utils import parse_utc

    from autograder.course.submitted import account

    found = account(course, [exercise], copy=False)
    times: dict[str, datetime.datetime | None] = {}
    for _, student, path in found.found:
        stamp = path.parent / "timestamp.txt"
        try:
            when = None if stamp in found.refused else parse_utc(stamp.read_text().strip())
        except (OSError, ValueError, OverflowError):
            when = None
        times[student] = _naive_utc(when)
    return times


def _naive_utc(when: datetime.datetime | None) -> datetime.datetime | None:
    """`when` as naive UTC (the gradebook keeps naive UTC; timestamp.txt may carry a zone)."""
    if when is None or when.tzinfo is None:
        return when
    return when.astimezone(datetime.UTC).replace(tzinfo=None)
