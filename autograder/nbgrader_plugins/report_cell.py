"""The "Autograder report" cell of an autograded notebook: an HTML table, every piece of text
escaped, so that no message (which may quote student text) can close it, add markup, or be
typeset as math. Written for students: no internal terms (isolation levels, seeds)."""

from __future__ import annotations

import html

from autograder.core.results import MANUAL_POINTS, GradeReport
from autograder.core.status import student_words

REPORT_CELL_ID = "attn-grade-report"  # the report cell's id (DeduplicateIds runs first)


def escape(text: str) -> str:
    """Text as inert HTML inside a raw HTML block of a markdown cell: markup escaped, line
    breaks as <br> (a blank line would end the block), `$` and `\\` as entities (no math)."""
    text = html.escape(str(text), quote=True)
    text = text.replace("$", "&#36;").replace("\\", "&#92;").replace("`", "&#96;")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "<br>".join(line.strip() or "&nbsp;" for line in lines)


def report_html(report: GradeReport) -> str:
    """The markdown source of the report cell: one raw HTML block with no blank line."""
    status = student_words(report.status)
    rows = [
        '<div class="attn-grade-report">',
        f"<p><strong>Autograder report</strong>: {report.score:g} of {report.max_score:g} points "
        f"from automatic checks; the written answer ({MANUAL_POINTS:g} points) is graded by "
        "your instructor.</p>",
    ]
    if status:
        rows.append(f"<p><strong>Note:</strong> {escape(status)}.</p>")
    rows += [
        '<table class="attn-grade-checks">',
        "<thead><tr><th>check</th><th>result</th><th>points</th><th>message</th></tr></thead>",
        "<tbody>",
    ]
    for check in report.checks:
        result = "passed" if check.passed else "failed"
        rows.append(
            f"<tr><td><code>{escape(check.name)}</code></td><td>{result}</td>"
            f"<td>{check.points:g} / {check.max_points:g}</td><td>{escape(check.message)}</td></tr>"
        )
    rows += ["</tbody>", "</table>"]
    if report.messages:
        rows.append("<p><strong>Notes</strong></p>")
        rows.append("<ul>" + "".join(f"<li>{escape(m)}</li>" for m in report.messages) + "</ul>")
    rows.append("</div>")
    return "\n".join(rows) + "\n"
