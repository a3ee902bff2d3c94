"""Regrading for `attn-grade verify` and `attn-grade regrade --diff`: grade notebooks again, in
spawned worker processes (as the batch does), and say how per-check points changed.

Nothing here writes: a regrade is compared with what was recorded, never stored.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from autograder.core.status import Status
from autograder.core.text import clean_text


@dataclass(frozen=True)
class Job:
    """One notebook to grade: a recorded `seed`, `limits` and `budget` (audit-log dicts)
    replay a grading; None grades as `attn-grade autograde` would now."""

    exercise: str
    student: str
    path: str
    seed: int | None = None
    limits: dict | None = None
    budget: dict | None = None


@dataclass(frozen=True)
class Outcome:
    status: str
    checks: dict[str, float] = field(default_factory=dict)  # check name -> points earned
    error: str = ""  # the grader itself failed on this notebook: no points

    @property
    def score(self) -> float:
        return round(sum(self.checks.values()), 6)


def _dataclass_from(kind: type, values: dict | None):
    """`kind` from a recorded dict; fields this version does not know are ignored."""
    known = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in (values or {}).items() if k in known})


def grade_job(job: Job) -> Outcome:
    """Grade one notebook (in a worker process). A notebook that cannot be graded as its
    exercise's is a graded outcome (`invalid_notebook`), as in the batch."""
    from autograder.audit import log as audit
    from autograder.grading.budget import Budget
    from autograder.grading.runner import grade_notebook
    from autograder.sandbox.limits import Limits

    try:
        report = grade_notebook(
            Path(job.path),
            exercise=job.exercise,
            student=job.student,
            seed=job.seed,
            limits=_dataclass_from(Limits, job.limits),
            budget=_dataclass_from(Budget, job.budget),
        )
    except Exception as error:  # noqa: BLE001 - one notebook never stops the others
        return Outcome(
            Status.GRADER_ERROR, error=f"{type(error).__name__}: {clean_text(error, 300)}"
        )
    return Outcome(str(report.status), audit.check_points(report.to_dict()))


def grade_all(jobs: list[Job], workers: int) -> Iterator[Outcome]:
    """The jobs' outcomes in the jobs' order, each as soon as it and those before it are
    done; with more than one worker, in spawned processes (no fork of a parent with threads)."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(grade_job, jobs)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        yield from pool.map(grade_job, jobs)


def points(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def check_changes(old: dict[str, float], new: dict[str, float]) -> list[str]:
    """`name old -> new` for every check whose points differ. A check on one side only (shown
    `-` on the other) counts as 0 there: the batch records a notebook nbgrader cannot open
    with no checks, and its regrade fails every check."""
    changes = []
    for name in [*old, *(n for n in new if n not in old)]:
        before, after = old.get(name), new.get(name)
        if not math.isclose(before or 0.0, after or 0.0, abs_tol=1e-9):
            changes.append(f"{clean_text(name, 120)} {points(before)} -> {points(after)}")
    return changes
