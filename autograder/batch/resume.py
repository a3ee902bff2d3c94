"""What an earlier batch already did: the submissions whose grading is up to date.

A submission is up to date when its newest audit record is of these very bytes, with these
checks, this grader and this isolation level, and both the gradebook and the autograded folder
still say what the record says: the gradebook holds the submission with the record's score (an
older backup restored, or an edit, is regraded), and the autograded notebook holds its report
(unless the record says the notebook cannot be read, and it still cannot).
"""

from __future__ import annotations

import math
from pathlib import Path

from autograder.audit import log as audit
from autograder.audit.gradebook import auto_score, gradebook_name
from autograder.batch.retry import retrying
from autograder.core.status import Status


def autograded_path(api, exercise: str, student: str) -> Path:
    folder = api.coursedir.format_path(api.coursedir.autograded_directory, student, exercise)
    return Path(folder) / f"{exercise}.ipynb"


def stored_report(path: Path) -> dict | None:
    """The report GradeWithChecks stored in an autograded notebook (None if there is none)."""
    from autograder.grading.notebook import InvalidNotebook, read_json
    from autograder.report.data import report_from_metadata

    try:
        report = report_from_metadata(read_json(path))
    except (InvalidNotebook, OSError):
        return None
    return report.to_dict() if report is not None else None


def unreadable(path: Path, exercise: str) -> bool:
    """Whether the notebook cannot be graded as the exercise's (as the batch reads it)."""
    from autograder.grading.notebook import InvalidNotebook, program_of, read_json

    try:
        program_of(read_json(path), exercise)
    except InvalidNotebook:
        return True
    return False


def agrees(submission, record: dict) -> bool:
    return math.isclose(auto_score(submission), float(record["score"]), abs_tol=1e-6)


def read_gradebook(api, read):
    """`read(gradebook)` on the course's gradebook: a database that is away is retried, one
    that cannot be read or stays away is an EnvironmentFailure naming it."""
    from nbgrader.api import Gradebook

    url = api.coursedir.db_url

    def attempt():
        with Gradebook(url, api.coursedir.course_id) as gradebook:
            return read(gradebook)

    return retrying(attempt, f"reading the gradebook {gradebook_name(url)}")


def up_to_date(api, submissions: list, level: str) -> dict:
    """Submitted -> engine.Outcome for each submission an earlier batch graded (see above)."""
    from nbgrader.api import MissingEntry

    from autograder.audit.digest import checks_digest
    from autograder.batch.table import Outcome
    from autograder.core.versions import grader_version

    latest = audit.read_warning(Path(api.coursedir.root), "autograde").latest()
    candidates = []
    for item in submissions:
        record = latest.get((item.exercise, item.student))
        if record is None or record.get("isolation") != level:
            continue
        same = {"checks_sha256": checks_digest(item.exercise), "grader_version": grader_version()}
        if any(record.get(key) != value for key, value in same.items()):
            continue
        if record["status"] == Status.GRADER_ERROR:  # the grader failed: always try again
            continue
        if record["notebook_sha256"] != audit.sha256_file(item.path):
            continue
        candidates.append((item, record))

    def in_gradebook(gradebook) -> list:
        found = []
        for item, record in candidates:
            try:
                submission = gradebook.find_submission(item.exercise, item.student)
            except MissingEntry:
                continue
            if agrees(submission, record):
                found.append((item, record))
        return found

    done = {}
    for item, record in read_gradebook(api, in_gradebook):
        report = stored_report(autograded_path(api, item.exercise, item.student))
        if report is None and not (
            record["status"] == Status.INVALID_NOTEBOOK and unreadable(item.path, item.exercise)
        ):
            continue
        reason = None if report is not None else "not graded (see the audit log)"
        done[item] = Outcome(reason=reason, report=report, skipped=True)
    return done


def course_reports(api, course: Path, outcomes: dict) -> list[dict]:
    """The reports the item analysis counts: the whole course's, never only this run's (a run
    of one exercise or one student's regrade left the file with theirs alone). Each submission
    in `submitted/` of every exercise, in course order: as this run left it (`outcomes`; one
    it could not grade is left out), else as its autograded notebook records it."""
    from autograder.core.registry import EXERCISES
    from autograder.course.submitted import account

    ran = {(item.exercise, item.student): outcome.report for item, outcome in outcomes.items()}
    found = account(course, list(EXERCISES), copy=False).found
    reports = []
    for exercise, student, _ in found:
        if (exercise, student) in ran:
            report = ran[(exercise, student)]
        else:
            report = stored_report(autograded_path(api, exercise, student))
        if report:
            reports.append(report)
    return reports
