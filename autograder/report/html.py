"""The report page: statistics in, one self-contained HTML file (and the check table as CSV)
out. All text reaches the page through a jinja2 template with autoescaping on."""

from __future__ import annotations

import csv
import datetime
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

from autograder.report import similarity, stats
from autograder.report.data import Batch, load_batch
from autograder.report.plots import score_histogram
from autograder.report.roster import Roster, load_roster

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class ExerciseSection:
    summary: stats.ExerciseSummary
    histogram: str  # data: URI
    checks: list[stats.CheckStats]
    mistakes: list[stats.MistakeCount]
    pairs: list[similarity.Pair]  # the top pairs
    compared: int  # submissions with code of their own


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def sections(batch: Batch, top: int = similarity.TOP_PAIRS) -> list[ExerciseSection]:
    out = []
    for exercise in batch.exercises():
        summary = stats.summarise(batch, exercise)
        codes = {s: c for (e, s), c in batch.code.items() if e == exercise}
        pairs = similarity.compare(exercise, codes, batch.starter.get(exercise, ""))
        out.append(
            ExerciseSection(
                summary=summary,
                histogram=score_histogram(summary),
                checks=stats.check_stats(batch, exercise),
                mistakes=stats.mistake_counts(batch, exercise),
                pairs=pairs[:top],
                compared=sum(1 for code in codes.values() if code.strip()),
            )
        )
    return out


def render(batch: Batch, *, title: str, csv_name: str, roster: Roster | None = None) -> str:
    """The whole page as text."""
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            generated=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            csv_name=csv_name,
            sections=sections(batch),
            problems=stats.problems(batch),
            integrity=stats.integrity(batch),
            submissions=len(batch.submissions),
            manual_points=batch.manual_points,
            roster=roster or Roster(),
            flags=(stats.FLAG_NEVER_FAILS, stats.FLAG_ALWAYS_FAILS, stats.FLAG_NEGATIVE),
        )
    )


def csv_path(out: Path) -> Path:
    """Where the per-check table goes: beside the page, `<name>-checks.csv`."""
    return out.with_name(f"{out.stem}-checks.csv")


def write_checks_csv(batch: Batch, path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=stats.CSV_FIELDS)
        writer.writeheader()
        for exercise in batch.exercises():
            writer.writerows(row.csv_row() for row in stats.check_stats(batch, exercise))


def write_report(course: Path, out: Path | None = None) -> Path:
    """Read the course's last batch, write the page and its CSV; return the page's path."""
    course = Path(course).resolve()
    out = Path(out) if out else course / "report.html"
    batch = load_batch(course)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = csv_path(out)
    write_checks_csv(batch, table)
    from autograder.course.api import nbgrader_api

    course_id = nbgrader_api(course).coursedir.course_id or course.name
    students = {s.student for s in batch.submissions}
    roster = load_roster(course, batch.exercises(), students)
    title = f"Batch report: {course_id}"
    out.write_text(render(batch, title=title, csv_name=table.name, roster=roster))
    return out
