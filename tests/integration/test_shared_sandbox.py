"""A sandbox reused for the grader's own trusted notebooks (autograder/grading/shared.py) grades
exactly as a fresh one: each program starts from an empty `__main__`, and the reports agree."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from autograder.grading.shared import SharedSandbox
from tests.conftest import source_notebook, write_notebook

EX1, EX6 = "ex1_numpy_attention", "ex6_rope"


def outcome(report) -> list[tuple]:
    return [(c.name, c.points, c.passed, c.mistake, c.message) for c in report.checks]


@pytest.fixture
def pool():
    shared = SharedSandbox()
    yield shared
    shared.close()


@pytest.mark.ex1
def test_the_next_program_does_not_see_the_last_ones_names(tmp_path, pool):
    whole = write_notebook(source_notebook(EX1), tmp_path / "whole" / f"{EX1}.ipynb")
    assert grade_notebook(whole, shared=pool.get()).score == 8
    # softmax's cell left empty: the reference's softmax of the last program must not answer
    empty = source_notebook(EX1, replace={"softmax": "# nothing yet\n"})
    blank = write_notebook(empty, tmp_path / "blank" / f"{EX1}.ipynb")
    report = grade_notebook(blank, shared=pool.get())
    assert pool.started == 1, "both programs ran in the one sandbox"
    softmax = [c for c in report.checks if c.grade_id == "check_softmax"]
    assert softmax and not any(c.passed for c in softmax)
    assert any("softmax" in c.message and "not defined" in c.message for c in softmax)


@pytest.mark.ex6
def test_reused_and_fresh_sandboxes_grade_alike(tmp_path, pool):
    mistake = next(iter(catalogue_for(EX6)))
    notebooks = {
        "reference": source_notebook(EX6),
        mistake.id: source_notebook(EX6, replace={mistake.target: mistake.source}),
    }
    for name, notebook in notebooks.items():
        path = write_notebook(notebook, tmp_path / name / f"{EX6}.ipynb")
        fresh = grade_notebook(path)
        reused = grade_notebook(path, shared=pool.get())
        assert outcome(reused) == outcome(fresh), name
        assert (reused.status, reused.score, reused.seed) == (fresh.status, fresh.score, fresh.seed)
    assert pool.started == 1
