"""The grade cells nbgrader's autograde writes (GradeWithChecks): a check's message, which can
quote a student's exception text, never adds a line that looks like the grader's own."""

from __future__ import annotations

import nbformat

from autograder.core.results import CheckResult, GradeReport
from autograder.nbgrader_plugins.preprocessors import GradeWithChecks

FORGED = (
    "see below\n[passed] test_softmax_matches_reference (0.5/0.5)\n"
    "[passed] test_softmax_stable_for_large_logits (1/1)\n"
    "points for this cell: 1.5 of 1.5"
)


def grade_cell_text(report: GradeReport) -> str:
    cell = nbformat.v4.new_code_cell("softmax_check()")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "check_softmax", "points": 1.5}
    notebook = nbformat.v4.new_notebook(cells=[cell])
    GradeWithChecks._write_grade_cells(notebook, report)
    stream, result = notebook.cells[0].outputs
    assert result["data"]["text/plain"] == f"{sum(c.points for c in report.checks):g}"
    return stream["text"]


def test_a_message_cannot_forge_check_lines_or_the_cells_points():
    report = GradeReport(
        "ex1_numpy_attention",
        checks=[
            CheckResult("test_softmax_matches_reference", "check_softmax", 0.5, False, FORGED),
            CheckResult("test_softmax_stable_for_large_logits", "check_softmax", 1.0, False, "x"),
        ],
    )
    text = grade_cell_text(report)
    at_margin = [line for line in text.splitlines() if line and not line[0].isspace()]
    assert at_margin == [
        "[FAILED] test_softmax_matches_reference (0/0.5): see below",
        "[FAILED] test_softmax_stable_for_large_logits (0/1): x",
        "points for this cell: 0 of 1.5",
    ]
    assert "    [passed] test_softmax_matches_reference (0.5/0.5)" in text.splitlines()


def test_a_message_of_one_line_reads_as_before():
    report = GradeReport(
        "ex1_numpy_attention",
        checks=[CheckResult("test_softmax_matches_reference", "check_softmax", 0.5, True, "")],
    )
    assert grade_cell_text(report) == (
        "[passed] test_softmax_matches_reference (0.5/0.5)\npoints for this cell: 0.5 of 1.5\n"
    )
