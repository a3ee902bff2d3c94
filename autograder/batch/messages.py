"""What crosses process boundaries in a batch: typed, plain data (pickled by the pool and Dask)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Graded:
    """A sandboxed grading of one notebook file (recorder.grade_file), made where the sandbox
    runs: `key` identifies the program graded, for GradeWithChecks; without it, `reason` says
    why the file could not be graded."""

    key: str | None
    report: dict | None  # GradeReport.to_dict()
    reason: str


@dataclass(frozen=True)
class Recorded:
    """A worker's result for one submission: what nbgrader's autograde wrote into the scratch
    gradebook (`extracted`, see scratch.extract) and the scratch folder it wrote the autograded
    notebook into (`autograded`, None if it wrote none), the report, why it could not be graded.
    With `environment` set, it was not graded at all: that says what failed (a write, the
    gradebook database), and nothing of it is recorded."""

    extracted: dict
    report: dict | None
    reason: str | None
    log: str  # nbgrader's log when it failed on the notebook
    autograded: str | None = None
    environment: str | None = None
