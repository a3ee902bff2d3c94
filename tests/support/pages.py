"""Reading a generated page as a student sees it."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

# every word of the page's own (and nbgrader's) in English: none may be on a Korean page
ENGLISH_CHROME = (
    "Autograder report", "Your code", "Your written answer", "Written answer", "Comments",
    "Score:", "not graded yet", "(Top)", "YOUR ANSWER HERE", "Checks", "from automatic checks",
    "passed", "failed", "No response.", "Your answer", "Your text", "Written by the student",
)  # fmt: skip


def page_text(page: Path, code: bool = True) -> str:
    """The page's text; without `code`, without the notebook's code (what the student was given
    and wrote, in the language of code)."""
    body = page.read_text().split("<body>", 1)[1]
    if not code:
        body = re.sub(r'<div class="highlight[^"]*"><pre>.*?</pre>', " ", body, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


# In the browser: for each row of the report's check table, whether its result and points
# cells hold one line each (not "통/과", not "0.5 /" over "0.5") and fit their column; whether
# the page scrolls sideways. An expression for page.evaluate (tests/support/axe.py's probe).
REPORT_TABLE_LAYOUT = """
(() => {
  const rows = [];
  document.querySelectorAll("table.attn-grade-checks tbody tr").forEach(row => {
    [1, 2].forEach(i => {
      const cell = row.cells[i];
      const range = document.createRange();
      range.selectNodeContents(cell);
      const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
      rows.push({column: i, text: cell.textContent.trim(), lines: lines.size,
                 fits: cell.scrollWidth <= cell.clientWidth + 1});
    });
  });
  return {rows, width: document.documentElement.scrollWidth, view: window.innerWidth};
})()
"""


def formgrader_exporter(course: Path):
    """nbconvert's HTMLExporter as formgrader makes it: formgrader's own template settings,
    then the course's nbgrader_config.py on top (nbgrader's order)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config, PyFileConfigLoader

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
    return HTMLExporter(config=config)


def formgrader_html(
    course: Path, nb: nbformat.NotebookNode, where: Path, student: str = "s1"
) -> str:
    """Formgrader's grading page of `nb` in `course`, without a server (its scripts and CSS,
    served by formgrader, are not loaded)."""
    path = where / f"{student}.ipynb"
    nbformat.write(nb, path)
    resources = {
        "assignment_id": "ex",
        "notebook_id": "ex",
        "submission_id": "1",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": student,
        "last_name": "",
        "first_name": "",
        "notebook_path": str(path),
    }
    return formgrader_exporter(course).from_filename(str(path), resources=resources)[0]
