"""Who the students are and when they handed in, for the report's last section.

- Names: a student of an LMS download is known by an LMS id (Canvas's user id 10002, Moodle's
  participant id 20003). Each is shown with the gradebook's name (a roster the instructor
  imported, or the name zip_collect recorded from Moodle) and the name each LMS download
  showed (Moodle's full name, Canvas's login), read from what zip_collect recorded beside the
  download (`lms_students.json`).
- Late submissions: each submission past its due date (the student's extension included),
  with the late penalty of its final score, hand grades included (`late_penalty.py`, settled
  here as everywhere a total is shown), the score after it, and whether it is final yet.
Everything here came through a download or the gradebook: the page escapes it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Named:
    student: str
    gradebook: str  # the gradebook's first and last name, "" when it has none
    lms: str  # "canvas: kimminjun · moodle: 김민준", "" when no download named the student


@dataclass(frozen=True)
class Late:
    exercise: str
    student: str
    handed_in: str  # UTC
    due: str  # UTC, the student's extension included
    late_by: str
    raw: float  # auto and hand points
    penalty: float
    score: float
    max_score: float
    waiting: str = ""  # what still waits before the grade is final ("" when it is)


@dataclass
class Roster:
    names: list[Named] = field(default_factory=list)
    late: list[Late] = field(default_factory=list)
    rule: str = ""  # the course's late-penalty rule


def _when(moment: datetime.datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "—"


def late_by(seconds: float) -> str:
    """A duration for a person: "2 d 3 h", "5 h 30 min", "12 min", "40 s"."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes = rest // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{seconds} s"


def _download_names(api, exercise: str) -> dict[str, dict[str, str]]:
    """lms -> student id -> the name that LMS's download showed, for one exercise."""
    from nbgrader.apps.zipcollectapp import ZipCollectApp

    from autograder.nbgrader_plugins.lms_files import recorded_names
    from autograder.nbgrader_plugins.lms_return import downloaded_names

    api.coursedir.assignment_id = exercise
    collect = ZipCollectApp(config=api.config, coursedir=api.coursedir)
    download = Path(collect._format_collect_path(collect.extracted_directory)).parent
    return {lms: downloaded_names(found) for lms, found in recorded_names(download).items()}


def load_roster(course: Path, exercises: list[str], students: set[str]) -> Roster:
    """The names of `students` and the late submissions of `exercises` in the course."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.course.api import nbgrader_api
    from autograder.course.grades import exercise_grades, unfinished
    from autograder.nbgrader_plugins.late_penalty import describe
    from autograder.nbgrader_plugins.names import full_name

    api = nbgrader_api(course)
    coursedir = api.coursedir
    roster = Roster(rule=describe(api.config))
    shown: dict[str, dict[str, str]] = {}
    with Gradebook(coursedir.db_url, course_id=coursedir.course_id) as gradebook:
        for exercise in exercises:
            for lms, names in _download_names(api, exercise).items():
                for student, name in names.items():
                    if name:  # Canvas keeps no login of a Hangul-only name
                        shown.setdefault(student, {}).setdefault(lms, name)
            grades = exercise_grades(gradebook, api.config, exercise)
            late = {s: g for s, g in grades.items() if g.seconds_late > 0}
            waiting = unfinished(gradebook, coursedir, exercise, late)
            for student, grade in sorted(late.items()):
                due = gradebook.find_submission(exercise, student).duedate
                roster.late.append(
                    Late(exercise, student, _when(grade.timestamp), _when(due),
                         late_by(grade.seconds_late), grade.raw, grade.penalty, grade.score,
                         grade.max_score, waiting.get(student, ""))
                )  # fmt: skip
        for student in sorted(students):
            try:
                known = gradebook.find_student(student)
                name = full_name(known.first_name, known.last_name)
            except MissingEntry:
                name = ""
            lms = " · ".join(f"{k}: {v}" for k, v in sorted(shown.get(student, {}).items()))
            roster.names.append(Named(student, name, lms))
    return roster
