"""`attn-grade verify`: regrade each submission from its audit record and report any difference.

For each (exercise, student)'s latest record (every record with `every`): the notebook at the
recorded path must still have the recorded sha256; it is regraded with the recorded seed,
limits and budget, and its status and per-check points must equal the record's. In a course
with a gradebook, the gradebook must hold the latest record's score (an older backup restored
or an edit shows here; `attn-grade autograde` regrades such a submission). When the grader, the
checks or the isolation level differ from the record's, the line says so: a difference may come
from that rather than from a changed grade.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from autograder.audit import log as audit
from autograder.audit.gradebook import auto_scores
from autograder.audit.replay import Job, Outcome, check_changes, grade_all, points
from autograder.core.errors import UsageError
from autograder.core.registry import EXERCISES
from autograder.core.text import clean_text

EXIT_DIFFERENT = 1


@dataclass
class Verdict:
    record: dict
    differences: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)  # what else changed since the record

    def line(self, every: bool, width: int = 0) -> str:
        record = self.record
        student, exercise = clean_text(record["student"], 80), clean_text(record["exercise"], 80)
        who = f"{student:<{width}}  {exercise}"
        if every:
            who += f"  {clean_text(record.get('recorded_at', '?'), 40)}"
        text = "DIFFERENT: " + "; ".join(self.differences) if self.differences else "same"
        if self.context:
            because = "; ".join(self.context)
            text += f" (since the record: {because}" + (
                "; this may explain it)" if self.differences else ")"
            )
        return f"{who}  {text}"


def select(log: audit.Log, exercises: list[str], student: str | None, every: bool) -> list[dict]:
    """The records to verify, in exercise then student order (then recording order)."""
    records = log.records if every else list(log.latest().values())
    chosen = [
        r
        for r in records
        if (not exercises or r["exercise"] in exercises) and student in (None, r["student"])
    ]
    order = {name: index for index, name in enumerate(EXERCISES)}
    return sorted(chosen, key=lambda r: (order.get(r["exercise"], len(order)), str(r["student"])))


def notebook_problem(course: Path, record: dict) -> str | None:
    """Why the recorded notebook cannot be regraded as it was: missing or changed."""
    path = course / record["notebook"]
    if not path.is_file():
        return f"notebook missing ({clean_text(record['notebook'], 200)})"
    now = audit.sha256_file(path)
    if now != record["notebook_sha256"]:
        return f"notebook changed (sha256 {record['notebook_sha256'][:12]} -> {now[:12]})"
    return None


def context_changes(record: dict, isolation: str) -> list[str]:
    """The grader, checks and isolation now, where they differ from the record's."""
    from autograder.audit.digest import checks_digest
    from autograder.core.versions import CHECKS_VERSION, grader_version

    try:
        digest = checks_digest(str(record.get("exercise")))
    except UsageError:  # an exercise this grader does not have: no checks to compare with
        digest = "none (no such exercise)"
    now = {
        "grader_version": grader_version(),
        "checks_version": CHECKS_VERSION,
        "checks_sha256": digest,
        "isolation": isolation,
    }
    changes = []
    for key, value in now.items():
        recorded = str(record.get(key, "?"))
        if recorded != value:
            shown = (recorded[:12], value[:12]) if key == "checks_sha256" else (recorded, value)
            changes.append(f"{key} {clean_text(shown[0], 80)} -> {shown[1]}")
    return changes


def compare(record: dict, outcome: Outcome) -> list[str]:
    """Differences between a record and its regrade: the grader failing, status, checks."""
    differences = []
    if outcome.error:
        differences.append(f"the regrade failed ({outcome.error})")
    if outcome.status != record["status"]:
        differences.append(f"status {clean_text(record['status'], 40)} -> {outcome.status}")
    recorded = {str(k): float(v) for k, v in record["checks"].items()}
    differences += check_changes(recorded, outcome.checks)
    score = float(record.get("score", sum(recorded.values())))
    if differences or not math.isclose(score, outcome.score, abs_tol=1e-9):
        differences.append(f"score {points(score)} -> {points(outcome.score)}")
    return differences


def job_of(course: Path, record: dict) -> Job:
    return Job(
        record["exercise"],
        record["student"],
        str(course / record["notebook"]),
        seed=record.get("seed"),
        limits=record.get("limits"),
        budget=record.get("budget"),
    )


def gradebook_differences(course: Path, db_url: str | None, log: audit.Log, records) -> dict:
    """id(record) -> how the gradebook disagrees with it, for the latest record of each
    submission; nothing when the course has no gradebook (not an nbgrader course)."""
    latest = log.latest()
    keys = sorted({(r["exercise"], r["student"]) for r in records})
    scores = auto_scores(course, db_url, keys)
    if scores is None:
        return {}
    found = {}
    for key in keys:
        record, score = latest[key], scores.get(key)
        recorded = float(record.get("score", 0.0))
        if score is None:
            found[id(record)] = "not in the gradebook (`attn-grade autograde` grades it)"
        elif not math.isclose(score, recorded, abs_tol=1e-6):
            found[id(record)] = (
                f"the gradebook holds {points(score)}, the record {points(recorded)} "
                "(`attn-grade autograde` regrades it)"
            )
    return found


def verify_course(
    course: Path,
    exercises: list[str] | None = None,
    *,
    student: str | None = None,
    every: bool = False,
    workers: int = 2,
    db_url: str | None = None,
) -> int:
    """Print one line per record and a summary; 0 when every record reproduces, else 1."""
    from autograder.sandbox import isolation

    course = Path(course)
    if not audit.log_path(course).is_file():
        raise UsageError(
            f"no audit log at {audit.log_path(course)} (it is written by `attn-grade autograde`)"
        )
    log = audit.read_warning(course, "verify")
    records = select(log, exercises or [], student, every)
    if not records:
        raise UsageError(f"no audit record matches in {audit.log_path(course)}")
    level = isolation.choose().describe()
    gradebook = gradebook_differences(course, db_url, log, records)
    verdicts = [Verdict(r, context=context_changes(r, level)) for r in records]
    for verdict in verdicts:
        problem = notebook_problem(course, verdict.record)
        if problem:
            verdict.differences.append(problem)
    jobs = [job_of(course, v.record) for v in verdicts if not v.differences]
    outcomes = grade_all(jobs, workers)  # in the jobs' order, each line as soon as it is done
    width = max(len(clean_text(r["student"], 80)) for r in records)
    for verdict in verdicts:
        if not verdict.differences:
            verdict.differences += compare(verdict.record, next(outcomes))
        if id(verdict.record) in gradebook:
            verdict.differences.append(gradebook[id(verdict.record)])
        print(verdict.line(every, width), flush=True)
    print(summary(verdicts))
    return EXIT_DIFFERENT if any(v.differences for v in verdicts) else 0


def summary(verdicts: list[Verdict]) -> str:
    different = sum(1 for v in verdicts if v.differences)
    text = (
        f"\nverified {len(verdicts)} record(s): {len(verdicts) - different} same, "
        f"{different} different"
    )
    other = sum(1 for v in verdicts if v.context)
    if other:
        text += f"; {other} recorded with another grader, checks or isolation (said per line)"
    return text
