"""One submission through the sandboxed checks and nbgrader's own autograde, in a batch worker.

A Recorder belongs to one worker process. It owns a scratch gradebook (scratch.py) so that
nbgrader's autograde, with its many small writes, never waits for another worker; what autograde
wrote comes back as plain data for the batch parent to merge into the course's gradebook.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from autograder.core.speedups import skip_slow_optional_imports

skip_slow_optional_imports()  # the pool's fork server imports this module first: 0.9 s less

from autograder.batch import scratch  # noqa: E402
from autograder.batch.messages import Graded, Recorded  # noqa: E402
from autograder.course.api import nbgrader_api  # noqa: E402


def grade_file(exercise: str, student: str, path: str) -> Graded:
    """The sandboxed grading of one notebook file: its key and report when it was read, else
    why not. The key tells GradeWithChecks that the report is for this program."""
    from autograder.grading.notebook import InvalidNotebook, program_of, read_json
    from autograder.grading.runner import grade_loaded
    from autograder.nbgrader_plugins.preprocessors import report_key

    try:
        loaded = program_of(read_json(Path(path)), exercise)
    except InvalidNotebook as error:
        return Graded(None, None, str(error))
    report = grade_loaded(loaded, student=student, demos=True)
    return Graded(report_key(exercise, student, loaded), report.to_dict(), "")


def zero_grades(api, exercise: str, student: str, reason: str) -> None:
    """A notebook nbgrader could not process still gets a (zero) grade and no manual flag."""
    from nbgrader.api import Gradebook

    with Gradebook(api.coursedir.db_url, api.coursedir.course_id) as gradebook:
        gradebook.update_or_create_student(student)  # a student whose only notebook is broken
        gradebook.update_or_create_submission(exercise, student)
        notebook = gradebook.find_submission_notebook(exercise, exercise, student)
        for grade in notebook.grades:
            grade.auto_score = 0.0
            grade.needs_manual_grade = False
        for comment in notebook.comments:
            comment.auto_comment = f"Not graded: {reason}"
        gradebook.db.commit()


class Recorder:
    def __init__(self, course: Path, db_url: str | None, scratch_dir: Path):
        main = nbgrader_api(course, db_url)
        self.course_id = main.coursedir.course_id
        path = Path(scratch_dir) / f"gradebook-{os.getpid()}-{uuid.uuid4().hex[:8]}.db"
        self.api = nbgrader_api(course, scratch.create(main.coursedir.db_url, path))

    def record(
        self, exercise: str, student: str, path: str, graded: Graded | None = None
    ) -> Recorded:
        """Grade (unless `graded`, a grade_file() result from elsewhere, is given), autograde
        with nbgrader into the scratch gradebook, and return what to merge, with the report
        and, for a notebook that could not be graded, the reason."""
        from autograder.nbgrader_plugins.preprocessors import HANDOFF

        graded = graded or grade_file(exercise, student, path)
        report, reason = graded.report, graded.reason
        log = ""
        if graded.key is not None and graded.report is not None:
            with HANDOFF.offering(graded.key, graded.report):
                result = self.api.autograde(exercise, student, force=True, create=True)
                written = HANDOFF.written()
            report = written.to_dict() if written is not None else None
            if not result.get("success"):
                reason = "nbgrader could not process the notebook (see the log)"
                log = str(result.get("error") or result.get("log", ""))[-4000:]
                report = None
        if reason:
            zero_grades(self.api, exercise, student, reason)
        extracted = scratch.extract(self.api.coursedir.db_url, self.course_id, exercise, student)
        return Recorded(extracted, report, reason or None, log)


_WORKER: Recorder | None = None
# what every grading needs: loaded once by the pool's fork server, inherited by its workers
WORKER_MODULES = (__name__, "nbgrader.api", "torch", "autograder.grading.runner")
_SETUP: tuple | None = None


def process_start_time(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot (/proc/PID/stat, field 22): with the
    pid, it names one process, even after the pid is reused."""
    from autograder.sandbox.inside.supervisor import stat_fields

    return stat_fields(f"/proc/{pid}/stat")[19].decode()


def batch_identity() -> tuple[int, str]:
    """What a worker needs to die with this process: its pid and start time."""
    return os.getpid(), process_start_time(os.getpid())


def _die_with_batch(batch: tuple[int, str]) -> None:
    """A worker must not outlive a killed batch: it would go on writing autograded files
    while the re-run grades the same submissions. The workers are children of the pool's
    fork server, not of the batch, and the fork server lives as long as any worker does, so
    a thread watches the batch itself (a pidfd) and kills this worker, and with it its
    sandbox (bubblewrap's --die-with-parent, the supervisor's parent-death signal), when the
    batch is gone."""
    import signal
    import threading

    pid, started = batch

    def alive() -> bool:
        try:
            return process_start_time(pid) == started
        except OSError:
            return False

    handle = None
    try:
        handle = os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone already (alive() says so), or no pidfds: poll
        pass
    if not alive():
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        import select
        import time

        if handle is not None:
            select.select([handle], [], [])  # readable once the batch has exited
        else:
            while alive():
                time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-batch", daemon=True).start()


def _end_worker() -> None:
    """A worker's last act, from multiprocessing's exit function (after the pool's own
    finalizers of higher priority). A worker forked by the fork server ends with os._exit and
    never runs exit handlers, so they are run here: the sandbox runtime copy this worker made
    is removed. The process then ends without tearing down the interpreter's modules, which
    takes about a second with torch and nbgrader loaded and keeps the batch waiting; nothing
    is left in buffers (results went back through a pipe, nbgrader closes what it writes)."""
    import atexit
    import sys

    atexit._run_exitfuncs()  # and forgets them: none runs twice
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def start_worker(batch: tuple[int, str]) -> None:
    """ProcessPoolExecutor initializer; `batch` is batch_identity() of the batch process. The
    worker loads what every grading needs (already loaded where the fork server preloaded it;
    spawned workers import it here); the Recorder is made by the first submission, which
    says for which course and scratch directory."""
    import importlib
    import multiprocessing.util

    _die_with_batch(batch)
    multiprocessing.util.Finalize(None, _end_worker, exitpriority=0)
    for name in WORKER_MODULES:
        importlib.import_module(name)


def record_in_worker(
    setup: tuple, exercise: str, student: str, path: str, graded: Graded | None = None
) -> Recorded:
    """One submission in a pool worker; `setup` is (course, db_url, scratch_dir), the same for
    every submission of a batch."""
    global _WORKER, _SETUP
    if _WORKER is None or _SETUP != setup:
        course, db_url, scratch_dir = setup
        _WORKER = Recorder(Path(course), db_url, Path(scratch_dir))
        _SETUP = setup
    return _WORKER.record(exercise, student, path, graded)
