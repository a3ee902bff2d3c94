"""Grade one notebook: validate it, run its program in a sandbox, run the checks with pytest."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from autograder.core import student_text
from autograder.core.errors import GraderError, UnknownExercise
from autograder.core.registry import resolve
from autograder.core.results import CheckResult, GradeReport
from autograder.core.status import Status
from autograder.core.text import clean_report
from autograder.grading.budget import Budget
from autograder.grading.check_session import run_in_session
from autograder.grading.notebook import (
    InvalidNotebook,
    LoadedNotebook,
    declared_exercise,
    exercise_from_name,
    program_of,
    read_json,
)
from autograder.grading.plugin import GradingPlugin, derive_seed
from autograder.grading.submission import Submission
from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox

log = logging.getLogger("attn_grade")
# pytest runs the checks in-process and the isolation level is read from the environment:
# gradings in threads of one process (a Dask worker with several threads, a library caller)
# wait for each other rather than share them. Reentrant: a grading may grade nothing else.
GRADING_LOCK = threading.RLock()


def choose_exercise(path: Path, notebook: dict | None, requested: str | None) -> str:
    """The exercise to grade as, from the trusted side only: `requested` (`--exercise`, the
    nbgrader assignment, the CI configuration) or else the file's name. The notebook's own
    metadata is the student's to edit and never decides (see `load_notebook`)."""
    if requested:
        return resolve(requested)
    found = exercise_from_name(path)
    if found is None:
        raise UnknownExercise(
            f"cannot tell which exercise {path.name} is for (no exercise id in the file name; "
            "the notebook's metadata is not trusted for this); pass --exercise"
        )
    return found


def code_digest(program: list) -> str:
    """sha256 over the program's cells: the submission's own code, for seeding hidden inputs."""
    digest = hashlib.sha256()
    for cell in program:
        digest.update(cell.source.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def submission_seed(exercise: str, student: str, program: list) -> int:
    """The base seed of a submission's hidden inputs: from the exercise, the student and the
    code, so a regrade of the same notebook is identical while values printed in one feedback
    do not fit the inputs of a changed submission."""
    return derive_seed(exercise, student, code_digest(program))


def run_checks(
    exercise: str, submission: Submission, base_seed: int, only: list[str] | None = None
) -> GradingPlugin:
    """Run the exercise's check module (or only the named checks) with pytest, in-process."""
    plugin = GradingPlugin(exercise, submission, base_seed, only)
    run_in_session(plugin)  # pytest's own protocol, in this process's session for `exercise`
    for problem in plugin.internal_errors:  # for the instructor's log, never for the student
        log.warning("check problem in %s: %s", exercise, problem)
    broken = any(line.startswith("collecting") for line in plugin.internal_errors)
    if broken or not plugin.results:
        problems = "\n".join(plugin.internal_errors) or "no check ran"
        raise GraderError(f"the checks of {exercise} could not run:\n{problems}")
    return plugin


def load_notebook(
    notebook: dict | None, exercise: str, reason: str | None = None
) -> tuple[LoadedNotebook, str | None]:
    """The program of a parsed notebook, or the reason it cannot be graded as `exercise`.
    A notebook whose metadata names another exercise is graded as `exercise`, with a note."""
    declared = declared_exercise(notebook) if notebook else None
    if reason is None and notebook is None:
        reason = "the notebook could not be read"
    if reason is None and notebook is not None:
        try:
            loaded = program_of(notebook, exercise)
        except InvalidNotebook as error:
            reason = str(error)
        else:
            if declared and declared != exercise:
                loaded.problems.insert(
                    0,
                    f"its metadata says this notebook is for {declared}; it is graded as "
                    f"{exercise}, the exercise it was submitted for",
                )
            return loaded, None
    return LoadedNotebook(exercise), reason


def grade_loaded(
    loaded: LoadedNotebook,
    *,
    reason: str | None = None,
    student: str = "anonymous",
    seed: int | None = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    only: list[str] | None = None,
    demos: bool = False,
    shared: Sandbox | None = None,
) -> GradeReport:
    """Grade a loaded program; with a `reason`, every check fails with that reason. With
    `demos`, the demo cells then run after the checks and their outputs go in `displays`.
    `shared`: a started sandbox to reuse, for trusted notebooks only (see `Submission`).
    One grading at a time per process (GRADING_LOCK)."""
    with GRADING_LOCK, student_text.budget():
        return _grade_loaded(
            loaded,
            reason=reason,
            student=student,
            seed=seed,
            limits=limits,
            budget=budget,
            only=only,
            demos=demos,
            shared=shared,
        )


def _grade_loaded(
    loaded: LoadedNotebook,
    *,
    reason: str | None,
    student: str,
    seed: int | None,
    limits: Limits | None,
    budget: Budget | None,
    only: list[str] | None,
    demos: bool,
    shared: Sandbox | None,
) -> GradeReport:
    started = time.monotonic()
    exercise = loaded.exercise
    base_seed = seed if seed is not None else submission_seed(exercise, student, loaded.program)
    level = isolation.choose()
    report = GradeReport(exercise, seed=base_seed, isolation=level.describe())
    if reason is not None:
        report.status = Status.INVALID_NOTEBOOK
        report.messages.append(f"not graded: {reason}")
    report.messages += [f"notebook: {problem}" for problem in loaded.problems]
    unavailable = f"the notebook was not run: {reason}" if reason else None
    submission = Submission(
        loaded.program,
        limits or Limits(),
        budget or Budget(),
        unavailable=unavailable,
        level=level,
        shared=shared,
    )
    with submission:
        submission.start_in_background()
        report.checks = run_checks(exercise, submission, base_seed, only).gated_results()
        if reason is not None:  # said once, in the notes, rather than once per check
            report.checks = [
                replace(check, message="not run: the notebook was not graded (see the note)")
                for check in report.checks
            ]
        if reason is None:
            report.status = submission.status
        if submission.tampered:
            report.checks = [withheld(check) for check in report.checks]
        if submission.isolation:  # as the (last) sandbox ran: warm, or cold where it had to be
            report.isolation = submission.isolation
        report.messages += [failure.note() for failure in submission.cell_failures.values()]
        report.messages += submission.events
        if demos and reason is None and loaded.demos:
            # after the checks, in the same sandbox (no second start, no second run of the
            # program); the demo cells have a budget of their own and are never graded
            from autograder.grading.displays import run_demos

            report.displays = run_demos(loaded.program, loaded.demos, limits, submission=submission)
    report.execution_time = time.monotonic() - started
    return clean_report(report)


def withheld(check: CheckResult) -> CheckResult:
    """A check of a submission that tampered with the grader's runtime: never paid."""
    return dataclasses.replace(
        check,
        passed=False,
        message="not paid: the notebook replaced or patched the grader's runtime"
        + (f" ({check.message})" if check.message else ""),
    )


def grade_notebook(path: Path | str, *, exercise: str | None = None, **options) -> GradeReport:
    """Grade the notebook at `path` for its exercise. A file that cannot be graded as that
    exercise's notebook is a graded outcome: every check fails with the reason."""
    path = Path(path)
    notebook, reason = None, None
    try:
        notebook = read_json(path)
    except InvalidNotebook as error:
        reason = str(error)
    chosen = choose_exercise(path, notebook, exercise)
    loaded, reason = load_notebook(notebook, chosen, reason)
    return grade_loaded(loaded, reason=reason, **options)
