"""The step every cascade test shares: one catalogued mistake put into an otherwise correct
notebook, graded on the checks of the functions built on the faulty one."""

from __future__ import annotations

from pathlib import Path

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from autograder.grading.shared import SharedSandbox
from tests.conftest import source_notebook, write_notebook


def failed_downstream(
    exercise: str, mistake_id: str, checks: list[str], folder: Path, shared: SharedSandbox
) -> dict[str, str]:
    """check -> message of each of `checks` that failed on the notebook with the mistake; every
    one of `checks` must have been graded."""
    mistake = catalogue_for(exercise)[mistake_id]
    notebook = source_notebook(exercise, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, folder / f"{exercise}.ipynb")
    report = grade_notebook(path, only=checks, shared=shared.get())
    assert sorted(c.name for c in report.checks) == sorted(checks), report.checks
    return {c.name: c.message for c in report.checks if not c.passed}
