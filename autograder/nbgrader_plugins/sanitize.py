"""Student-written text in the autograded notebook, which formgrader renders with nbgrader's own
templates in the instructor's Jupyter session (its markdown uncleaned, MathJax over the page):
`SanitizeStudentHTML` (an autograde preprocessor) makes every markdown and raw cell the student
wrote or changed one block of clean, pre-rendered HTML in a region labelled as the student's
that MathJax skips (student_text.py; the allow-list is allow_list.py, the TeX filter mathml.py).
Cells exactly as released (the instructor's text, an untouched answer) are left as they are, so
nbgrader still grades an untouched answer zero by its checksum.
"""

from __future__ import annotations

from pathlib import Path

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool

from autograder.nbgrader_plugins.page_text import language
from autograder.nbgrader_plugins.student_text import student_block


def given_texts(config, resources: dict) -> frozenset[str]:
    """The markdown and raw cells of the notebook as released (and in source/): the
    instructor's text, and the answers' stubs. Empty when the course has neither."""
    import nbformat
    from nbgrader.coursedir import CourseDirectory

    info = resources.get("nbgrader") or {}
    assignment, notebook = info.get("assignment"), info.get("notebook")
    if not assignment or not notebook:
        return frozenset()
    course = CourseDirectory(config=config)
    texts: set[str] = set()
    for step in (course.release_directory, course.source_directory):
        path = Path(course.format_path(step, ".", assignment)) / f"{notebook}.ipynb"
        try:
            given = nbformat.read(path, as_version=4)
        except (OSError, ValueError):
            continue
        texts |= {str(c.source) for c in given.cells if c.cell_type in ("markdown", "raw")}
    return frozenset(texts)


class SanitizeStudentHTML(SanitizeHTML):
    """Every markdown and raw cell a student wrote or changed, as a labelled block of clean,
    pre-rendered HTML that MathJax skips (student_text.py; a raw cell becomes a markdown cell
    showing its text); cells exactly as released stay as they are. nbconvert's SanitizeHTML,
    enabled, for the outputs of code cells."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        self._given = given_texts(self.config, resources)
        self._lang = language(nb.metadata)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type not in ("markdown", "raw"):
            return super().preprocess_cell(cell, resources, cell_index)
        source = str(cell.source)
        if source in getattr(self, "_given", ()):
            return cell, resources
        cell.source = student_block(source, cell.cell_type, getattr(self, "_lang", "en"))
        if cell.cell_type == "raw":
            cell.cell_type = "markdown"
            for key in ("raw_mimetype", "format"):
                cell.metadata.pop(key, None)
        return cell, resources
