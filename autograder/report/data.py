"""What a batch leaves behind, read back as plain data objects for the report.

Sources, all under the course directory: the gradebook (scores, the manual-grading backlog),
the autograded notebooks (the per-check report GradeWithChecks stores in their metadata),
the submitted notebooks (the code each student wrote) and the release (the starter code).
Everything that comes from a notebook is untrusted: it is type-checked here and escaped when
the page is rendered.
"""

from __future__ import annotations

import ast
import difflib
import io
import math
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.registry import EXERCISES
from autograder.core.results import (
    AUTO_POINTS,
    MANUAL_POINTS,
    REPORT_KEY,
    CheckResult,
    GradeReport,
)
from autograder.core.status import Status
from autograder.grading.notebook import InvalidNotebook, read_json
from autograder.notebooks.render import cell_roles


@dataclass(frozen=True)
class Graded:
    """One submission of one exercise, as the batch graded it."""

    exercise: str
    student: str
    status: str
    checks: tuple[CheckResult, ...] = ()
    messages: tuple[str, ...] = ()
    score: float = 0.0  # auto-graded points (the gradebook's when there is one)
    max_score: float = AUTO_POINTS
    manual_pending: bool = False


@dataclass
class Batch:
    """Everything the report shows, per exercise in course order."""

    submissions: list[Graded] = field(default_factory=list)
    code: dict[tuple[str, str], str] = field(default_factory=dict)  # (exercise, student) -> code
    starter: dict[str, str] = field(default_factory=dict)  # exercise -> the release's code
    mistake_words: dict[tuple[str, str], str] = field(default_factory=dict)
    manual_points: float = MANUAL_POINTS

    def exercises(self) -> list[str]:
        present = {s.exercise for s in self.submissions}
        known = [e for e in EXERCISES if e in present]
        return known + sorted(present - set(known))


def _text(value: object, limit: int = 2000) -> str:
    return str(value)[:limit]


def _number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def report_from_metadata(notebook: dict) -> GradeReport | None:
    """The report GradeWithChecks stored in an autograded notebook, if it is well formed."""
    metadata = notebook.get("metadata")
    stored = metadata.get(REPORT_KEY) if isinstance(metadata, dict) else None
    if not isinstance(stored, dict) or not isinstance(stored.get("checks"), list):
        return None
    checks = []
    for item in stored["checks"]:
        if not isinstance(item, dict):
            return None
        mistake = item.get("mistake")
        checks.append(
            CheckResult(
                name=_text(item.get("name"), 200),
                grade_id=_text(item.get("grade_id"), 200),
                max_points=_number(item.get("max_points")),
                passed=item.get("passed") is True,
                message=_text(item.get("message", "")),
                mistake=_text(mistake, 200) if mistake else None,
            )
        )
    stored_messages = stored.get("messages")
    messages = stored_messages if isinstance(stored_messages, list) else []
    return GradeReport(
        exercise=_text(stored.get("exercise"), 100),
        status=_text(stored.get("status") or Status.CRASHED, 50),
        checks=checks,
        messages=[_text(m) for m in messages[:50]],
    )


def _load_notebook(path: Path) -> dict | None:
    try:
        return read_json(path)
    except (InvalidNotebook, OSError):
        return None


def _unreadable(path: Path) -> str | None:
    try:
        read_json(path)
    except InvalidNotebook as error:
        return str(error)
    except OSError as error:
        return f"the file cannot be read ({error.strerror})"
    return None


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def _grade_id(cell: dict) -> str | None:
    metadata = cell.get("metadata")
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def _tokenizes(code: str) -> bool:
    """Whether Python's tokenizer reads the code to the end (nothing is run)."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(code).readline):
            pass
    except (tokenize.TokenError, SyntaxError, ValueError):  # IndentationError is a SyntaxError
        return False
    return True


def _parses(code: str) -> bool:
    """Whether the code, dedented, is valid Python syntax (parsed only: never compiled or run)."""
    try:
        ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def without_stub(code: str, stub: str) -> str:
    """The cell without the lines it shares, in order, with the release's stub (signature,
    docstring, `raise NotImplementedError()`). When what is left is not valid Python although
    the cell was (a docstring the student edited, say), the cell is kept whole: the release's
    fingerprints are discarded by the comparison anyway."""
    if not stub.strip():
        return code
    lines, stub_lines = code.splitlines(), stub.splitlines()
    matcher = difflib.SequenceMatcher(None, lines, stub_lines, autojunk=False)
    drop: set[int] = set()
    for block in matcher.get_matching_blocks():
        drop.update(range(block.a, block.a + block.size))
    kept = "\n".join(line for i, line in enumerate(lines) if i not in drop)
    if not kept.strip():
        return ""
    if _parses(kept) or (not _parses(code) and _tokenizes(kept)):
        return kept
    return code


MAX_CELL_CODE = 100_000  # characters of one cell compared (bounded work on hostile input)
MAX_WRITTEN_CODE = 400_000  # characters of one submission compared


def written_code(notebook: dict, exercise: str, stubs: dict[str, str]) -> str:
    """The code a student wrote: solution cells (stub lines removed) and cells they added;
    not our setup, check or demo cells."""
    roles = cell_roles(exercise)
    parts = []
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        grade_id = _grade_id(cell)
        role = roles.get(grade_id, "student") if grade_id else "student"
        if role not in ("solution", "student"):
            continue
        code = without_stub(_source(cell)[:MAX_CELL_CODE], stubs.get(grade_id or "", ""))
        if code.strip():
            parts.append(code.rstrip() + "\n")
    return "\n".join(parts)[:MAX_WRITTEN_CODE]


def release_cells(course: Path, exercise: str) -> tuple[dict[str, str], str]:
    """(solution grade id -> stub source, all code of the release) from the course's release."""
    release = _load_notebook(course / "release" / exercise / f"{exercise}.ipynb")
    if release is None:
        return {}, ""
    roles = cell_roles(exercise)
    stubs, code = {}, []
    for cell in release["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            grade_id = _grade_id(cell)
            code.append(_source(cell))
            if grade_id and roles.get(grade_id) == "solution":
                stubs[grade_id] = _source(cell)
    return stubs, "\n".join(code)


def _gradebook_rows(course: Path, exercises: list[str]) -> dict[tuple[str, str], dict]:
    """(exercise, student) -> auto score, manual backlog, "Not graded" note, from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.course.api import nbgrader_api

    rows: dict[tuple[str, str], dict] = {}
    with Gradebook(nbgrader_api(course).coursedir.db_url) as gradebook:
        for exercise in exercises:
            try:
                submissions = gradebook.assignment_submissions(exercise)
            except MissingEntry:
                continue
            for submission in submissions:
                notes = [
                    comment.auto_comment
                    for notebook in submission.notebooks
                    for comment in notebook.comments
                    if (comment.auto_comment or "").startswith("Not graded:")
                ]
                rows[(exercise, submission.student.id)] = {
                    "score": float(submission.code_score or 0),
                    "max_score": float(submission.max_code_score or AUTO_POINTS),
                    "manual_pending": bool(submission.needs_manual_grade),
                    "note": notes[0] if notes else None,
                }
    return rows


def _mistake_words(exercise: str) -> dict[tuple[str, str], str]:
    from autograder.authoring.catalogue import catalogue_for

    return {(exercise, m.id): m.description for m in catalogue_for(exercise)}


def load_batch(course: Path) -> Batch:
    """Read a graded course: every submitted notebook of our exercises."""
    course = Path(course).resolve()
    paths = {e: sorted((course / "submitted").glob(f"*/{e}/{e}.ipynb")) for e in EXERCISES}
    exercises = [e for e in EXERCISES if paths[e]]
    book = _gradebook_rows(course, exercises)
    batch = Batch()
    for exercise in exercises:
        stubs, batch.starter[exercise] = release_cells(course, exercise)
        for path in paths[exercise]:
            student = path.parent.parent.name
            batch.submissions.append(_graded(course, exercise, student, path, book))
            notebook = _load_notebook(path)
            if notebook is not None:
                batch.code[(exercise, student)] = written_code(notebook, exercise, stubs)
    # the catalogues import the reference (and torch): only for exercises with named mistakes
    for exercise in {s.exercise for s in batch.submissions if any(c.mistake for c in s.checks)}:
        batch.mistake_words.update(_mistake_words(exercise))
    return batch


def _graded(course: Path, exercise: str, student: str, path: Path, book: dict) -> Graded:
    row = book.get((exercise, student), {})
    autograded = course / "autograded" / student / exercise / f"{exercise}.ipynb"
    notebook = _load_notebook(autograded) if autograded.is_file() else None
    report = report_from_metadata(notebook) if notebook is not None else None
    if report is not None:
        status, checks, messages = report.status, tuple(report.checks), tuple(report.messages)
        score = row.get("score", report.score)
    else:
        reason = _unreadable(path)
        status = Status.INVALID_NOTEBOOK if reason else Status.NOT_GRADED
        reason = reason or row.get("note") or "no autograder report stored for this submission"
        checks, messages, score = (), (reason,), row.get("score", 0.0)
    return Graded(
        exercise=exercise,
        student=student,
        status=str(status),
        checks=checks,
        messages=messages,
        score=float(score),
        max_score=row.get("max_score", AUTO_POINTS),
        manual_pending=row.get("manual_pending", False),
    )
