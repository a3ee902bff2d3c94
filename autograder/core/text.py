"""Text the grader shows: student-controlled strings made safe, and the `attn-grade grade` table.

Everything a notebook controls (exception messages and type names, printed output, notes) is
cleaned once, when the report is made (`clean_report`): no control characters or escape
sequences (ANSI/OSC), no bidirectional overrides, no lone surrogates, bounded length. The table
keeps every message on lines of its own (wrapped and indented, notes on one line each), so a
message cannot forge a line of the report.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import replace

from autograder.core.results import MANUAL_POINTS, GradeReport
from autograder.core.student_text import one_line

MAX_TEXT = 4000  # characters of one message
MAX_MESSAGES = 60  # notebook-level notes kept per report
# Every message and note is one line and bounded: the notebook's own text in them is bounded
# where it is quoted (`core.student_text`), and these bound whatever else reaches them.
CHECK_MESSAGE = 1000  # characters of one check's message
NOTE = 300  # characters of one notebook-level note
# C0 (but tab and newline) and C1 controls, DEL, zero-width and bidirectional formatting marks,
# and the Unicode line and paragraph separators (line breaks to str.splitlines and to editors).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def clean_text(text: object, limit: int = MAX_TEXT) -> str:
    """`text` as safe, printable UTF-8: unsafe characters become U+FFFD, then truncated."""
    value = str(text).encode("utf-8", "replace").decode("utf-8")
    value = _UNSAFE.sub("\ufffd", value)
    return value if len(value) <= limit else value[: limit - 3] + "..."


def clean_report(report: GradeReport) -> GradeReport:
    """The report with every student-controlled string cleaned: each check message and note on
    one line, bounded, and the notes counted."""

    def bounded(text: str, limit: int) -> str:
        return clean_text(one_line(text, limit), limit)

    report.checks = [
        replace(check, message=bounded(check.message, CHECK_MESSAGE)) for check in report.checks
    ]
    messages = [bounded(message, NOTE) for message in report.messages[:MAX_MESSAGES]]
    if len(report.messages) > MAX_MESSAGES:
        messages.append(f"... and {len(report.messages) - MAX_MESSAGES} more notes")
    report.messages = messages
    return report


def format_report(report: GradeReport, width: int = 100) -> str:
    lines = [
        f"{report.exercise}: {report.score:g} / {report.max_score:g} auto-graded points "
        f"(+{MANUAL_POINTS:g} points for the written answer, graded by hand)",
        f"status: {report.status}   isolation: {report.isolation or '-'}   seed: {report.seed}",
        "",
    ]
    name_width = max((len(check.name) for check in report.checks), default=10)
    for check in report.checks:
        mark = "PASS" if check.passed else "FAIL"
        lines.append(
            f"  {mark}  {check.name:<{name_width}}  {check.points:>5g} / {check.max_points:<5g}"
        )
        if check.message:
            lines += textwrap.wrap(
                clean_text(check.message),
                width - 10,
                initial_indent=" " * 10,
                subsequent_indent=" " * 10,
            )
    if report.messages:
        lines += ["", "notes:"]
        # one line per note: a message cannot start a line of its own
        lines += [f"  - {' | '.join(clean_text(m).splitlines())}" for m in report.messages]
    return "\n".join(lines)
