"""`nbgrader generate_feedback` for this course: pages that read well offline.

The course config makes GenerateFeedback use FeedbackExporter (nbgrader's feedback template
extended by templates/attn_feedback: "not graded yet" for the written answer until it is, long
lines wrapped, a readable report table, the student's own text in a region labelled "Your
answer") and two preprocessors: GetGradesAndPending (nbgrader's GetGrades, plus which grades
wait for the instructor) and RenderMathOffline (LaTeX in markdown becomes MathML, which browsers
render without MathJax from the internet; the student's cells arrive rendered already).
"""

from __future__ import annotations

import copy
from pathlib import Path

from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import GetGrades
from traitlets import Bool
from traitlets.config import Config

from autograder.nbgrader_plugins.allow_list import clean_output_html, clean_student_html
from autograder.nbgrader_plugins.late_penalty import settle_late_penalties
from autograder.nbgrader_plugins.mathml import math_to_mathml, neutralise_tex
from autograder.nbgrader_plugins.page_text import language, words
from autograder.nbgrader_plugins.report_cell import REPORT_CELL_ID, written_summary
from autograder.nbgrader_plugins.student_text import block_body, region

__all__ = ["FeedbackExporter", "GetGradesAndPending", "RenderMathOffline", "math_to_mathml"]
TEMPLATES = Path(__file__).with_name("templates")


def is_report_cell(cell) -> bool:
    return cell.get("cell_type") == "markdown" and (
        cell.get("id") == REPORT_CELL_ID or 'class="attn-grade-report' in str(cell.get("source"))
    )


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter with our feedback template; HTML in outputs is sanitized."""

    def __init__(self, config: Config | None = None, **kwargs):
        from nbgrader.server_extensions.formgrader import handlers

        ours = Config()
        ours.merge(config or Config())  # a copy: the caller's config is left alone
        ours.HTMLExporter.template_name = "attn_feedback"
        ours.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), handlers.template_path]
        ours.HTMLExporter.sanitize_html = True
        ours.HTMLExporter.exclude_anchor_links = True  # a "¶" link in every heading, unlabelled
        # so that our template can extend nbgrader's as 'feedback/index.html.j2', and include
        # the style it shares with formgrader's page as 'attn_common/pages.css'
        paths = list(ours.HTMLExporter.get("extra_template_paths", []))
        ours.HTMLExporter.extra_template_paths = [*paths, handlers.template_path, str(TEMPLATES)]
        super().__init__(config=ours, **kwargs)

    def from_notebook_node(self, nb, resources=None, **kw):
        """Each cell numbered as the grader's messages number it ("cell 10": its place in the
        submitted notebook, counting from 1), so that a note points at a cell on the page; a
        check cell without the number nbgrader reads its partial credit from (its output says
        the points in words); a figure described in the page's language."""
        nb = copy.deepcopy(nb)
        lang = language(nb.metadata)
        number = 0
        for index, cell in enumerate(nb.cells):
            if index == 0 and is_report_cell(cell):
                continue  # added by autograde in front of the student's cells
            number += 1
            cell.metadata["attn_cell"] = number
            if cell.get("cell_type") == "code":
                alt = words("a figure drawn by cell %s", lang) % number
                cell.outputs = _shown_outputs(cell, alt)
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return output.replace("<html>", f'<html lang="{lang}">', 1), resources

    @pass_context
    def markdown2html(self, context, source):
        """Markdown (with its offline MathML) as HTML, cleaned last (allow_list.py); the report
        cell, ours (it replaces any cell of its id), keeps the classes that style it; a
        student's cell, rendered at autograding (student_text.py), is cleaned again and shown in
        the region labelled as the student's: "Your answer" for the written answer."""
        cell = context.get("cell", {})
        body = block_body(str(source))
        if body is not None:
            answer = cell.get("metadata", {}).get("nbgrader", {}).get("solution")
            nb = context.get("nb")
            lang = language(nb.metadata if nb is not None else {})
            label = words("Your answer" if answer else "Your text", lang)
            return region(clean_student_html(body), label, style=False)
        ours = cell.get("cell_type") == "markdown" and cell.get("id") == REPORT_CELL_ID
        clean = clean_output_html if ours else clean_student_html
        return clean(super().markdown2html(context, source))

    def default_filters(self):
        yield from super().default_filters()
        yield ("clean_html", clean_output_html)  # outputs and comments: the same allow-list
        yield ("t", _translate)
        yield ("mathml", lambda markdown: math_to_mathml(neutralise_tex(markdown)))


def _shown_outputs(cell, alt: str) -> list:
    """The outputs of a code cell as the student sees them: a check cell's execute_result
    (nbgrader's partial credit, the points its stream output states) left out; an image without
    a description described as `alt`."""
    nbgrader = cell.get("metadata", {}).get("nbgrader", {})
    check = nbgrader.get("grade") and not nbgrader.get("solution")
    outputs = cell.get("outputs", [])
    shown = [o for o in outputs if not (check and o.output_type == "execute_result")]
    for output in shown:
        if any(kind.startswith("image/") for kind in output.get("data", {})):
            output.setdefault("metadata", {}).setdefault("alt", alt)
    return shown


@pass_context
def _translate(context, text: str) -> str:
    """The template's `{{ "Your code" | t }}`: the page's words in the notebook's language."""
    nb = context.get("nb")
    return words(text, language(nb.metadata if nb is not None else {}))


class GetGradesAndPending(GetGrades):
    """nbgrader's GetGrades, with the late penalty of the final score (hand grades included,
    `late_penalty.py`); also marks each grade cell that still waits for hand grading or is
    under review (its answer changed after it was graded). A hand grade under review is not in
    the page's total (the page says so), and the report cell's first sentence says what is true
    of the written answer: graded (its points), left blank, under review, or waiting."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        info["written"], info["review"] = [], 0.0
        with Gradebook(info["db_url"]) as gradebook:
            settle_late_penalties(gradebook, self.config, info["assignment"], [info["student"]])
        nb, resources = super().preprocess(nb, resources)
        info = resources["nbgrader"]
        if info["review"]:
            info["score"] = max(0.0, float(info["score"]) - info["review"])
        if info["written"] and nb.cells and is_report_cell(nb.cells[0]):
            state, points, given = _written_state(info["written"])
            lang = language(nb.metadata)
            nb.cells[0].source = written_summary(nb.cells[0].source, lang, state, points, given)
        return nb, resources

    def _get_score(self, cell, resources) -> None:
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"],
            self.notebook_id,
            self.assignment_id,
            self.student_id,
        )
        pending = bool(grade.needs_manual_grade) and grade.manual_score is None
        cell.metadata.nbgrader["pending"] = pending
        # graded by hand, then changed (a resubmission): the gradebook asks for a new look
        review = bool(grade.needs_manual_grade) and grade.manual_score is not None
        cell.metadata.nbgrader["review"] = review
        info = resources["nbgrader"]
        info["pending"] = info.get("pending", 0) + pending
        if review:
            info["review"] = info.get("review", 0.0) + float(grade.manual_score)
        nbgrader = cell.metadata.nbgrader
        if nbgrader.get("solution") and cell.cell_type == "markdown":  # a written answer
            if pending or review:
                state = "pending" if pending else "review"
            elif grade.manual_score is not None:
                state = "graded"
            else:  # scored without a look: nbgrader's zero for an answer left as released
                state = "blank" if grade.auto_score == 0 else "graded"
            info.setdefault("written", []).append(
                (state, float(grade.max_score or 0.0), float(grade.score or 0.0))
            )


def _written_state(answers: list[tuple[str, float, float]]) -> tuple[str, float, float]:
    """The written answers' (state, points, hand grade) as one: any waiting, any under review,
    all blank, else graded (module doc of report_cell.written_summary)."""
    points = sum(item[1] for item in answers)
    given = sum(item[2] for item in answers)
    states = {item[0] for item in answers}
    for state in ("pending", "review"):
        if state in states:
            return state, points, given
    return ("blank" if states == {"blank"} else "graded"), points, given


class RenderMathOffline(Preprocessor):
    """Markdown cells' LaTeX as MathML (Chromium >= 109, Firefox, Safari render it natively)."""

    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        rendered = block_body(str(cell.source)) is not None  # a student's, MathML already
        if cell.cell_type == "markdown" and "$" in cell.source and not rendered:
            cell.source = math_to_mathml(neutralise_tex(cell.source))
        return cell, resources
