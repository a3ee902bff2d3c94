"""One submission through the sandboxed checks and nbgrader's own autograde, in a batch worker.

A Recorder belongs to one worker process. It owns a scratch gradebook (scratch.py) so that
nbgrader's autograde, with its many small writes, never waits for another worker; what autograde
wrote comes back as plain data for the batch parent to merge into the course's gradebook.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import uuid
from pathlib import Path

from autograder.nbgrader_plugins.speedups import skip_slow_optional_imports

skip_slow_optional_imports()  # the pool's fork server imports this module first: 0.9 s less

from autograder.audit.gradebook import gradebook_name  # noqa: E402
from autograder.batch import scratch  # noqa: E402
from autograder.batch.messages import Graded, Recorded  # noqa: E402
from autograder.batch.retry import (  # noqa: E402
    AGAIN,
    FILE_DELAYS,
    quiet_database_tracebacks,
    retrying,
)
from autograder.core import faults  # noqa: E402
from autograder.core.errors import (  # noqa: E402
    EnvironmentFailure,
    describe_failure,
    environment_cause,
)
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


class Caught(logging.Handler):
    """The last exception nbgrader caught and logged while it ran (its result holds only the
    text): nbgrader logs each failure inside its `except` block."""

    def __init__(self) -> None:
        super().__init__()
        self.last: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else sys.exc_info()[1]
        if error is not None:
            self.last = error


@functools.cache
def _autograde_app():
    """nbgrader's Autograde, with the fault point `autograde` inside its own error handling,
    giving its `handoff` (the report graded already) to the GradeWithChecks it builds."""
    from nbgrader.converters import Autograde

    from autograder.nbgrader_plugins.preprocessors import GradeWithChecks, Handoff

    class WorkerAutograde(Autograde):
        handoff: Handoff | None = None

        def init_assignment(self, assignment_id: str, student_id: str) -> None:
            faults.reach("autograde")
            super().init_assignment(assignment_id, student_id)

        def _init_preprocessors(self) -> None:
            super()._init_preprocessors()  # builds this pass's preprocessors in the exporter
            for preprocessor in self.exporter._preprocessors:
                if isinstance(preprocessor, GradeWithChecks):
                    preprocessor.handoff = self.handoff

    return WorkerAutograde


def run_autograde(
    api, exercise: str, student: str, handoff=None
) -> tuple[dict, BaseException | None]:
    """nbgrader's autograde of one submission, as NbGraderAPI.autograde runs it (force, create
    the student), and the last exception it caught; `handoff` (preprocessors.Handoff) offers
    the report graded already to this app's GradeWithChecks."""
    from nbgrader.utils import capture_log, temp_attrs

    caught = Caught()
    with temp_attrs(api.coursedir, assignment_id=exercise, student_id=student):
        app = _autograde_app()(coursedir=api.coursedir, parent=api)
        app.force, app.create_student, app.handoff = True, True, handoff
        app.log.addHandler(caught)
        try:
            result = capture_log(app)
        finally:
            app.log.removeHandler(caught)
    return result, caught.last


def environment_text(error: BaseException) -> str | None:
    """What an environment failure says (None: `error` is not one)."""
    if isinstance(error, EnvironmentFailure):
        return str(error)
    cause = environment_cause(error)
    return None if cause is None else f"{describe_failure(cause)}; {AGAIN}"


class Recorder:
    def __init__(self, course: Path, db_url: str | None, scratch_dir: Path):
        main = nbgrader_api(course, db_url)
        self.course_id = main.coursedir.course_id
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        path = Path(scratch_dir) / f"gradebook-{tag}.db"

        def create() -> str:
            path.unlink(missing_ok=True)  # a try cut short
            return scratch.create(main.coursedir.db_url, path)

        url = retrying(create, f"reading the gradebook {gradebook_name(main.coursedir.db_url)}")
        self.api = nbgrader_api(course, url)
        # nbgrader writes the autograded folders here; the batch moves each into the course
        out = Path(scratch_dir) / f"autograded-{tag}"
        coursedir = self.api.coursedir
        coursedir.autograded_directory = os.path.relpath(out, coursedir.root)

    def record(
        self, exercise: str, student: str, path: str, graded: Graded | None = None
    ) -> Recorded:
        """Grade (unless `graded`, a grade_file() result from elsewhere, is given), autograde
        with nbgrader into the scratch gradebook and folder, and return what to merge, with the
        report and, for a notebook that could not be graded, the reason. A failure of the
        environment (retried first) is returned as such: nothing of it is the student's."""
        try:
            return self._record(exercise, student, path, graded)
        except Exception as error:
            text = environment_text(error)
            if text is None:
                raise
            return Recorded({}, None, None, "", environment=text)

    def _record(self, exercise: str, student: str, path: str, graded: Graded | None) -> Recorded:
        from autograder.nbgrader_plugins.preprocessors import Handoff

        graded = graded or grade_file(exercise, student, path)
        report, reason = graded.report, graded.reason
        log, built = "", None
        if graded.key is not None and graded.report is not None:
            key, offered = graded.key, graded.report

            def autograde() -> tuple[dict, dict | None]:
                handoff = Handoff(key, offered)  # a fresh one per try: offered until taken
                result, failure = run_autograde(self.api, exercise, student, handoff)
                written = handoff.written
                if isinstance(failure, KeyboardInterrupt):  # a stop nbgrader caught: not a result
                    raise failure
                cause = environment_cause(failure)
                if not result.get("success") and cause is not None:
                    raise EnvironmentFailure(describe_failure(cause)) from failure
                return result, written.to_dict() if written is not None else None

            what = f"{student}/{exercise}: nbgrader's autograde"
            result, report = retrying(autograde, what, delays=FILE_DELAYS)
            coursedir = self.api.coursedir
            built = coursedir.format_path(coursedir.autograded_directory, student, exercise)
            if not result.get("success"):
                reason = "nbgrader could not process the notebook (see the log)"
                log = str(result.get("log") or result.get("error", ""))[-4000:]
                report, built = None, None
        if reason:
            zero_grades(self.api, exercise, student, reason)
        url = self.api.coursedir.db_url
        extracted = scratch.extract(url, self.course_id, exercise, student, path)
        return Recorded(extracted, report, reason or None, log, built)


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


def start_worker(
    batch: tuple[int, str], threads: int, optimizers: bool = False, grades: bool = True
) -> None:
    """ProcessPoolExecutor initializer; `batch` is batch_identity() of the batch process,
    `threads` the math threads this worker may use (pool.threads_per_worker), `optimizers`
    whether its sandbox template loads what torch.optim loads (Exercise.trains), `grades`
    whether it grades (a template is started now) or runs nbgrader's part only (--scheduler:
    a Dask cluster grades; the two templates it started for nothing cost about 4.6 CPU-s a
    batch). The worker loads what every grading needs (load_grading); the Recorder is made by
    the first submission, which says for which course and scratch directory."""
    import multiprocessing.util
    import signal

    _die_with_batch(batch)
    # Ctrl-C reaches the whole process group: the batch stops its workers itself (and a worker
    # interrupted while it waits for work would print a traceback). A handler, not SIG_IGN:
    # the sandboxes a worker starts get the default back at exec.
    signal.signal(signal.SIGINT, lambda *_: None)
    quiet_database_tracebacks()
    multiprocessing.util.Finalize(None, _end_worker, exitpriority=0)
    load_grading(grades, optimizers)
    import torch

    torch.set_num_threads(threads)


def load_grading(template: bool, optimizers: bool) -> None:
    """Make this process ready to grade before its first submission: with `template`, its
    sandbox template starts in the background (loading what torch.optim loads if
    `optimizers`), and WORKER_MODULES are imported beside it (already loaded where a fork
    server preloaded them). A pool worker as it starts (start_worker), a Dask worker started
    with the preload (dask_worker)."""
    import importlib

    from autograder.sandbox import isolation, warm

    try:  # the template imports while this process does, or takes its first submission
        if template:
            warm.start_early(isolation.choose(), optimizers)
    except Exception:  # noqa: BLE001 - the first grading meets the same error, and says it
        pass
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
        try:
            _WORKER = Recorder(Path(course), db_url, Path(scratch_dir))
        except Exception as error:
            text = environment_text(error)  # sent back as text: exceptions lose their cause
            if text is None:
                raise
            return Recorded({}, None, None, "", environment=text)
        _SETUP = setup
    return _WORKER.record(exercise, student, path, graded)
