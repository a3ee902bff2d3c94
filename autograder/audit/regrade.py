"""`attn-grade regrade --diff`: after a check change, what would each student's score become?

Every submitted notebook is graded with the current checks (as `attn-grade autograde` would
grade it: no recorded seed) and compared with what is recorded for it: the latest audit record,
else the gradebook's auto score, else nothing ("new"). Nothing is written, neither the
gradebook nor the audit log nor the course; `attn-grade autograde` writes the new grades.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.audit import log as audit
from autograder.audit.gradebook import auto_scores
from autograder.audit.replay import Job, Outcome, check_changes, grade_all, points
from autograder.core.status import Status
from autograder.core.text import clean_text

WRITE_HINT = "nothing was written; `attn-grade autograde` regrades and writes the new grades"


@dataclass(frozen=True)
class Before:
    """What is recorded for a submission now."""

    source: str  # "audit", "gradebook" or "new"
    score: float | None = None
    checks: dict[str, float] | None = None  # per check: the audit log only
    notebook_sha256: str | None = None


def recorded(course: Path, found: list, db_url: str | None) -> dict[tuple[str, str], Before]:
    log = audit.read_warning(course, "regrade")
    latest = log.latest()
    before = {}
    for exercise, student, _ in found:
        line = latest.get((exercise, student))
        if line is not None:
            checks = {str(k): float(v) for k, v in line["checks"].items()}
            score = float(line.get("score", sum(checks.values())))
            before[(exercise, student)] = Before("audit", score, checks, line["notebook_sha256"])
    missing = [(e, s) for e, s, _ in found if (e, s) not in before]
    if missing:
        for key, score in (auto_scores(course, db_url, missing) or {}).items():
            before[key] = Before("gradebook", score)
    return before


def change_line(
    student: str, exercise: str, path: Path, old: Before, new: Outcome, width: int = 0
) -> str:
    """`alice  ex1_numpy_attention  6.5 -> 8 (+1.5)  test_x 0 -> 1.5` (and what else to know)."""
    who = f"{clean_text(student, 80):<{width}}  {exercise}"
    if new.error:
        return f"{who}  {points(old.score)} -> ?  the regrade failed ({new.error})"
    delta = "" if old.score is None else f" ({new.score - old.score:+g})"
    text = f"{who}  {points(old.score) if old.score is not None else 'new'} -> "
    text += f"{points(new.score)}{delta}"
    notes = []
    if old.checks is not None:
        notes += check_changes(old.checks, new.checks)
    elif old.source == "gradebook":
        notes.append("was the gradebook's score (no audit record: no per-check points)")
    if new.status != Status.OK:
        notes.append(f"status {new.status}")
    if old.notebook_sha256 and old.notebook_sha256 != audit.sha256_file(path):
        notes.append("the notebook changed since it was recorded")
    return text + ("  " + "; ".join(notes) if notes else "")


def regrade_diff(
    course: Path, exercises: list[str], *, workers: int = 2, db_url: str | None = None
) -> int:
    """Print each submission's score change and counts; write nothing. 1 when some
    submission could not be graded (listed), else 0."""
    from autograder.course.submitted import account

    course = Path(course)
    accounting = account(course, exercises, copy=False)
    for problem in accounting.problems:
        print(f"attn-grade regrade: {problem}", file=sys.stderr)
    if not accounting.found:
        print("attn-grade regrade: no submitted notebooks")
        return 1 if accounting.problems else 0
    before = recorded(course, accounting.found, db_url)
    jobs = [Job(exercise, student, str(path)) for exercise, student, path in accounting.found]
    counts = {"up": 0, "down": 0, "unchanged": 0, "new": 0, "failed": 0}
    width = max(len(clean_text(student, 80)) for _, student, _ in accounting.found)
    announce(jobs, workers)
    for done, ((exercise, student, path), new) in enumerate(
        zip(accounting.found, grade_all(jobs, workers), strict=True), start=1
    ):
        old = before.get((exercise, student), Before("new"))
        print(change_line(student, exercise, path, old, new, width), flush=True)
        print(f"attn-grade regrade: {done}/{len(jobs)} graded", file=sys.stderr, flush=True)
        counts[kind_of(old, new)] += 1
    print(
        f"\n{len(jobs)} submission(s): "
        + ", ".join(f"{n} {kind}" for kind, n in counts.items() if n or kind != "failed")
    )
    print(WRITE_HINT)
    return 1 if accounting.problems else 0


def announce(jobs: list[Job], workers: int) -> None:
    """Before the first line (which can take a minute): what is being done, and how long it
    should take from the exercises' grading-time estimates."""
    from autograder.core.registry import grading_seconds

    estimate = sum(grading_seconds(job.exercise) for job in jobs) / max(1, min(workers, len(jobs)))
    print(
        f"attn-grade regrade: grading {len(jobs)} submission(s) with the current checks on "
        f"{workers} worker(s), about {max(1, round(estimate / 60))} min; each line appears as "
        "its submission is graded",
        file=sys.stderr,
        flush=True,
    )


def kind_of(old: Before, new: Outcome) -> str:
    if new.error:
        return "failed"
    if old.score is None:
        return "new"
    if abs(new.score - old.score) < 1e-9:
        return "unchanged"
    return "up" if new.score > old.score else "down"
