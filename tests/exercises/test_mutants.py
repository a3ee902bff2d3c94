"""Mutation testing of the checks (issue 20): the mutator is deterministic and makes real
changes, and a sample of its mutants, graded as submissions, loses points (the whole run is
benchmarks/mutation.py, with its table in docs/numbers.md)."""

from __future__ import annotations

import ast

import pytest

from autograder.authoring.mutants import equivalent_mutants, equivalent_to, mutants_of
from autograder.core.registry import EXERCISES, reference_module
from autograder.grading.runner import grade_notebook
from autograder.notebooks.solutions import public_names
from tests.conftest import source_notebook, write_notebook


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_mutant_is_a_real_one_change_variant(exercise):
    mutants = mutants_of(exercise)
    assert mutants == mutants_of(exercise), "the same mutants in the same order every time"
    targets = set(public_names(reference_module(exercise)))
    assert {m.target for m in mutants} <= targets and len(mutants) >= len(targets)
    assert len({m.id for m in mutants}) == len(mutants), "every mutant has its own id"
    for mutant in mutants:
        tree = ast.parse(mutant.source)  # it compiles
        assert [node.name for node in tree.body] == [mutant.target]  # ... and defines it


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_equivalent_mutant_exists_and_names_its_clause(exercise):
    """Each entry of the exercise's mutants.toml names a mutant of today's reference (by its
    function, operator and changed line) and the clause of the contract that allows it."""
    mutants = mutants_of(exercise)
    for entry in equivalent_mutants(exercise):
        assert any(equivalent_to(m, [entry]) for m in mutants), f"no mutant any more: {entry}"
        assert len(entry.clause) > 20 and len(entry.why) > 40, entry


def sample(exercise: str, every: int) -> list:
    table = equivalent_mutants(exercise)
    live = [m for m in mutants_of(exercise) if equivalent_to(m, table) is None]
    return live[::every]


SAMPLE = [
    pytest.param(m, id=f"{m.exercise[:3]}-{m.id}", marks=getattr(pytest.mark, m.exercise[:3]))
    for exercise, every in (("ex1_numpy_attention", 7), ("ex4_gqa_analysis", 22))
    for m in sample(exercise, every)
]


@pytest.mark.parametrize("mutant", SAMPLE)
def test_a_sampled_mutant_loses_points(mutant, tmp_path, shared_sandbox):
    notebook = source_notebook(mutant.exercise, replace={mutant.target: mutant.source})
    path = write_notebook(notebook, tmp_path / f"{mutant.exercise}.ipynb")
    report = grade_notebook(path, shared=shared_sandbox.get())
    assert report.score < report.max_score, f"{mutant.id} survived: {mutant.where}"
