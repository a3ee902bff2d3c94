"""Faults injected into a running `attn-grade autograde`, and what a course holds afterwards.

A batch runs as its own process group (Ctrl-C reaches the whole group) with a private TMPDIR
(whatever it leaves there shows). `ATTN_GRADE_STOP_AT=POINT:N` (autograder/core/faults.py)
stops it at a known step; the test injects its fault (kills a worker, stops the database,
sends a signal) and lets it go on: no sleep decides the moment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.audit import log as audit
from autograder.core import faults
from autograder.course.build import tool_env
from autograder.sandbox.inside.supervisor import children_by_parent, stat_fields

EXERCISE = "ex1_numpy_attention"
KEPT_IN_TMPDIR = ("attn-grade-mplcache",)  # the font cache is kept on purpose


def descendants(pid: int) -> set[int]:
    tree, found, todo = children_by_parent(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        try:
            if stat_fields(f"/proc/{pid}/stat")[0] != b"Z":
                living.add(pid)
        except FileNotFoundError:
            pass
    return living


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def interruptible() -> None:
    """In the batch's process: SIGINT as in a command typed at a terminal (a test run started
    in the background by a script inherits it ignored, and Python then leaves it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Batch:
    """One `attn-grade autograde` process; `err` collects its stderr once it has ended."""

    process: subprocess.Popen
    tmpdir: Path
    err: str = ""
    seen: set[int] = field(default_factory=set)  # its descendants, sampled while stopped
    said: str = ""  # stderr read while it ran (read_until)

    @classmethod
    def start(cls, course: Path, *extra: str, stop_at: str = "", env: dict | None = None):
        tmpdir = Path(tempfile.mkdtemp(prefix="agf-", dir="/tmp"))  # short: a socket goes there
        environment = {**tool_env(), "TMPDIR": str(tmpdir), **(env or {})}
        if stop_at:
            environment[faults.STOP_VARIABLE] = stop_at
        command = [sys.executable, "-m", "autograder.cli.app", "autograde", "--course"]
        process = subprocess.Popen(
            [*command, str(course), "--workers", "2", *extra],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=interruptible,
        )
        return cls(process, tmpdir)

    def wait_stopped(self, deadline: float = 600) -> None:
        """Until the batch has stopped itself at its ATTN_GRADE_STOP_AT point."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            state = stat_fields(f"/proc/{self.process.pid}/stat")[0]
            if state == b"T":
                self.seen = descendants(self.process.pid)
                return
            if self.process.poll() is not None:
                self.finish()
                raise AssertionError(f"the batch ended before its stop point:\n{self.err}")
            time.sleep(0.05)
        raise AssertionError("the batch never reached its stop point")

    def fork_servers(self) -> list[int]:
        children = children_by_parent().get(self.process.pid, [])
        return [pid for pid in children if "forkserver" in command_line(pid)]

    def workers(self) -> list[int]:
        """The pool's worker processes: the fork server's children."""
        tree = children_by_parent()
        return [pid for server in self.fork_servers() for pid in tree.get(server, [])]

    def read_until(self, text: str) -> str:
        """stderr's lines up to the first one holding `text` (kept for `err`)."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.said += line
            if text in line:
                return line
        raise AssertionError(f"the batch ended without saying {text!r}:\n{self.said}")

    def go_on(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def finish(self, timeout: float = 600) -> int:
        _out, rest = self.process.communicate(timeout=timeout)
        self.err = self.said + rest
        return self.process.returncode

    def left_in_tmpdir(self) -> list[str]:
        left = self.tmpdir.iterdir()
        return sorted(p.name for p in left if not p.name.startswith(KEPT_IN_TMPDIR))

    def orphans(self) -> set[int]:
        """Its processes still alive once it has ended (given 20 s to notice)."""
        end = time.monotonic() + 20
        while alive(self.seen) and time.monotonic() < end:
            time.sleep(0.2)
        return alive(self.seen)


def run(course: Path, *extra: str, env: dict | None = None) -> tuple[int, str]:
    batch = Batch.start(course, *extra, env=env)
    code = batch.finish()
    assert not batch.left_in_tmpdir(), batch.left_in_tmpdir()
    return code, batch.err


def gradebook_rows(url: str) -> dict[str, list[tuple]]:
    """student -> every grade and comment row nbgrader keeps for the submission."""
    from nbgrader.api import Gradebook

    rows: dict[str, list[tuple]] = {}
    with Gradebook(url) as gradebook:
        for submission in gradebook.assignment_submissions(EXERCISE):
            found = [("timestamp", str(submission.timestamp))]
            for notebook in submission.notebooks:
                found += [
                    (g.name, g.cell.cell_type, g.auto_score, g.needs_manual_grade)
                    for g in notebook.grades
                ]
                found += [(c.name, c.auto_comment) for c in notebook.comments]
            rows[submission.student.id] = sorted(found, key=str)
    return rows


def submission_counts(url: str) -> dict[str, int]:
    """student -> submitted_assignment rows (raw SQL: a duplicate would show)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as db:
            rows = db.execute(
                text("select student_id, count(*) from submitted_assignment group by student_id")
            ).fetchall()
    finally:
        engine.dispose()
    return {student: count for student, count in rows}


def sqlite_url(course: Path) -> str:
    return f"sqlite:///{course / 'gradebook.db'}"


def autograded_report(course: Path, student: str) -> dict | None:
    path = course / "autograded" / student / EXERCISE / f"{EXERCISE}.ipynb"
    if not path.is_file():
        return None
    return json.loads(path.read_text())["metadata"].get("attn_grade_report")


@dataclass(frozen=True)
class Graded:
    """What a course holds for its submissions after a batch."""

    rows: dict[str, list[tuple]]  # the gradebook's rows per student
    scores: dict[str, float]  # the newest audit record's score per student
    records: dict[str, int]  # audit records per student


def graded(course: Path, url: str | None = None) -> Graded:
    log = audit.read(course)
    records: dict[str, int] = {}
    for line in log.records:
        records[line["student"]] = records.get(line["student"], 0) + 1
    scores = {student: line["score"] for (_, student), line in log.latest().items()}
    return Graded(gradebook_rows(url or sqlite_url(course)), scores, records)


def assert_whole(course: Path, url: str | None = None) -> None:
    """Whatever happened: each submission in the gradebook once; each one the gradebook holds
    has its autograded notebook; each audit record is of a submission in the gradebook with the
    same score; no scratch folder."""
    url = url or sqlite_url(course)
    counts = submission_counts(url)
    assert all(count == 1 for count in counts.values()), counts
    now = graded(course, url)
    for student in now.rows:
        assert autograded_report(course, student) is not None, f"{student}: no autograded notebook"
    for student, score in now.scores.items():
        assert student in now.rows, f"{student}: an audit record, no gradebook row"
        auto = sum(row[2] or 0 for row in now.rows[student] if len(row) == 4)
        assert abs(auto - score) < 1e-9, (student, auto, score)
    scratch = course / ".attn-grade" / "scratch"
    assert not scratch.exists() or not any(scratch.iterdir()), list(scratch.iterdir())


def assert_converged(course: Path, unfaulted: Graded, url: str | None = None, once=True):
    """The grades of an unfaulted run, nothing lost or duplicated (`once`: one audit record
    per submission, as after a batch that was not forced)."""
    assert_whole(course, url)
    now = graded(course, url)
    assert now.rows == unfaulted.rows
    assert now.scores == unfaulted.scores
    if once:
        assert now.records == dict.fromkeys(unfaulted.rows, 1)
