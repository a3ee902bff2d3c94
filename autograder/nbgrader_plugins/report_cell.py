"""The "Autograder report" cell of an autograded notebook: an HTML table, every piece of text
escaped, so that no message (which may quote student text) can close it, add markup, or be
typeset as math. Written for students: no internal terms (isolation levels, seeds)."""

from __future__ import annotations

import html
import re

from autograder.core.results import MANUAL_POINTS, GradeReport
from autograder.core.status import student_words
from autograder.nbgrader_plugins.page_text import message, words

REPORT_CELL_ID = "attn-grade-report"  # the report cell's id (DeduplicateIds runs first)
HEADINGS = ("check", "result", "points", "message")
# The report's first sentence, by the state of the written answer. Autograde writes "pending"
# (it cannot know of hand grades); the feedback page says what is true then (`written_summary`).
SUMMARY = {
    "pending": "%s of %s points from automatic checks; the written answer (%s points) is graded "
    "by your instructor.",
    "graded": "%s of %s points from automatic checks; the written answer, graded by your "
    "instructor: %s of %s points.",
    "blank": "%s of %s points from automatic checks; the written answer (%s points) was left "
    "blank: 0 points.",
    "review": "%s of %s points from automatic checks; the written answer changed after it was "
    "graded (earlier grade %s of %s points): your instructor will look at it again.",
}


def escape(text: str) -> str:
    """Text as inert HTML inside a raw HTML block of a markdown cell: markup escaped, line
    breaks as <br> (a blank line would end the block), `$` and `\\` as entities (no math)."""
    text = html.escape(str(text), quote=True)
    text = text.replace("$", "&#36;").replace("\\", "&#92;").replace("`", "&#96;")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "<br>".join(line.strip() or "&nbsp;" for line in lines)


def breakable(identifier: str) -> str:
    """An (escaped) identifier that a narrow column breaks after its underscores, not inside
    its words."""
    return identifier.replace("_", "_<wbr>")


def report_html(report: GradeReport, lang: str = "en") -> str:
    """The markdown source of the report cell, in `lang` (page_text.py): one raw HTML block
    with no blank line. The table carries bootstrap's classes too, so that formgrader (which
    has bootstrap but not our page's style) spaces its columns; a result is a symbol and a
    word, never a colour alone. MathJax (formgrader's) skips it: a message's `&#36;` is a `$`
    to MathJax, which would typeset a student's `$\\style{...}$` quoted in it."""
    status = message(student_words(report.status), lang)
    summary = words(SUMMARY["pending"], lang) % (
        f"{report.score:g}",
        f"{report.max_score:g}",
        f"{MANUAL_POINTS:g}",
    )
    rows = [
        '<div class="attn-grade-report tex2jax_ignore">',
        f"<p><strong>{words('Autograder report', lang)}</strong>: {summary}</p>",
    ]
    if status:
        rows.append(f"<p><strong>{words('Note', lang)}:</strong> {escape(status)}.</p>")
    head = "".join(f"<th>{words(name, lang)}</th>" for name in HEADINGS)
    rows += [
        '<table class="attn-grade-checks table table-condensed">',
        f"<thead><tr>{head}</tr></thead>",
        "<tbody>",
    ]
    for check in report.checks:
        result = f"✓ {words('passed', lang)}" if check.passed else f"✗ {words('failed', lang)}"
        kind = "passed" if check.passed else "failed"
        rows.append(
            f"<tr><td><code>{breakable(escape(check.name))}</code></td>"
            f'<td class="result {kind}">{result}</td>'
            f"<td>{check.points:g} / {check.max_points:g}</td>"
            f"<td>{escape(message(check.message, lang))}</td></tr>"
        )
    rows += ["</tbody>", "</table>"]
    if report.messages:
        rows.append(f"<p><strong>{words('Notes', lang)}</strong></p>")
        rows.append(
            "<ul>"
            + "".join(f"<li>{escape(message(m, lang))}</li>" for m in report.messages)
            + "</ul>"
        )
    rows.append("</div>")
    return "\n".join(rows) + "\n"


def written_summary(source: str, lang: str, state: str, points: float, given: float) -> str:
    """The report cell's `source` with its first sentence (autograde's "pending" one) saying
    the written answer's `state` (a key of SUMMARY) instead: its `points`, the hand grade
    `given` ("graded", "review"). A cell without that sentence is returned as it is."""
    pattern = re.escape(words(SUMMARY["pending"], lang)).replace("%s", r"([^\s<>]+?)", 3)
    found = re.search(pattern, source)
    if found is None or state not in SUMMARY:
        return source
    score, max_score = found.group(1), found.group(2)
    values = [score, max_score, f"{points:g}"]
    if state in ("graded", "review"):
        values = [score, max_score, f"{given:g}", f"{points:g}"]
    sentence = words(SUMMARY[state], lang) % tuple(values)
    return source[: found.start()] + sentence + source[found.end() :]
