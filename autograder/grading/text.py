"""Human-readable rendering of a GradeReport (the `attn-grade grade` table)."""

from __future__ import annotations

import textwrap

from autograder.exercises import MANUAL_POINTS
from autograder.grading.results import GradeReport


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
                check.message, width - 10, initial_indent=" " * 10, subsequent_indent=" " * 10
            )
    if report.messages:
        lines += ["", "notes:"]
        lines += [f"  - {message}" for message in report.messages]
    return "\n".join(lines)
