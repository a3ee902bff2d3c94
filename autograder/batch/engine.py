"""`attn-grade autograde`: grade every submitted notebook of a course, in parallel, through
nbgrader's own autograde; resumable, audited, and optionally on a Dask cluster.

Each submission goes through one worker process (recorder.py): the sandboxed checks, then
nbgrader's autograde into the worker's scratch gradebook and folder. The parent moves the
autograded folder into the course, merges the grades into the course's gradebook in one
transaction (scratch.py) and then appends the submission's audit record (audit.py). The audit
record is the commit mark: a batch killed at any point and run again regrades exactly the
submissions that are not up to date (resume.py; `--force` regrades all), and a merge repeated
after a kill overwrites the same rows, so nothing is lost, duplicated or half-written.

A failure of the environment is retried and then said, never recorded as the student's
(retry.py); a dead worker is replaced and its submission handed out again (dispatch.py); SIGINT
and SIGTERM stop the batch between two submissions (stops.py).

With `--scheduler`, the sandboxed grading runs as Dask tasks (dask_cluster.py) on an
authenticated cluster, each answer is checked before use (dask_results.py), and nbgrader's part
runs here: in the batch's own process, or in its workers with `--workers N` (N > 1).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from autograder.audit import log as audit
from autograder.audit.gradebook import gradebook_name
from autograder.batch import scratch
from autograder.batch.dask_cluster import Plan, SchedulerAccess
from autograder.batch.dispatch import Dispatcher
from autograder.batch.messages import Graded, Recorded
from autograder.batch.pool import worker_count, worker_pool
from autograder.batch.resume import autograded_path, course_reports, read_gradebook, up_to_date
from autograder.batch.retry import FILE_DELAYS, quiet_database_tracebacks, retrying
from autograder.batch.stops import Stopped, StopSignals
from autograder.batch.table import (
    ENVIRONMENT,
    GRADER,
    Outcome,
    Submitted,
    score_table,
    stopped,
    summarize,
    table_notes,
)
from autograder.core import faults
from autograder.core.errors import EnvironmentFailure, UsageError, environment_cause
from autograder.core.registry import EXERCISES, any_trains, grading_seconds
from autograder.core.status import Status
from autograder.course.api import CourseError, nbgrader_api

STATE_DIR = ".attn-grade"  # in the course: the batch lock and the workers' scratch gradebooks
__all__ = ["Outcome", "Submitted", "autograde_course", "score_table", "table_notes"]


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


class Batch:
    """The parent's side: hand submissions to workers, merge and audit what comes back."""

    def __init__(self, api, course: Path, level: str):
        self.api, self.course, self.level = api, course, level
        self.batch_id = uuid.uuid4().hex
        self.outcomes: dict[Submitted, Outcome] = {}
        self.setup: tuple | None = None  # (course, db_url, scratch dir), for pool workers
        self.stops = StopSignals()  # the one autograde_course holds, once it holds one
        self.trash: Path | None = None  # in the scratch folder: autograded folders replaced
        # (exercise, student) -> the written answers' digests of its newest audit record: the
        # text each hand grade was given for (scratch.review_due)
        self.graded: dict[tuple[str, str], dict] = {}

    def finish(self, item: Submitted, result: Recorded, progress: Progress) -> None:
        """Put the autograded folder in place, merge the grades into the gradebook, then
        append the audit record: whole, even when a stop arrives meanwhile."""
        with self.stops.deferred():
            if result.environment:
                self.not_graded(item, result.environment, progress)
                return
            faults.reach("merge")
            target = autograded_path(self.api, item.exercise, item.student).parent
            built = Path(result.autograded) if result.autograded else None
            trash = self.trash or self.course / STATE_DIR / "scratch" / "trash"
            try:
                retrying(
                    lambda: scratch.place(built, target, trash),
                    f"writing {target}",
                    delays=FILE_DELAYS,
                )
            except EnvironmentFailure as error:
                if everywhere(error):  # a full disk: every submission would fail alike
                    raise
                self.not_graded(item, str(error), progress)
                return
            url, course_id = self.api.coursedir.db_url, self.api.coursedir.course_id
            graded = self.graded.get((item.exercise, item.student))
            retrying(
                lambda: scratch.merge(url, course_id, result.extracted, graded),
                f"writing the gradebook {gradebook_name(url)}",
            )
            self.audit(item, result, progress)

    def audit(self, item: Submitted, result: Recorded, progress: Progress) -> None:
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
            answers=result.extracted.get("answers"),
        )
        path = audit.log_path(self.course)
        retrying(lambda: audit.append(self.course, line), f"writing {path}", delays=FILE_DELAYS)
        if result.log:
            print(result.log, file=sys.stderr)
        self.outcomes[item] = Outcome(reason=result.reason, report=result.report)
        text = result.reason or f"{line['score']:g}/{line['max_score']:g}"
        progress.step(f"{item.student}/{item.exercise}: {text}")

    def not_graded(self, item: Submitted, why: str, progress: Progress, environment=True):
        """Nothing recorded: the batch says why, and the rerun grades it."""
        kind = "not graded" if environment else "not graded, the grader failed"
        who = f"{item.student}/{item.exercise}"
        print(f"attn-grade autograde: {who}: {kind}: {why}", file=sys.stderr, flush=True)
        failed = ENVIRONMENT if environment else GRADER
        self.outcomes[item] = Outcome(reason=f"{kind} (said above)", failed=failed)
        progress.step(f"{who}: {kind}")

    def plan(self, submissions: list[Submitted], force: bool) -> list[Submitted]:
        """What to grade: all (`force`) or what is not up to date (resume.py), said."""
        if force:  # the gradebook is read before any work: one that cannot be, stops here
            read_gradebook(self.api, lambda gradebook: gradebook.assignments)
        else:
            self.outcomes.update(up_to_date(self.api, submissions, self.level))
        pending = [item for item in submissions if item not in self.outcomes]
        latest = audit.read(self.course).latest() if pending else {}
        self.graded = {key: line.get("answers") or {} for key, line in latest.items()}
        if self.outcomes:
            print(
                f"attn-grade autograde: {len(self.outcomes)} of {len(submissions)} submissions "
                "are already graded from the same notebook and checks (the audit log says so); "
                "grading the other "
                f"{len(pending)} (--force regrades all)",
                file=sys.stderr,
            )
        return pending

    def run(self, pending: list[Submitted], pool, scratch_dir: Path, scheduler: Plan | None):
        """Grade `pending` in this process (`pool` None) or in the pool's workers; with
        `scheduler`, the sandboxed part on that Dask cluster."""
        if scheduler is None:
            self._grade(pending, pool, scratch_dir, None)
            return
        from autograder.batch.dask_cluster import connect

        client = connect(scheduler)  # before any work: an unreachable cluster is a usage error
        try:
            self._grade(pending, pool, scratch_dir, client)
        finally:  # whatever ends the batch: a stop, a failure, or the last answer
            client.close()

    def _grade(self, pending: list[Submitted], pool, scratch_dir: Path, client) -> None:
        """Grade `pending` here or in `pool`, with the sandboxed part on the Dask cluster of
        `client` if one is given."""
        from autograder.batch import recorder

        self.trash = scratch_dir / "trash"
        progress = Progress(len(pending), "grading ")
        if pool is None:  # a grading batch's template is starting already (pool.worker_pool)
            worker = recorder.Recorder(self.course, self.api.coursedir.db_url, scratch_dir)

            def here(item: Submitted, graded: Graded | None) -> None:
                try:
                    result = worker.record(item.exercise, item.student, str(item.path), graded)
                except Exception as error:  # noqa: BLE001 - as a pool's Dispatcher: say so, go on
                    why = f"the grading failed ({type(error).__name__}: {error})"
                    self.not_graded(item, why, progress, environment=False)
                    return
                self.finish(item, result, progress)

            if client is None:
                for item in pending:
                    here(item, None)
            else:  # nbgrader's part of each answer here, as it comes in
                self._on_dask(pending, client, here)
            return
        self.setup = (str(self.course), self.api.coursedir.db_url, str(scratch_dir))
        dispatcher = Dispatcher(
            pool,
            recorder.record_in_worker,
            lambda item, result: self.finish(item, result, progress),
            lambda item, why, environment: self.not_graded(item, why, progress, environment),
        )

        def to_pool(item: Submitted, graded: Graded | None) -> None:
            dispatcher.add(item, self.setup, item.exercise, item.student, str(item.path), graded)
            dispatcher.pump(block=False)

        if client is None:
            for item in pending:
                dispatcher.add(item, self.setup, item.exercise, item.student, str(item.path))
        else:
            self._on_dask(pending, client, to_pool)
        dispatcher.drain()

    def _on_dask(
        self, pending: list[Submitted], client, take: Callable[[Submitted, Graded | None], None]
    ) -> None:
        """Grade `pending` on the cluster; `take(item, graded)` each answer as it comes in
        (graded None: the task failed or its answer was refused; `take` grades it here)."""
        from distributed import as_completed

        from autograder.audit.digest import checks_digest
        from autograder.batch import dask_results
        from autograder.batch.dask_client import workers_of
        from autograder.batch.dask_cluster import grade_on_worker

        level = self.level_name
        remote = {}
        for item in pending:
            key = dask_results.expected_key(item.exercise, item.student, item.path)
            future = client.submit(
                grade_on_worker,
                item.exercise,
                item.student,
                item.path.read_bytes(),
                level,
                checks_digest(item.exercise),
                pure=False,
            )
            remote[future] = (item, key)
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
            take(item, graded)

    @property
    def level_name(self) -> str:
        from autograder.sandbox import isolation

        return isolation.choose().level


def everywhere(error: BaseException) -> bool:
    """Whether an environment failure would fail every submission alike (a full disk, a file
    system mounted read-only): the batch stops instead of trying each."""
    cause = environment_cause(error)
    return isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


@contextlib.contextmanager
def scratch_folder(state: Path):
    """The batch's scratch folder (workers' gradebooks and autograded folders), removed after
    the workers have stopped (the pool is opened inside this block)."""
    folder = state / "scratch"
    shutil.rmtree(folder, ignore_errors=True)  # left by a killed batch
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def autograde_course(
    course: Path,
    exercises: list[str] | None = None,
    workers: int | None = None,
    db_url: str | None = None,
    scheduler: SchedulerAccess | None = None,
    force: bool = False,
    student: str | None = None,
) -> int:
    """Autograde all submissions that need it (or every submission of one `student`, up to
    date or not); print a table. Returns the process exit code. `workers`: the grading
    processes, or None to let the batch choose (pool.worker_count)."""
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
    quiet_database_tracebacks()
    batch = Batch(api, course, level)
    with batch_lock(course) as state, batch.stops:
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
        try:
            pending = batch.plan(submissions, force)
            if pending:  # longest first: a slow notebook started last keeps the batch waiting
                pending.sort(key=lambda item: -grading_seconds(item.exercise))
                exercises_pending = [item.exercise for item in pending]
                # with --scheduler the local side runs nbgrader's part only, in this process
                # or in a pool (pool.worker_count); workers start only now that there is work
                # (pool.worker_pool), and stop before the scratch folder goes
                grades = cluster is None
                with (
                    scratch_folder(state) as scratch_dir,
                    worker_pool(
                        worker_count(workers, exercises_pending, grades),
                        len(pending),
                        optimizers=any_trains(exercises_pending),
                        grades=grades,
                    ) as pool,
                ):
                    batch.run(pending, pool, scratch_dir, cluster)
            reports = course_reports(api, course, batch.outcomes)
            return summarize(api, course, submissions, accounting, batch.outcomes, reports)
        except Stopped as stop:
            return stopped(stop.name, stop.signum, submissions, batch.outcomes)
        except EnvironmentFailure as error:
            kept = sum(1 for o in batch.outcomes.values() if not o.failed and not o.skipped)
            if not kept:
                raise
            message = f"{error} ({kept} submission(s) graded before are kept)"
            raise EnvironmentFailure(message) from error
