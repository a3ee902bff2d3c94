"""Item analysis of a batch: how often each check passed, and which named mistakes it saw."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from pathlib import Path

from autograder.core.registry import short_name
from autograder.core.results import GradeReport
from autograder.core.status import Status

FIELDS = ("exercise", "check", "grade_id", "points", "passed", "graded", "pass_rate", "mistakes")


def item_rows(reports: list[GradeReport]) -> list[dict]:
    passed: Counter = Counter()
    graded: Counter = Counter()
    mistakes: dict[tuple, Counter] = defaultdict(Counter)
    meta: dict[tuple, tuple[str, float]] = {}
    for report in reports:
        if report.status == Status.INVALID_NOTEBOOK:
            continue
        for check in report.checks:
            key = (report.exercise, check.name)
            meta[key] = (check.grade_id, check.max_points)
            graded[key] += 1
            passed[key] += check.passed
            if check.mistake:
                mistakes[key][check.mistake] += 1
    return [
        {
            "exercise": exercise,
            "check": name,
            "grade_id": meta[(exercise, name)][0],
            "points": meta[(exercise, name)][1],
            "passed": passed[(exercise, name)],
            "graded": graded[(exercise, name)],
            "pass_rate": round(passed[(exercise, name)] / graded[(exercise, name)], 3),
            "mistakes": "; ".join(f"{m} x{n}" for m, n in mistakes[(exercise, name)].most_common()),
        }
        for exercise, name in meta
    ]


def write_item_analysis(reports: list[GradeReport], path: Path) -> list[dict]:
    rows = item_rows(reports)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def format_items(rows: list[dict]) -> str:
    """An aligned table: the check column is as wide as the longest check name."""
    width = max([len(row["check"]) for row in rows] + [len("check")])
    lines = [f"{'':<4} {'check':<{width}} {'passed':>9}  named mistakes"]
    for row in rows:
        count = f"{row['passed']}/{row['graded']}"
        exercise = short_name(row["exercise"])
        lines.append(f"{exercise:<4} {row['check']:<{width}} {count:>9}  {row['mistakes']}")
    return "\n".join(lines)
