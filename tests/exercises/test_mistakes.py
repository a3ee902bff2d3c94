"""Every catalogued mistake, put into an otherwise correct notebook, fails the check meant for
it, and that check's message names the mistake: under five seeds (hidden inputs are seeded per
student, and a diagnosis that fires only on some inputs names a mistake for one student and
not for another with the same mistake)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import EXERCISES, short_name
from autograder.grading.plugin import derive_seed
from autograder.grading.runner import grade_notebook
from autograder.i18n.catalogues import message, words
from autograder.notebooks.render import render_cells
from tests.conftest import source_notebook, write_notebook
from tests.support.english import english_sentences

MISTAKES = [
    pytest.param(
        exercise,
        mistake.id,
        id=f"{short_name(exercise)}-{mistake.id}",
        marks=getattr(pytest.mark, short_name(exercise)),
    )
    for exercise in EXERCISES
    for mistake in catalogue_for(exercise)
]


def test_catalogue_has_at_least_30_mistakes():
    assert len(MISTAKES) >= 30


SEEDS = 5  # students (hidden inputs) each mistake is graded for


def student_seeds(mistake_id: str) -> list[int]:
    """Five base seeds, as five students' notebooks would get: other ones for every mistake, so
    that the catalogue as a whole meets many inputs."""
    return [derive_seed("a student", mistake_id, number) for number in range(SEEDS)]


@pytest.mark.parametrize(("exercise", "mistake_id"), MISTAKES)
def test_mistake_is_caught_and_named(exercise, mistake_id, tmp_path, shared_sandbox):
    mistake = catalogue_for(exercise)[mistake_id]
    solution_ids = {c.grade_id for c in render_cells(exercise) if c.role == "solution"}
    assert mistake.target in solution_ids, f"{mistake.target} is no solution cell of {exercise}"
    notebook = source_notebook(exercise, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    for seed in student_seeds(mistake_id):
        report = grade_notebook(path, only=[mistake.check], seed=seed, shared=shared_sandbox.get())
        assert [c.name for c in report.checks] == [mistake.check], "the check meant for it runs"
        result = report.checks[0]
        assert not result.passed, f"{mistake_id} was not caught by {mistake.check} (seed {seed})"
        assert result.mistake == mistake_id, f"seed {seed}: {result.message}"
        assert mistake.description in result.message
        korean = message(result.message, "ko")  # what a Korean notebook's feedback shows
        assert words(mistake.description, "ko") in korean, korean
        grader_words = message(result.message, "ko", data="…")  # values (student text) out
        assert english_sentences(grader_words) == [], (result.message, grader_words)


def test_every_mistake_has_its_own_source():
    """Several mistakes share a class/function name; each must still carry its own code."""
    for exercise in EXERCISES:
        sources = [mistake.source for mistake in catalogue_for(exercise)]
        assert len(set(sources)) == len(sources), exercise
