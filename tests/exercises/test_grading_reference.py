"""The reference scores full marks; a blank release scores zero; grading is repeatable."""

from __future__ import annotations

import pytest

from autograder.core.results import AUTO_POINTS
from autograder.grading.runner import grade_notebook
from autograder.notebooks.render import render_cells
from tests.conftest import exercise_params, source_notebook, write_notebook


@pytest.mark.parametrize("exercise", exercise_params())
def test_reference_scores_full_marks_and_points_match_cells(exercise, tmp_path):
    path = write_notebook(source_notebook(exercise), tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path)
    failed = [check.feedback() for check in report.checks if not check.passed]
    assert not failed, failed
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
