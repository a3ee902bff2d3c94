"""The markup of the two pages that show an autograded notebook (issue "A Korean course through
Canvas and Moodle", item 9): the student's feedback page (FeedbackExporter) and formgrader's
grading page (nbgrader's HTMLExporter under the course config), rendered here without a server
or a browser. What they look like in Chromium, and axe-core on them, is
tests/integration/test_page_accessibility.py."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from autograder.course.build import write_config
from autograder.nbgrader_plugins.feedback import FeedbackExporter, RenderMathOffline
from tests.support.pages import formgrader_html

# headings of the exercises' prose, with math in them (ex1's own, and others)
HEADINGS = [
    ("ko", r"## 5. 왜 $\sqrt{d_k}$로 나눌까?", "msqrt"),
    ("en", r"## 5. Why divide by $\sqrt{d_k}$?", "msqrt"),
    ("en", r"### The cost $O(L^2)$ of attention", "msup"),
    ("ko", r"# $\frac{QK^\top}{\sqrt{d_k}}$의 분산", "mfrac"),
]


def notebook(cells: list, lang: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["attn_grade"] = {"exercise": "ex1_numpy_attention", "lang": lang}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def check_cell(points: float, earned: float) -> nbformat.NotebookNode:
    """A check cell as GradeWithChecks leaves it: the checks in words, then the number
    nbgrader reads the partial credit from."""
    cell = nbformat.v4.new_code_cell("assert softmax(x).sum() == 1")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "grade_id": "check_softmax",
        "points": points,
        "score": earned,
    }
    cell.outputs = [
        nbformat.v4.new_output("stream", text=f"points for this cell: {earned:g} of {points:g}\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": f"{earned:g}"}),
    ]
    return cell


def figure_cell() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("plt.show()")
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
        "RU5ErkJggg=="
    )
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png})]
    return cell


def feedback_html(nb: nbformat.NotebookNode) -> str:
    """The feedback page of `nb`, as `nbgrader generate_feedback` makes it (its grades given;
    bootstrap's CSS where GenerateFeedback finds it)."""
    from nbgrader.server_extensions.formgrader import handlers

    nb, resources = RenderMathOffline().preprocess(nb, {})
    resources["nbgrader"] = {"notebook": "ex1", "score": 1.0, "max_score": 10.0}
    resources["nbgrader"] |= {"late_penalty": 0, "pending": 0}
    config = Config()
    css = Path(handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css"
    config.HTMLExporter.extra_template_paths = [str(css)]
    return FeedbackExporter(config=config).from_notebook_node(nb, resources)[0]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course directory with the config `attn-grade build` writes (formgrader reads it)."""
    root = tmp_path_factory.mktemp("course")
    write_config(root, course_id="attn-ko")
    return root


def heading(html: str, level: int) -> str:
    found = re.search(rf"<h{level}\b[^>]*>(.*?)</h{level}>", html, re.S)
    assert found, f"no <h{level}> on the page"
    return found[1]


@pytest.mark.parametrize(("lang", "markdown", "element"), HEADINGS)
@pytest.mark.parametrize("page", ["feedback", "formgrader"])
def test_math_in_a_heading_renders(course, tmp_path, page, lang, markdown, element):
    """`## 5. 왜 $\\sqrt{d_k}$로 나눌까?` showed as "5. 왜 dk로 나눌까?" on the feedback page (the
    root and the subscript lost) and as raw TeX in formgrader without the internet."""
    nb = notebook([nbformat.v4.new_markdown_cell(markdown)], lang)
    if page == "feedback":
        html = feedback_html(nb)
    else:
        html = formgrader_html(course, nb, tmp_path)
    shown = heading(html, markdown.index(" "))
    assert f"<{element}>" in shown and "<math" in shown, shown
    assert "$" not in shown and "\\" not in shown, shown


def test_a_check_cell_shows_its_points_in_words_only():
    """The check cell's output ended with a bare "Out[ ]: 0" box (nbgrader's partial credit)
    after "points for this cell: 0 of 3 (the number below)"."""
    html = feedback_html(notebook([check_cell(3, 0), check_cell(1.5, 1.5)], "en"))
    assert "points for this cell: 0 of 3" in html and "points for this cell: 1.5 of 1.5" in html
    assert "Out[" not in html and "output_execute_result" not in html
    assert "the number below" not in html


@pytest.mark.parametrize(
    ("lang", "alt"), [("en", "a figure drawn by cell 2"), ("ko", "셀 2에서 그린 그림")]
)
def test_a_figure_is_described_in_the_pages_language(lang, alt):
    """nbconvert's "No description has been provided for this image" was English on a Korean
    page."""
    html = feedback_html(notebook([check_cell(1, 1), figure_cell()], lang))
    assert f'alt="{alt}"' in html
    assert "No description has been provided" not in html


@pytest.mark.parametrize("page", ["feedback", "formgrader"])
def test_the_page_loads_nothing_from_the_internet(course, tmp_path, page):
    """The feedback page carried a <script> of MathJax from a CDN that it does not need (its
    math is MathML); formgrader's too, and without the internet its math stayed raw."""
    nb = notebook([nbformat.v4.new_markdown_cell(r"Divide by $\sqrt{d_k}$.")], "ko")
    html = feedback_html(nb) if page == "feedback" else formgrader_html(course, nb, tmp_path)
    remote = re.findall(r'<(?:script|link|img)\b[^>]*(?:src|href)="(https?:)?//[^"]*"', html)
    assert remote == []
    assert "MathJax.Hub" not in html and "x-mathjax-config" not in html
    assert "<msqrt>" in html


def test_formgraders_page_says_its_languages(course, tmp_path):
    """Formgrader's words are English, the notebook's its own (`lang`), so that a screen reader
    and the browser's line breaking read each in its language."""
    html = formgrader_html(course, notebook([check_cell(1, 1)], "ko"), tmp_path)
    assert re.search(r'<html lang="en">', html)
    assert re.search(r'id="notebook-container" lang="ko"', html)
    fields = re.findall(r"<(?:input|textarea)\b[^>]*>", html)
    assert len(fields) == 2, fields  # the check cell's score and extra credit
    assert all(re.search(r'aria-label="[^"]+"', field) for field in fields), fields
