"""Every correct solution of the blind corpus (tests/support/blind.py: written from EXERCISES.md
and the lesson only, never from the grader) earns every automatic point: the counterweight to
the mutation benchmark. A check that fails one of them tests something the contract does not
ask, whatever mutant it kills."""

from __future__ import annotations

import pytest

from autograder.core.registry import short_name
from autograder.grading.runner import grade_notebook
from tests.conftest import write_notebook
from tests.support.blind import blind_notebook, blind_solutions


@pytest.mark.parametrize(
    ("student", "exercise"),
    [
        pytest.param(s, e, id=f"{s}-{short_name(e)}", marks=getattr(pytest.mark, short_name(e)))
        for s, e in blind_solutions()
    ],
)
def test_a_blind_correct_solution_earns_every_point(student, exercise, tmp_path, shared_sandbox):
    path = write_notebook(blind_notebook(student, exercise), tmp_path / f"{exercise}.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    lost = {c.name: c.message for c in report.checks if not c.passed}
    assert report.score == report.max_score, lost


def test_every_exercise_has_three_blind_solutions():
    from autograder.core.registry import EXERCISES

    counts = {e: sum(1 for _, x in blind_solutions() if x == e) for e in EXERCISES}
    assert min(counts.values()) >= 3, counts
