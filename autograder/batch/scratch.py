"""Per-worker scratch gradebooks and autograded folders, merged into the course one submission
at a time.

nbgrader's autograde writes its gradebook many times per notebook; with sqlite only one process
may write, which made the nbgrader half of every batch serial. Each batch worker therefore
runs nbgrader's own autograde against a private sqlite gradebook holding a copy of the course's
definitions (assignments, notebooks, cells), extracts what autograde wrote for the submission
(`extract`), and the batch parent writes that into the real gradebook, any SQLAlchemy URL, in
one transaction per submission (`merge`). nbgrader's rule for manual grades is applied against
the real gradebook: a grade that was graded by hand stays flagged for review.

nbgrader's autograde writes its autograded folder into the worker's scratch too; the parent
moves it into COURSE/autograded (`place`) just before it merges the grades. A batch stopped or
killed at any moment therefore leaves every submission with the folder that matches its grades
(or, for an instant, none: the rerun regrades it); nbgrader writing there directly deleted the
folder of a submission under `--force` whose grading was then cut short.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import shutil
import uuid
from pathlib import Path

from autograder.core import faults

# The tables that define a course (never a student's work), in foreign-key order.
DEFINITIONS = (
    "course",
    "assignment",
    "notebook",
    "base_cell",
    "source_cell",
    "grade_cells",
    "solution_cells",
    "task_cells",
)


def create(main_url: str, path: Path) -> str:
    """A new sqlite gradebook at `path` with the definitions of the gradebook at `main_url`."""
    from nbgrader.api import Base
    from sqlalchemy import create_engine, insert, select

    url = f"sqlite:///{path}"
    source, target = create_engine(main_url), create_engine(url)
    try:
        Base.metadata.create_all(bind=target)
        tables = {table.name: table for table in Base.metadata.sorted_tables}
        with source.connect() as reading, target.begin() as writing:
            for name in DEFINITIONS:
                rows = [dict(row) for row in reading.execute(select(tables[name])).mappings()]
                if rows:
                    writing.execute(insert(tables[name]), rows)
    finally:
        source.dispose()
        target.dispose()
    return url


def extract(url: str, course_id: str, exercise: str, student: str) -> dict:
    """What nbgrader's autograde wrote for one submission, as plain data."""
    from nbgrader.api import Gradebook

    with Gradebook(url, course_id) as gradebook:
        submission = gradebook.find_submission(exercise, student)
        stamp = submission.timestamp
        notebooks = {}
        for notebook in submission.notebooks:
            notebooks[notebook.name] = {
                "late_submission_penalty": notebook.late_submission_penalty,
                "grades": {
                    grade.name: [grade.auto_score, bool(grade.needs_manual_grade)]
                    for grade in notebook.grades
                },
                "comments": {comment.name: comment.auto_comment for comment in notebook.comments},
            }
    return {
        "exercise": exercise,
        "student": student,
        "timestamp": stamp.isoformat() if stamp else None,
        "notebooks": notebooks,
    }


@contextlib.contextmanager
def one_transaction(gradebook):
    """nbgrader's Gradebook commits inside its helpers; within this block those commits only
    flush, and the block commits once at its end (or rolls everything back)."""
    session = gradebook.db
    session.commit = session.flush
    try:
        yield
    except BaseException:
        del session.commit
        session.rollback()
        raise
    del session.commit
    faults.reach("commit")
    session.commit()


def merge(url: str, course_id: str, extracted: dict) -> None:
    """Write one extracted submission into the gradebook at `url`, all or nothing."""
    from nbgrader.api import Gradebook

    exercise, student = extracted["exercise"], extracted["student"]
    stamp = extracted["timestamp"]
    with Gradebook(url, course_id) as gradebook, one_transaction(gradebook):
        gradebook.update_or_create_student(student)
        fields = {"timestamp": datetime.datetime.fromisoformat(stamp)} if stamp else {}
        gradebook.update_or_create_submission(exercise, student, **fields)
        for name, data in extracted["notebooks"].items():
            notebook = gradebook.find_submission_notebook(name, exercise, student)
            notebook.late_submission_penalty = data["late_submission_penalty"]
            for grade in notebook.grades:
                if grade.name not in data["grades"]:
                    continue
                auto_score, needs_manual = data["grades"][grade.name]
                grade.auto_score = auto_score
                # nbgrader's rule (SaveAutoGrades): a grade given by hand stays under review
                grade.needs_manual_grade = needs_manual or grade.manual_score is not None
            for comment in notebook.comments:
                if comment.name in data["comments"]:
                    comment.auto_comment = data["comments"][comment.name]


def place(built: Path | None, target: Path, trash: Path) -> None:
    """Make `built` (a worker's autograded folder of one submission; None: nbgrader made none)
    the folder at `target` (COURSE/autograded/STUDENT/EXERCISE): the old one is moved into
    `trash`, the new one moved in (the old one back if that fails), then the old one removed."""
    faults.reach("place")
    folder = target.parent
    if (folder.exists() or folder.is_symlink()) and not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    old = None
    if target.exists() or target.is_symlink():
        trash.mkdir(parents=True, exist_ok=True)
        old = trash / uuid.uuid4().hex
        _move(target, old)
    if built is not None:
        try:
            _move(built, target)
        except BaseException:
            if old is not None:
                _move(old, target)
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _move(source: Path, target: Path) -> None:
    """A rename, or a copy and delete across file systems."""
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.copytree(source, target, symlinks=True)
        shutil.rmtree(source)
