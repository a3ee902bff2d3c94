"""nbgrader preprocessors that put our sandboxed checks inside `nbgrader autograde`.

The course config (written by `attn-grade build`) puts RepairSubmission first among the
sanitize preprocessors and GradeWithChecks in place of nbgrader's Execute. Both are enabled by
default (nbconvert preprocessors are not) and never raise: a notebook that cannot be graded
gets zero points and a message, and the rest of the batch goes on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from nbformat import NotebookNode, from_dict
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Instance, Unicode

from autograder.core.registry import EXERCISES
from autograder.core.results import REPORT_KEY, CheckResult, GradeReport
from autograder.core.status import Status, student_words
from autograder.grading.notebook import program_of
from autograder.grading.runner import grade_loaded
from autograder.nbgrader_plugins.page_text import language, message, words
from autograder.nbgrader_plugins.report_cell import REPORT_CELL_ID, report_html
from autograder.sandbox import isolation as sandbox_isolation

NOTES_KEY = "attn_grade_repairs"


class Handoff:
    """One submission's report across nbgrader's API: a batch worker grades the notebook in the
    sandbox first and offers the report, keyed by report_key() (used only if the sanitized
    notebook has exactly the same program); it gives the Handoff to the nbgrader app it builds
    for that submission (batch/recorder.py), which gives it to its GradeWithChecks instances;
    GradeWithChecks hands back the report it wrote. Nothing process-wide: a preprocessor of
    another app, or of plain `nbgrader autograde` (no handoff), grades the notebook itself."""

    def __init__(self, key: str, report: dict) -> None:
        self._offered: dict[str, dict] = {key: report}
        self.written: GradeReport | None = None

    def take(self, key: str) -> dict | None:
        """The offered report if `key` is its key (once); None otherwise."""
        return self._offered.pop(key, None)


def report_key(exercise: str, student: str, loaded) -> str:
    """Identifies what was graded: the exercise, the student, the program and demo cells."""
    cells = [*loaded.program, *loaded.demos.values()]
    data = json.dumps([exercise, student, [[c.label, c.source] for c in cells]])
    return hashlib.sha256(data.encode()).hexdigest()


def _plain(nb: NotebookNode) -> dict:
    return json.loads(json.dumps(nb))


class RepairSubmission(NbGraderPreprocessor):
    """Make a tampered notebook gradable: restore each known cell's nbgrader metadata from the
    gradebook, drop nbgrader metadata from duplicated or unknown cells, and say so."""

    enabled = Bool(True).tag(config=True)

    def _expected(self, resources) -> dict[str, dict]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            grades = {cell.name: float(cell.max_score) for cell in notebook.grade_cells}
            solutions = {cell.name for cell in notebook.solution_cells}
            expected = {}
            for cell in notebook.source_cells:
                metadata = {
                    "grade": cell.name in grades,
                    "grade_id": cell.name,
                    "locked": bool(cell.locked),
                    "schema_version": 3,
                    "solution": cell.name in solutions,
                    "task": False,
                    "cell_type": cell.cell_type,
                }
                if cell.name in grades:
                    metadata["points"] = grades[cell.name]
                expected[cell.name] = metadata
        return expected

    def preprocess(self, nb: NotebookNode, resources: dict):
        # The notes travel in the notebook's metadata: nbgrader sanitizes and autogrades in two
        # passes with separate resources. Anything a student put under that key is replaced.
        notes: list[str] = []
        nb.metadata[NOTES_KEY] = notes
        nb.metadata.pop(REPORT_KEY, None)
        try:
            expected = self._expected(resources)
        except (MissingEntry, KeyError) as error:
            self.log.warning("RepairSubmission: no source cells to compare with (%s)", error)
            return nb, resources
        seen: set[str] = set()
        for index, cell in enumerate(nb.cells, start=1):
            metadata = cell.get("metadata")
            if not isinstance(metadata, dict) or "nbgrader" not in metadata:
                continue
            current = metadata["nbgrader"]
            grade_id = current.get("grade_id") if isinstance(current, dict) else None
            if grade_id not in expected:
                del metadata["nbgrader"]
                notes.append(
                    f"cell {index} carried nbgrader metadata of an unknown cell "
                    f"({grade_id!r}); it is graded as your own cell"
                )
                continue
            if grade_id in seen:
                del metadata["nbgrader"]
                notes.append(
                    f"cell {index} is a copy of cell {grade_id!r}; the copy is graded "
                    "as your own cell"
                )
                continue
            seen.add(grade_id)
            want = expected[grade_id]
            if any(current.get(key) != value for key, value in want.items()):
                changed = sorted(k for k, v in want.items() if current.get(k) != v)
                notes.append(
                    f"the nbgrader metadata of cell {grade_id!r} was edited "
                    f"({', '.join(changed)}); it was restored"
                )
                metadata["nbgrader"] = {**want, "checksum": current.get("checksum", "")}
        missing = sorted(set(expected) - seen)
        if missing:
            notes.append(
                f"cells missing from the submission: {', '.join(missing)} (grade cells "
                "are put back by nbgrader)"
            )
        for note in notes:
            self.log.warning("RepairSubmission: %s", note)
        return nb, resources


class GradeWithChecks(NbGraderPreprocessor):
    """Grade the notebook with the sandboxed checks; write each grade cell's messages and its
    points (an execute_result: nbgrader's partial credit) for SaveAutoGrades."""

    enabled = Bool(True).tag(config=True)
    isolation = Unicode(
        "",
        help="sandbox isolation level: '' or 'auto' for the strongest the host offers (grading "
        "is refused when it cannot hide the hidden checks), or jail, uid, landlock, rlimits",
    ).tag(config=True)
    # Given by the app that built this preprocessor (batch/recorder.py), never by config.
    handoff = Instance(Handoff, allow_none=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        exercise = resources["nbgrader"]["assignment"]
        if exercise not in EXERCISES:  # not one of ours: run it the way nbgrader would
            return Execute(parent=self.parent, config=self.config).preprocess(nb, resources)
        if self.isolation and self.isolation != "auto":
            os.environ[sandbox_isolation.ENVIRONMENT_VARIABLE] = self.isolation
        # IsolationError refuses: nbgrader reports it, exits non-zero
        course = Path(CourseDirectory(config=self.config).root)
        sandbox_isolation.require_private(sandbox_isolation.choose(), [course])
        student = str(resources["nbgrader"].get("student", "anonymous"))
        notes = nb.metadata.pop(NOTES_KEY, [])
        notes = [str(note) for note in notes] if isinstance(notes, list) else []
        try:
            report = self._report(nb, exercise, student)
        except Exception as error:  # one notebook must never stop the batch
            self.log.exception("grading %s of %s failed", exercise, student)
            report = GradeReport(
                exercise,
                status=Status.GRADER_ERROR,
                messages=[
                    f"the autograder failed on this notebook ({error}); "
                    "your instructor has been told"
                ],
            )
        report.messages[:0] = notes
        self._write_grade_cells(nb, report)
        self._write_displays(nb, report)
        self._write_summary(nb, report)
        nb.metadata[REPORT_KEY] = report.to_dict()
        if self.handoff is not None:
            self.handoff.written = report
        return nb, resources

    def _report(self, nb: NotebookNode, exercise: str, student: str) -> GradeReport:
        loaded = program_of(_plain(nb), exercise)
        key = report_key(exercise, student, loaded)
        precomputed = self.handoff.take(key) if self.handoff is not None else None
        if precomputed is not None:
            return GradeReport.from_dict(precomputed)
        return grade_loaded(loaded, student=student, demos=True)

    @staticmethod
    def _write_grade_cells(nb: NotebookNode, report: GradeReport) -> None:
        lang = language(nb.metadata)
        by_id: dict[str, list] = {}
        for check in report.checks:
            by_id.setdefault(check.grade_id, []).append(check)
        for cell in nb.cells:
            nbgrader = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not nbgrader.get("grade"):
                continue
            checks = by_id.get(nbgrader.get("grade_id"), [])
            earned = sum(check.points for check in checks)
            lines = [_check_line(check, lang) for check in checks] or [
                words("no automatic checks belong to this cell", lang)
            ]
            if report.status != Status.OK:
                lines.append(
                    f"({words('note', lang)}: {message(student_words(report.status), lang)})"
                )
            possible = nbgrader.get("points", 0)
            total = words("points for this cell: %s of %s", lang)
            lines.append(total % (f"{earned:g}", f"{possible:g}"))
            cell.outputs = [
                from_dict(
                    {"output_type": "stream", "name": "stdout", "text": "\n".join(lines) + "\n"}
                ),
                from_dict(
                    {
                        "output_type": "execute_result",
                        "execution_count": None,
                        "metadata": {},
                        "data": {"text/plain": f"{earned:g}"},
                    }
                ),
            ]

    @staticmethod
    def _write_displays(nb: NotebookNode, report: GradeReport) -> None:
        """Demo cells get the outputs of their run in the sandbox (never the submitted ones)."""
        for cell in nb.cells:
            nbgrader = cell.get("metadata", {}).get("nbgrader", {})
            grade_id = nbgrader.get("grade_id")
            if cell.cell_type == "code" and grade_id in report.displays:
                cell.outputs = [from_dict(output) for output in report.displays[grade_id]]

    @staticmethod
    def _write_summary(nb: NotebookNode, report: GradeReport) -> None:
        text = report_html(report, language(nb.metadata))
        cells = [c for c in nb.cells if c.get("id") == REPORT_CELL_ID]
        if cells:
            cells[0].source = text
            return
        cell = from_dict({"cell_type": "markdown", "metadata": {}, "source": text})
        if (nb.nbformat, nb.nbformat_minor) >= (4, 5):
            cell["id"] = REPORT_CELL_ID
        nb.cells.insert(0, cell)


def _check_line(check: CheckResult, lang: str) -> str:
    """CheckResult.feedback() in the notebook's language (page_text.py): its words and its
    message (English in results.json and the gradebook, the record)."""
    shown = dataclasses.replace(check, message=message(check.message, lang))
    return shown.feedback(words("passed", lang), words("FAILED", lang))
