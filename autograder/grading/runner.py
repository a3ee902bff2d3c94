"""Grade one notebook: validate it, run its program in a sandbox, run the checks with pytest."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from autograder.errors import GraderError, UnknownExercise
from autograder.exercises import checks_module_path, resolve
from autograder.grading.notebook import (
    InvalidNotebook,
    LoadedNotebook,
    declared_exercise,
    exercise_from_name,
    program_of,
    read_json,
)
from autograder.grading.plugin import GradingPlugin, derive_seed
from autograder.grading.results import GradeReport
from autograder.grading.submission import Budget, Submission
from autograder.grading.text import clean_report
from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits

log = logging.getLogger("attn_grade")


def choose_exercise(path: Path, notebook: dict | None, requested: str | None) -> str:
    if requested:
        return resolve(requested)
    # The file name (chosen by whoever runs the grader) before the notebook's own metadata
    # (written by the student): a notebook claiming another exercise is then invalid_notebook.
    found = exercise_from_name(path) or (declared_exercise(notebook) if notebook else None)
    if found is None:
        raise UnknownExercise(
            f"cannot tell which exercise {path.name} is for (no attn_grade metadata and no "
            "exercise id in the file name); pass --exercise"
        )
    return found


def run_checks(
    exercise: str, submission: Submission, base_seed: int, only: list[str] | None = None
) -> GradingPlugin:
    """Run the exercise's check module (or only the named checks) with pytest, in-process."""
    plugin = GradingPlugin(exercise, submission, base_seed)
    path = checks_module_path(exercise)
    targets = [f"{path}::{name}" for name in only] if only else [str(path)]
    quiet = ["-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:stepwise", "--capture=no"]
    # plain asserts and no ini file: check code never reaches a message, whatever pytest finds
    isolated = ["--assert=plain", "--import-mode=importlib", "--rootdir", str(path.parent)]
    isolated += ["-c", os.devnull, "-W", "ignore::DeprecationWarning"]
    code = pytest.main([*targets, *quiet, *isolated], plugins=[plugin])
    for problem in plugin.internal_errors:  # for the instructor's log, never for the student
        log.warning("check problem in %s: %s", exercise, problem)
    broken = any(line.startswith("collecting") for line in plugin.internal_errors)
    if (
        broken
        or not plugin.results
        or code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    ):
        problems = "\n".join(plugin.internal_errors) or f"pytest exit code {code}"
        raise GraderError(f"the checks of {exercise} could not run:\n{problems}")
    return plugin


def load_notebook(
    notebook: dict | None, exercise: str, reason: str | None = None
) -> tuple[LoadedNotebook, str | None]:
    """The program of a parsed notebook, or the reason it cannot be graded as `exercise`."""
    declared = declared_exercise(notebook) if notebook else None
    if reason is None and declared and declared != exercise:
        reason = f"this notebook is for {declared}, not {exercise}"
    if reason is None:
        try:
            return program_of(notebook, exercise), None
        except InvalidNotebook as error:
            reason = str(error)
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
) -> GradeReport:
    """Grade a loaded program; with a `reason`, every check fails with that reason."""
    started = time.monotonic()
    exercise = loaded.exercise
    base_seed = seed if seed is not None else derive_seed(exercise, student)
    level = isolation.choose()
    report = GradeReport(exercise, seed=base_seed, isolation=level.describe())
    if reason is not None:
        report.status = "invalid_notebook"
        report.messages.append(f"not graded: {reason}")
    report.messages += [f"notebook: {problem}" for problem in loaded.problems]
    unavailable = f"the notebook was not run: {reason}" if reason else None
    submission = Submission(
        loaded.program, limits or Limits(), budget or Budget(), unavailable=unavailable, level=level
    )
    with submission:
        submission.start_in_background()
        report.checks = run_checks(exercise, submission, base_seed, only).results
        if reason is None:
            report.status = submission.status
        report.messages += [
            f"{label} raised {error}" for label, error in submission.cell_errors.items()
        ]
        report.messages += submission.events
    report.execution_time = time.monotonic() - started
    return clean_report(report)


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
