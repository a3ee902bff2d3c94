"""`attn-grade autograde`: grade every submitted notebook of a course, in parallel, through
nbgrader's own autograde.

Phase 1 grades the notebooks with the sandboxed checks in N worker processes (the expensive
part). Phase 2 runs nbgrader's autograde for each submission, one at a time (the gradebook is
written by one process only); its GradeWithChecks preprocessor takes the phase-1 report when
the sanitized notebook has the same program, and grades it itself otherwise, so the results
are those of a serial run.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from autograder.exercises import EXERCISES
from autograder.nbgrader_bridge.course_api import CourseError, nbgrader_api
from autograder.nbgrader_bridge.item_analysis import format_items, write_item_analysis


@dataclass(frozen=True)
class Submitted:
    exercise: str
    student: str
    path: Path


def find_submissions(course: Path, exercises: list[str]):
    """The gradable submissions, and an account of every other file (submitted.py)."""
    from autograder.nbgrader_bridge.submitted import account

    accounting = account(course, exercises)
    return [Submitted(*item) for item in accounting.found], accounting


def precompute(exercise: str, student: str, path: str) -> tuple[str | None, dict | None, str]:
    """Worker: (key, report, "") for a readable notebook, (None, None, reason) otherwise."""
    from autograder.grading.notebook import InvalidNotebook, program_of, read_json
    from autograder.grading.runner import grade_loaded
    from autograder.nbgrader_bridge.preprocessors import report_key

    try:
        loaded = program_of(read_json(Path(path)), exercise)
    except InvalidNotebook as error:
        return None, None, str(error)
    report = grade_loaded(loaded, student=student, demos=True)
    return report_key(exercise, student, loaded), report.to_dict(), ""


def unreadable_reason(path: Path) -> str | None:
    """Why nbgrader cannot even open this notebook (None when it can)."""
    from autograder.grading.notebook import InvalidNotebook, read_json

    try:
        read_json(path)
    except InvalidNotebook as error:
        return str(error)
    return None


def precompute_in_parallel(submissions: list[Submitted], workers: int) -> None:
    """Phase 1: grade in worker processes; reports go to GradeWithChecks' PRECOMPUTED."""
    from autograder.nbgrader_bridge import preprocessors

    progress = Progress(len(submissions), "grading ")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(precompute, s.exercise, s.student, str(s.path)): s for s in submissions
        }
        for future in as_completed(futures):
            item = futures[future]
            try:
                key, report, reason = future.result()
            except Exception as error:  # noqa: BLE001 - phase 2 grades it again, records failures
                key, report, reason = None, None, f"worker failed ({type(error).__name__})"
            if key is None:
                progress.step(f"{item.student}/{item.exercise}: {reason}")
                continue
            preprocessors.PRECOMPUTED[key] = report
            score = sum(c["max_points"] for c in report["checks"] if c["passed"])
            progress.step(f"{item.student}/{item.exercise}: {score:g}/8")


class Progress:
    def __init__(self, total: int, label: str):
        self.total, self.done, self.label = total, 0, label
        self.started = time.monotonic()

    def step(self, text: str) -> None:
        self.done += 1
        width = 24
        filled = width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (width - filled)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {text}"
        end = "\r" if sys.stderr.isatty() and self.done < self.total else "\n"
        print(line.ljust(100)[:100], end=end, file=sys.stderr, flush=True)


def zero_grades(api, exercise: str, student: str, reason: str) -> None:
    """A notebook nbgrader could not process still gets a (zero) grade and no manual flag."""
    from nbgrader.api import Gradebook

    with Gradebook(api.coursedir.db_url) as gradebook:
        gradebook.update_or_create_student(student)  # a student whose only notebook is broken
        gradebook.update_or_create_submission(exercise, student)
        notebook = gradebook.find_submission_notebook(exercise, exercise, student)
        for grade in notebook.grades:
            grade.auto_score = 0.0
            grade.needs_manual_grade = False
        for comment in notebook.comments:
            comment.auto_comment = f"Not graded: {reason}"
        gradebook.db.commit()


def autograde_course(
    course: Path, exercises: list[str] | None = None, workers: int = 2, db_url: str | None = None
) -> int:
    """Autograde all submissions; print a table. Returns the process exit code."""
    from autograder.nbgrader_bridge import preprocessors

    try:
        api = nbgrader_api(course, db_url)
    except CourseError as error:
        print(f"attn-grade autograde: {error}", file=sys.stderr)
        return 2
    submissions, accounting = find_submissions(Path(course), exercises or list(EXERCISES))
    for problem in accounting.problems:
        print(f"attn-grade autograde: {problem}", file=sys.stderr)
    if not submissions:
        print("attn-grade autograde: no submitted notebooks (run `nbgrader collect`?)")
        return 1 if accounting.problems else 0
    unreadable = {
        (s.exercise, s.student): reason
        for s in submissions
        if (reason := unreadable_reason(s.path))
    }
    readable = [s for s in submissions if (s.exercise, s.student) not in unreadable]
    if workers > 1 and readable:
        precompute_in_parallel(readable, workers)
    progress = Progress(len(submissions), "nbgrader")
    outcomes = {}
    for item in submissions:
        reason = unreadable.get((item.exercise, item.student))
        if reason is None:
            result = api.autograde(item.exercise, item.student, force=True, create=True)
            if not result.get("success"):
                reason = "nbgrader could not process the notebook (see the log)"
                print(result.get("error") or result.get("log", ""), file=sys.stderr)
        if reason is not None:
            zero_grades(api, item.exercise, item.student, reason)
        outcomes[(item.exercise, item.student)] = reason
        progress.step(f"{item.student}/{item.exercise}" + (f": {reason}" if reason else ""))
    preprocessors.PRECOMPUTED.clear()
    for key, note in accounting.notes.items():
        outcomes[key] = "; ".join(filter(None, [outcomes.get(key), note]))
    print(score_table(api, submissions, outcomes))
    for problem in accounting.problems:
        print(f"NOT GRADED   {problem}")
    rows = write_item_analysis(preprocessors.GRADED, Path(course) / "item_analysis.csv")
    preprocessors.GRADED.clear()
    preprocessors.STATUSES.clear()
    print(f"\nitem analysis ({Path(course) / 'item_analysis.csv'}):")
    print(format_items(rows))
    if accounting.problems:
        print(f"submissions not graded: {len(accounting.problems)} (listed above)")
    return 1 if accounting.problems else 0


def score_table(api, submissions: list[Submitted], outcomes: dict) -> str:
    from nbgrader.api import Gradebook

    from autograder.nbgrader_bridge import preprocessors

    width = max([len(item.student) for item in submissions] + [len("student")])
    rows = [f"{'student':<{width}} {'exercise':<28} {'auto':>9}  {'manual':<8}  note"]
    with Gradebook(api.coursedir.db_url) as gradebook:
        for item in submissions:
            submission = gradebook.find_submission(item.exercise, item.student)
            manual = "pending" if submission.needs_manual_grade else "-"
            note = outcomes.get((item.exercise, item.student)) or ""
            status = preprocessors.STATUSES.get((item.exercise, item.student), "ok")
            if status != "ok":  # timeout, crashed, tampered, ...: the instructor should look
                note = f"status {status}" + (f"; {note}" if note else "")
            auto = f"{submission.code_score:g}/{submission.max_code_score:g}"
            rows.append(
                f"{item.student:<{width}} {item.exercise:<28} {auto:>9}  {manual:<8}  {note}"
            )
    return "\n".join(rows)
