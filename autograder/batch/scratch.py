"""Per-worker scratch gradebooks and autograded folders, merged into the course one submission
at a time.

nbgrader's autograde writes its gradebook many times per notebook; with sqlite only one process
may write, which made the nbgrader half of every batch serial. Each batch worker therefore
runs nbgrader's own autograde against a private sqlite gradebook holding a copy of the course's
definitions (assignments, notebooks, cells), extracts what autograde wrote for the submission
(`extract`), and the batch parent writes that into the real gradebook, any SQLAlchemy URL, in
one transaction per submission (`merge`).

A hand grade survives every regrade. A written answer's hand grade is flagged for review only
when the answer's text changed (`review_due`): nbgrader's own rule flags every hand grade at
every autograde, so a regrade of the code alone, or of nothing, told the student that their
answer had changed. The text is the answer cell's source in the submitted notebook, kept as a
SHA-256 (`answer_digests`) in each submission's audit record (`answers`), which is appended
only after the gradebook merge: the newest record holds the text the autograded notebook shows,
the one formgrader showed when the grade was given. Without a digest to compare (a record from
before this rule, an unreadable notebook, a missing cell) the grade is flagged, as nbgrader does;
a flag, once set, stays until the instructor grades again (formgrader clears it), and a hand
grade of an automatic check keeps nbgrader's rule.

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
import hashlib
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


def answer_digests(path: Path, names: set[str]) -> dict[str, str | None]:
    """grade id -> the SHA-256 of the text of each of the written answers `names` in the
    notebook at `path` (its first cell of that id, as autograde keeps the first); None for an
    answer missing, or in a notebook that cannot be read."""
    from autograder.grading.notebook import InvalidNotebook, read_json

    found: dict[str, str | None] = dict.fromkeys(sorted(names))
    try:
        cells = read_json(path)["cells"]
    except (InvalidNotebook, OSError):
        return found
    for cell in cells:
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
        name = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        if not isinstance(name, str) or name not in names or found[name] is not None:
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(part for part in source if isinstance(part, str))
        text = str(source)
        found[name] = hashlib.sha256(text.encode()).hexdigest()
    return found


def review_due(flagged: bool, answer: bool, digest: str | None, graded: str | None) -> bool:
    """Whether a grade given by hand is (still) under review after a regrade: `flagged`, it
    already was; `answer`, it grades a written answer whose text has the SHA-256 `digest` now
    and had `graded` at the last grading recorded (None: not known). Module doc."""
    if flagged or not answer:
        return True
    return digest is None or digest != graded


def extract(url: str, course_id: str, exercise: str, student: str, path: str | None = None) -> dict:
    """What nbgrader's autograde wrote for one submission, as plain data, with the digests of
    its written answers' text in the notebook at `path` (`answers`)."""
    from nbgrader.api import Gradebook

    with Gradebook(url, course_id) as gradebook:
        submission = gradebook.find_submission(exercise, student)
        stamp = submission.timestamp
        notebooks = {}
        answers: set[str] = set()
        for notebook in submission.notebooks:
            # nbgrader keeps a comment for each solution cell: a graded one is a written answer
            answers |= {c.name for c in notebook.comments} & {g.name for g in notebook.grades}
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
        "answers": answer_digests(Path(path), answers) if path else dict.fromkeys(answers),
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


def merge(url: str, course_id: str, extracted: dict, graded: dict | None = None) -> None:
    """Write one extracted submission into the gradebook at `url`, all or nothing; `graded`:
    the digests of the written answers' text at the last grading recorded (the audit log's)."""
    from nbgrader.api import Gradebook

    exercise, student = extracted["exercise"], extracted["student"]
    stamp = extracted["timestamp"]
    digests, graded = extracted.get("answers") or {}, graded if isinstance(graded, dict) else {}
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
                if grade.manual_score is None:
                    grade.needs_manual_grade = needs_manual
                else:  # given by hand: kept, and looked at again only if its text changed
                    grade.needs_manual_grade = review_due(
                        bool(grade.needs_manual_grade),
                        grade.name in digests,
                        digests.get(grade.name),
                        graded.get(grade.name),
                    )
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
