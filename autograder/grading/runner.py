"""Grade one notebook: validate it, run its program in a sandbox, run the checks with pytest."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autograder.exercises import checks_module_path, resolve
from autograder.grading.notebook import (
    InvalidNotebook,
    declared_exercise,
    exercise_from_name,
    program_of,
    read_json,
)
from autograder.grading.plugin import GradingPlugin, derive_seed
from autograder.grading.results import GradeReport
from autograder.grading.submission import Budget, Submission
from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits


class GraderError(RuntimeError):
    """The grader itself failed (a broken check module): never blamed on the student."""


class UnknownExercise(ValueError):
    """Which exercise a notebook belongs to cannot be told; pass it explicitly."""


def choose_exercise(path: Path, notebook: dict | None, requested: str | None) -> str:
    if requested:
        return resolve(requested)
    found = (declared_exercise(notebook) if notebook else None) or exercise_from_name(path)
    if found is None:
        raise UnknownExercise(
            f"cannot tell which exercise {path.name} is for (no attn_grade metadata and no "
            "exercise id in the file name); pass --exercise"
        )
    return found


def run_checks(
    exercise: str, submission: Submission, base_seed: int, only: list[str] | None = None
) -> GradingPlugin:
    plugin = GradingPlugin(exercise, submission, base_seed)
    path = checks_module_path(exercise)
    args = [
        str(path) if not only else None,
        "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:stepwise",
        "--assert=plain", "--import-mode=importlib", "--capture=no",
        "--rootdir", str(path.parent), "-c", os.devnull, "-W", "ignore::DeprecationWarning",
    ]
    args = [arg for arg in args if arg is not None]
    if only:
        args += [f"{path}::{name}" for name in only]
    code = pytest.main(args, plugins=[plugin])
    if plugin.internal_errors or code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        problems = "\n".join(plugin.internal_errors) or f"pytest exit code {code}"
        if any(line.startswith("collecting") for line in plugin.internal_errors) or not plugin.results:
            raise GraderError(f"the checks of {exercise} could not run:\n{problems}")
    return plugin


def grade_notebook(
    path: Path | str,
    *,
    exercise: str | None = None,
    student: str = "anonymous",
    seed: int | None = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    only: list[str] | None = None,
    notebook: dict | None = None,
) -> GradeReport:
    """Grade the notebook at `path` (or the already-parsed `notebook`) for its exercise."""
    path = Path(path)
    started = time.monotonic()
    try:
        if notebook is None:
            notebook = read_json(path)
    except InvalidNotebook as error:
        chosen = choose_exercise(path, None, exercise)
        return _invalid(chosen, str(error), started)
    chosen = choose_exercise(path, notebook, exercise)
    declared = declared_exercise(notebook)
    if declared and declared != chosen:
        return _invalid(chosen, f"this notebook is for {declared}, not {chosen}", started)
    try:
        loaded = program_of(notebook, chosen)
    except InvalidNotebook as error:
        return _invalid(chosen, str(error), started)
    base_seed = seed if seed is not None else derive_seed(chosen, student)
    report = GradeReport(chosen, seed=base_seed, isolation=isolation.detect().describe())
    report.messages += [f"notebook: {problem}" for problem in loaded.problems]
    with Submission(loaded.program, limits or Limits(), budget or Budget()) as submission:
        plugin = run_checks(chosen, submission, base_seed, only)
        report.checks = plugin.results
        report.status = submission.status
        if submission.isolation:
            report.isolation = submission.isolation
        report.messages += [
            f"{label} raised {error}" for label, error in submission.cell_errors.items()
        ]
        report.messages += submission.events
    report.execution_time = time.monotonic() - started
    return report


def _invalid(exercise: str, reason: str, started: float) -> GradeReport:
    report = GradeReport(exercise, status="invalid_notebook", messages=[reason])
    report.checks = []
    report.execution_time = time.monotonic() - started
    return report
