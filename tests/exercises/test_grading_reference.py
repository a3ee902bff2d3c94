"""The reference scores full marks; a blank release scores zero; grading is repeatable."""

from __future__ import annotations

import inspect

import pytest
from torch import nn

from autograder.core.registry import reference_module
from autograder.core.results import AUTO_POINTS
from autograder.grading.runner import grade_notebook
from autograder.notebooks.render import render_cells
from autograder.notebooks.solutions import public_names
from tests.conftest import exercise_params, source_notebook, write_notebook
from tests.support.call_log import logged_calls


def contract_calls(exercise: str) -> list[str]:
    """The functions, constructors and methods of the contract, as the call log names them."""
    module = reference_module(exercise)
    names = []
    for name in public_names(module):
        value = getattr(module, name)
        names.append(name)
        if inspect.isclass(value):
            methods = ["forward"] if issubclass(value, nn.Module) else []
            methods += [m for m in vars(value) if m in ("append", "__len__")]
            names += [f"{name}.{method}" for method in methods]
    return names


@pytest.mark.parametrize("exercise", exercise_params())
def test_reference_scores_full_marks_and_points_match_cells(exercise, tmp_path):
    path = write_notebook(source_notebook(exercise), tmp_path / f"{exercise}.ipynb")
    with logged_calls() as log:
        report = grade_notebook(path)
    failed = [check.feedback() for check in report.checks if not check.passed]
    assert not failed, failed
    # every function and method is called more than once, on different shapes, with other
    # calls between: state kept between calls shows only then (tests/support/call_log.py)
    alone = [name for name in contract_calls(exercise) if not log.interleaved(name)]
    assert not alone, f"called once, or always on the same arguments: {alone}"
    assert report.score == AUTO_POINTS
    assert report.status == "ok"
    cells = {c.grade_id: c.points for c in render_cells(exercise) if c.role == "check"}
    assert {gid: possible for gid, (_, possible) in report.points_by_grade_id().items()} == cells
    assert sum(cells.values()) == AUTO_POINTS


@pytest.mark.parametrize("exercise", exercise_params())
def test_blank_release_scores_zero(exercise, release_of):
    report = grade_notebook(release_of(exercise))
    assert report.score == 0
    assert len(report.checks) >= 5
    assert all("not implemented" in check.message for check in report.checks), [
        check.feedback() for check in report.checks
    ]
