"""`attn-grade autograde`: grade every submitted notebook of a course, in parallel, through
nbgrader's own autograde; resumable, audited, and optionally on a Dask cluster.

Each submission goes through one worker process (recorder.py): the sandboxed checks, then
nbgrader's autograde into the worker's scratch gradebook. The parent merges each result into
the course's gradebook in one transaction (scratch.py) and then appends the submission's audit
record (audit.py). The audit record is the commit mark: a batch killed at any point and run
again regrades exactly the submissions without a record matching their notebook, the checks,
the grader and the isolation level (`--force` regrades all), and a merge repeated after a kill
overwrites the same rows, so nothing is lost, duplicated or half-written.

With `--scheduler`, the sandboxed grading runs as Dask tasks (dask_cluster.py) on an
authenticated cluster, each answer is checked before use (dask_results.py), and the workers here
only run nbgrader's part.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import sys
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path

from autograder.audit import log as audit
from autograder.batch import scratch
from autograder.batch.dask_cluster import Plan, SchedulerAccess
from autograder.batch.messages import Graded, Recorded
from autograder.batch.pool import worker_pool
from autograder.batch.table import score_table
from autograder.core import faults
from autograder.core.errors import UsageError
from autograder.core.status import Status
from autograder.course.api import CourseError, nbgrader_api
from autograder.exercises import EXERCISES, grading_seconds
from autograder.report.item_analysis import format_items, write_item_analysis

STATE_DIR = ".attn-grade"  # in the course: the batch lock and the workers' scratch gradebooks


@dataclass(frozen=True)
class Submitted:
    exercise: str
    student: str
    path: Path


@dataclass
class Outcome:
    """What the batch table and the item analysis need of one submission."""

    reason: str | None = None  # why it was not graded, if it was not
    report: dict | None = None
    skipped: bool = False  # up to date: graded by an earlier batch
    failed: bool = False  # the worker died: not graded, the batch exits 1


def find_submissions(course: Path, exercises: list[str]):
    """The gradable submissions, and an account of every other file (submitted.py)."""
    from autograder.course.submitted import account

    accounting = account(course, exercises)
    return [Submitted(*item) for item in accounting.found], accounting


class Progress:
    def __init__(self, total: int, label: str):
        self.total, self.done, self.label = total, 0, label
        self.started = time.monotonic()

    def step(self, text: str) -> None:
        self.done += 1
        width = 24
        filled = width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (width - filled)
        elapsed = time.monotonic() - self.started
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {text}"
        end = "\r" if sys.stderr.isatty() and self.done < self.total else "\n"
        print(line.ljust(100)[:100], end=end, file=sys.stderr, flush=True)


@contextlib.contextmanager
def batch_lock(course: Path):
    """One batch per course at a time (two would interleave nbgrader's files)."""
    state = Path(course) / STATE_DIR
    state.mkdir(exist_ok=True)
    with open(state / "batch.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another attn-grade batch is running on {course}") from None
        yield state


def _autograded_path(api, item: Submitted) -> Path:
    folder = api.coursedir.format_path(
        api.coursedir.autograded_directory, item.student, item.exercise
    )
    return Path(folder) / f"{item.exercise}.ipynb"


def stored_report(path: Path) -> dict | None:
    """The report GradeWithChecks stored in an autograded notebook (None if there is none)."""
    from autograder.grading.notebook import InvalidNotebook, read_json
    from autograder.report.data import report_from_metadata

    try:
        report = report_from_metadata(read_json(path))
    except (InvalidNotebook, OSError):
        return None
    return report.to_dict() if report is not None else None


def up_to_date(api, submissions: list[Submitted], level: str) -> dict[Submitted, Outcome]:
    """The submissions an earlier batch graded from these very bytes, with these checks, this
    grader and this isolation level, whose grades are in the gradebook: nothing to redo."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.core.versions import checks_digest, grader_version

    latest = audit.read(Path(api.coursedir.root)).latest()
    same = {"checks_sha256": checks_digest(), "grader_version": grader_version()}
    done: dict[Submitted, Outcome] = {}
    with Gradebook(api.coursedir.db_url, api.coursedir.course_id) as gradebook:
        for item in submissions:
            record = latest.get((item.exercise, item.student))
            if record is None or record.get("isolation") != level:
                continue
            if any(record.get(key) != value for key, value in same.items()):
                continue
            if record["status"] == Status.GRADER_ERROR:  # the grader failed: always try again
                continue
            if record["notebook_sha256"] != audit.sha256_file(item.path):
                continue
            try:
                gradebook.find_submission(item.exercise, item.student)
            except MissingEntry:
                continue
            report = stored_report(_autograded_path(api, item))
            if report is None and record["status"] != Status.INVALID_NOTEBOOK:
                continue
            reason = None if report is not None else "not graded (see the audit log)"
            done[item] = Outcome(reason=reason, report=report, skipped=True)
    return done


class Batch:
    """The parent's side: hand submissions to workers, merge and audit what comes back."""

    def __init__(self, api, course: Path, level: str):
        self.api, self.course, self.level = api, course, level
        self.batch_id = uuid.uuid4().hex
        self.outcomes: dict[Submitted, Outcome] = {}
        self.setup: tuple | None = None  # (course, db_url, scratch dir), for pool workers

    def finish(self, item: Submitted, result: Recorded, progress: Progress) -> None:
        """Merge one worker result into the gradebook, then append its audit record."""
        faults.reach("merge")
        scratch.merge(self.api.coursedir.db_url, self.api.coursedir.course_id, result.extracted)
        report = result.report or {
            "exercise": item.exercise,
            "seed": None,
            "isolation": self.level,
            "status": Status.INVALID_NOTEBOOK,
            "checks": [],
        }
        faults.reach("audit")
        line = audit.record(
            report,
            course=self.course,
            notebook=item.path,
            student=item.student,
            batch=self.batch_id,
        )
        audit.append(self.course, line)
        if result.log:
            print(result.log, file=sys.stderr)
        self.outcomes[item] = Outcome(reason=result.reason, report=result.report)
        text = result.reason or f"{line['score']:g}/{line['max_score']:g}"
        progress.step(f"{item.student}/{item.exercise}: {text}")

    def run(self, pending: list[Submitted], pool, state: Path, scheduler: Plan | None):
        """Grade `pending` in this process (`pool` None) or in the pool's workers."""
        from autograder.batch import recorder

        client = None
        if scheduler is not None:  # before any work: an unreachable cluster is a usage error
            from autograder.batch.dask_cluster import connect

            client = connect(scheduler)
        scratch_dir = state / "scratch"
        shutil.rmtree(scratch_dir, ignore_errors=True)  # left by a killed batch
        scratch_dir.mkdir()
        progress = Progress(len(pending), "grading ")
        try:
            if pool is None:
                worker = recorder.Recorder(self.course, self.api.coursedir.db_url, scratch_dir)
                for item in pending:
                    result = worker.record(item.exercise, item.student, str(item.path))
                    self.finish(item, result, progress)
                return
            self.setup = (str(self.course), self.api.coursedir.db_url, str(scratch_dir))
            try:
                if scheduler is None:
                    self._local(pool, pending, progress)
                else:
                    self._on_dask(pool, pending, progress, client)
            except BaseException:  # Ctrl-C or a failed merge: stop, don't finish the queue
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        finally:
            shutil.rmtree(scratch_dir, ignore_errors=True)

    def _collect(self, futures: dict[Future, Submitted], progress: Progress, block: bool) -> None:
        finished, _ = wait(list(futures), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for future in finished:
            item = futures.pop(future)
            try:
                result = future.result()
            except Exception as error:  # noqa: BLE001 - the worker died: say so, go on
                reason = f"worker failed ({type(error).__name__})"
                self.outcomes[item] = Outcome(reason=reason, failed=True)
                progress.step(f"{item.student}/{item.exercise}: worker failed")
                continue
            self.finish(item, result, progress)

    def _local(self, pool, pending: list[Submitted], progress: Progress) -> None:
        from autograder.batch.recorder import record_in_worker

        futures = {
            pool.submit(record_in_worker, self.setup, i.exercise, i.student, str(i.path)): i
            for i in pending
        }
        while futures:
            self._collect(futures, progress, block=True)

    def _on_dask(self, pool, pending: list[Submitted], progress: Progress, client) -> None:
        from distributed import as_completed

        from autograder.batch import dask_results
        from autograder.batch.dask_client import workers_of
        from autograder.batch.dask_cluster import grade_on_worker
        from autograder.batch.recorder import record_in_worker
        from autograder.core.versions import checks_digest

        level = self.level_name
        try:
            remote = {}
            for item in pending:
                key = dask_results.expected_key(item.exercise, item.student, item.path)
                future = client.submit(
                    grade_on_worker,
                    item.exercise,
                    item.student,
                    item.path.read_bytes(),
                    level,
                    checks_digest(),
                    pure=False,
                )
                remote[future] = (item, key)
            local: dict[Future, Submitted] = {}
            for future in as_completed(list(remote)):
                item, key = remote.pop(future)
                graded: Graded | None
                try:  # the answer is data: parsed and checked here, never unpickled
                    graded = dask_results.decode(future.result(), item.exercise, key, level)
                except Exception as error:  # noqa: BLE001 - graded here instead, with a word
                    print(
                        f"attn-grade autograde: {item.student}/{item.exercise}: the Dask task "
                        f"on worker {workers_of(client, future)} "
                        f"{dask_results.failure(error)}; graded locally",
                        file=sys.stderr,
                    )
                    graded = None
                record = (item.exercise, item.student, str(item.path), graded)
                local[pool.submit(record_in_worker, self.setup, *record)] = item
                self._collect(local, progress, block=False)
            while local:
                self._collect(local, progress, block=True)
        finally:
            client.close()

    @property
    def level_name(self) -> str:
        from autograder.sandbox import isolation

        return isolation.choose().level


def autograde_course(
    course: Path,
    exercises: list[str] | None = None,
    workers: int = 2,
    db_url: str | None = None,
    scheduler: SchedulerAccess | None = None,
    force: bool = False,
    student: str | None = None,
) -> int:
    """Autograde all submissions that need it (or every submission of one `student`, up to
    date or not); print a table. Returns the process exit code."""
    from autograder.batch.dask_cluster import plan
    from autograder.sandbox import isolation

    cluster = plan(scheduler) if scheduler is not None else None  # refused before any work
    try:
        api = nbgrader_api(course, db_url)
    except CourseError as error:
        print(f"attn-grade autograde: {error}", file=sys.stderr)
        return 2
    course = Path(api.coursedir.root)
    isolation.require_private(isolation.choose(), [course])
    level = isolation.choose().describe()
    with batch_lock(course) as state:
        submissions, accounting = find_submissions(course, exercises or list(EXERCISES))
        if student is not None:  # one student's regrade
            submissions = [item for item in submissions if item.student == student]
            mine = (f"{student}/", f"{student}:")
            accounting.problems = [p for p in accounting.problems if p.startswith(mine)]
            force = True
            if not submissions:
                raise UsageError(f"no submitted notebook of student {student!r} to grade")
        for problem in accounting.problems:
            print(f"attn-grade autograde: {problem}", file=sys.stderr)
        if not submissions:
            print("attn-grade autograde: no submitted notebooks (run `nbgrader collect`?)")
            return 1 if accounting.problems else 0
        batch = Batch(api, course, level)
        if not force:
            batch.outcomes.update(up_to_date(api, submissions, level))
        pending = [item for item in submissions if item not in batch.outcomes]
        if batch.outcomes:
            print(
                f"attn-grade autograde: {len(batch.outcomes)} of {len(submissions)} submissions "
                "are already graded from the same notebook and checks (the audit log says so); "
                "grading the other "
                f"{len(pending)} (--force regrades all)",
                file=sys.stderr,
            )
        if pending:  # longest first: a slow notebook started last keeps the batch waiting
            pending.sort(key=lambda item: -grading_seconds(item.exercise))
            # the workers start only now that there is work (pool.worker_pool); with
            # --scheduler the pool runs nbgrader's part only, in one process or more
            with worker_pool(workers, len(pending), always=cluster is not None) as pool:
                batch.run(pending, pool, state, cluster)
    return summarize(api, course, submissions, accounting, batch.outcomes)


def summarize(api, course: Path, submissions, accounting, outcomes) -> int:
    """The batch table, the item analysis and the exit code."""
    from autograder.core.results import GradeReport

    notes = table_notes(submissions, accounting.notes, outcomes)
    print(score_table(api, submissions, notes))
    for problem in accounting.problems:
        print(f"NOT GRADED   {problem}")
    reports = [
        GradeReport.from_dict(outcomes[item].report)
        for item in submissions
        if item in outcomes and outcomes[item].report
    ]
    rows = write_item_analysis(reports, course / "item_analysis.csv")
    print(f"\nitem analysis ({course / 'item_analysis.csv'}):")
    print(format_items(rows))
    print(f"\naudit log: {audit.log_path(course)} (`attn-grade verify` regrades from it)")
    failed = [item for item in submissions if item not in outcomes or outcomes[item].failed]
    if accounting.problems:
        print(f"submissions not graded: {len(accounting.problems)} (listed above)")
    if failed:
        print(
            f"not graded because a worker failed: {len(failed)}; run the batch again to grade them"
        )
    return 1 if accounting.problems or failed else 0


def table_notes(submissions, accounting_notes: dict, outcomes: dict) -> dict:
    """The note column of the batch table, per (exercise, student)."""
    notes = {}
    for item in submissions:
        outcome = outcomes.get(item, Outcome(reason="not graded (the batch was interrupted)"))
        note = "; ".join(filter(None, [outcome.reason, accounting_notes.get(_key(item))]))
        status = (outcome.report or {}).get("status", Status.OK)
        if status != Status.OK:  # timeout, crashed, tampered, ...: the instructor should look
            note = f"status {status}" + (f"; {note}" if note else "")
        if outcome.skipped:
            note = "; ".join(filter(None, [note, "up to date"]))
        notes[_key(item)] = note
    return notes


def _key(item: Submitted) -> tuple[str, str]:
    return (item.exercise, item.student)
