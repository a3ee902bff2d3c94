"""The audit log: one JSON line per graded submission, appended, never rewritten.

A line says what produced a grade, so that anybody can prove it later (`attn-grade verify`
regrades from it) and so that an interrupted batch knows what is already done:

    {"schema": 1, "recorded_at": "2026-11-22T20:51:03Z", "batch": "<uuid4 hex>",
     "exercise": "ex1_numpy_attention", "student": "alice",
     "notebook": "submitted/alice/ex1_numpy_attention/ex1_numpy_attention.ipynb",
     "notebook_sha256": "...", "grader_version": "0.4.0", "checks_version": "3",
     "checks_sha256": "...", "seed": 123, "isolation": "jail (bubblewrap ...)",
     "limits": {...}, "budget": {...}, "status": "ok", "score": 8.0, "max_score": 8.0,
     "checks": {"test_name": 1.5, ...}, "answers": {"answer_scaling": "<sha256>"}}

`answers` is the SHA-256 of each written answer's text (null: not found): a hand grade is
flagged for review at a regrade only when its answer's text is not the newest record's
(batch/scratch.py). `notebook` is relative to the course root. The log lives at
COURSE/audit.jsonl. Appends are one `write` of one line on a file opened with O_APPEND and then
fsync'd; a line cut short by a kill (no newline at the end) is terminated before the next append
and skipped by readers, who count it in `Log.torn`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.core import faults
from autograder.core.status import Status

SCHEMA = 1
FILE_NAME = "audit.jsonl"


def log_path(course: Path) -> Path:
    return Path(course) / FILE_NAME


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_points(report: dict) -> dict[str, float]:
    """Check name -> points earned, from a report (GradeReport.to_dict() holds `passed` and
    `max_points`; the earned points are a property it does not serialise)."""
    return {c["name"]: c["max_points"] if c["passed"] else 0.0 for c in report.get("checks", [])}


def record(
    report: dict,
    *,
    course: Path,
    notebook: Path,
    student: str,
    batch: str,
    limits=None,
    budget=None,
    notebook_sha256: str | None = None,
    answers: dict | None = None,
) -> dict:
    """The audit line for a grading report (GradeReport.to_dict()); `answers`: grade id ->
    the SHA-256 of each written answer's text (batch/scratch.py: the text a hand grade is for)."""
    from autograder.audit.digest import checks_digest
    from autograder.core.versions import CHECKS_VERSION, grader_version
    from autograder.grading.budget import Budget
    from autograder.sandbox.limits import Limits

    notebook = Path(notebook)
    try:
        relative = str(notebook.resolve().relative_to(Path(course).resolve()))
    except ValueError:
        relative = str(notebook)
    points = check_points(report)
    line = {
        "schema": SCHEMA,
        "recorded_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "batch": batch,
        "exercise": report["exercise"],
        "student": student,
        "notebook": relative,
        "notebook_sha256": notebook_sha256 or sha256_file(notebook),
        "grader_version": grader_version(),
        "checks_version": CHECKS_VERSION,
        "checks_sha256": checks_digest(report["exercise"]),
        "seed": report.get("seed"),
        "isolation": report.get("isolation", ""),
        "limits": asdict(limits or Limits()),
        "budget": asdict(budget or Budget()),
        "status": report.get("status", Status.OK),
        "score": sum(points.values()),
        "max_score": sum(c["max_points"] for c in report.get("checks", [])),
        "checks": points,
    }
    if answers is not None:
        line["answers"] = answers
    return line


def append(course: Path, line: dict) -> None:
    """Append one record durably (a single write, then fsync)."""
    path = log_path(course)
    data = (json.dumps(line, sort_keys=True, ensure_ascii=True) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(descriptor).st_size
        if size:
            with open(path, "rb") as handle:  # a line torn by a kill: end it first
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    data = b"\n" + data
        faults.reach("audit-write", lambda: os.write(descriptor, data[: len(data) // 2]))
        os.write(descriptor, data)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@dataclass
class Log:
    records: list[dict] = field(default_factory=list)
    torn: int = 0  # lines that are not a whole record (cut by a kill, or edited)

    def latest(self) -> dict[tuple[str, str], dict]:
        """The newest record per (exercise, student)."""
        newest: dict[tuple[str, str], dict] = {}
        for line in self.records:
            newest[(line["exercise"], line["student"])] = line
        return newest


REQUIRED = ("exercise", "student", "notebook", "notebook_sha256", "checks", "status")


def read(course: Path) -> Log:
    log = Log()
    path = log_path(course)
    if not path.exists():
        return log
    with open(path, "rb") as handle:
        for raw in handle:
            try:
                line = json.loads(raw)
            except ValueError:
                log.torn += 1
                continue
            if not isinstance(line, dict) or any(key not in line for key in REQUIRED):
                log.torn += 1
                continue
            log.records.append(line)
    return log


def read_warning(course: Path, command: str) -> Log:
    """The log, with a warning on stderr when some lines are not whole records."""
    import sys

    log = read(course)
    if log.torn:
        print(
            f"attn-grade {command}: warning: {log.torn} line(s) of {FILE_NAME} are not whole "
            "records (cut short by a kill, or edited) and were skipped",
            file=sys.stderr,
        )
    return log
