"""Every clause is a check (validity round 4): beside its checks, each exercise has a table
(`autograder/exercises/<id>/clauses.toml`) from every clause of its section of EXERCISES.md to
the checks that fail when only that clause is broken, and to its breakers: catalogued mistakes
that break that clause alone, which tests/exercises/test_mistakes.py grades under five seeds and
proves fail one of those checks, named. So the table is proven by the catalogue, and this test
is static.

It fails when
- a function or class of the contract has no clauses, or a clause no check or no breaker (unless
  the table says why no input the contract lets a check draw can show it: `unchecked`);
- a breaker is not a catalogued mistake, or the check it is proven on is not the clause's;
- a check of the exercise belongs to no clause (it would test something the contract does not
  ask: a defect, whatever mutant it kills);
- an argument of a function, a constructor or a method (`forward.mask`) has no entry. An
  argument is data (what the function computes on: its value checks draw many), a size (every
  drawn input carries it, so a wrong one breaks the shapes), or configuration: that needs a
  breaker ignoring it in favour of its default, whose words name it (the message names the
  argument that made no difference)."""

from __future__ import annotations

import inspect
import tomllib

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import EXERCISES, checks_module_path, reference_module
from autograder.notebooks.solutions import public_names
from tests.conftest import exercise_params
from tests.exercises.test_input_classes import check_names

KINDS = ("data", "size")
METHODS = ("forward", "append")  # the methods of the contract's classes with arguments


def clauses(exercise: str) -> dict[str, list[dict]]:
    path = checks_module_path(exercise).with_name("clauses.toml")
    assert path.is_file(), f"{exercise} has no clauses.toml beside its checks"
    return tomllib.loads(path.read_text())


def arguments(exercise: str, name: str) -> list[str]:
    """The arguments of a function, or of a class's constructor and methods (`forward.mask`)."""
    value = getattr(reference_module(exercise), name)
    if not inspect.isclass(value):
        return list(inspect.signature(value).parameters)
    found = [p for p in inspect.signature(value.__init__).parameters if p != "self"]
    for method in METHODS:
        if method in vars(value):
            parameters = inspect.signature(vars(value)[method]).parameters
            found += [f"{method}.{p}" for p in parameters if p != "self"]
    return found


@pytest.mark.parametrize("exercise", exercise_params())
def test_every_clause_has_a_check_and_a_breaker(exercise):
    table = clauses(exercise)
    assert set(table) == set(public_names(reference_module(exercise))), "one table per name"
    existing = check_names(exercise)
    catalogue = {m.id: m for m in catalogue_for(exercise)}
    for name, entries in table.items():
        said = [entry.get("clause") for entry in entries if "clause" in entry]
        assert len(said) == len(set(said)), f"{name}: a clause listed twice"
        assert said, f"{name}: no clause of the contract"
        for entry in entries:
            label = f"{name}: {entry.get('clause') or entry.get('argument')}"
            assert set(entry) <= {"clause", "argument", "kind", "checks", "breakers", "unchecked"}
            if "unchecked" in entry:  # a clause no input the contract allows can show
                assert "clause" in entry and len(entry["unchecked"]) > 40, label
                assert set(entry) == {"clause", "unchecked"}, label
                continue
            assert entry.get("checks"), f"{label} has no check"
            unknown = set(entry["checks"]) - existing
            assert not unknown, f"{label} names checks that do not exist: {unknown}"
            kind = entry.get("kind")
            assert kind in (None, *KINDS), f"{label}: kind {kind!r}"
            breakers = entry.get("breakers", [])
            if kind is None:
                assert breakers, f"{label} has no breaker (a catalogued mistake breaking it)"
            for breaker in breakers:
                assert breaker in catalogue, f"{label}: no catalogued mistake {breaker!r}"
                mistake = catalogue[breaker]
                assert mistake.check in entry["checks"], (
                    f"{label}: {breaker} is proven on {mistake.check}, not on its checks"
                )
                if "argument" in entry and kind is None:
                    word = entry["argument"].split(".")[-1]
                    assert word in mistake.description, f"{breaker}'s words do not name {word}"


@pytest.mark.parametrize("exercise", exercise_params())
def test_every_check_belongs_to_a_clause(exercise):
    listed = {
        check
        for entries in clauses(exercise).values()
        for e in entries
        for check in e.get("checks", [])
    }
    assert not check_names(exercise) - listed, "checks that test no clause of the contract"


@pytest.mark.parametrize("exercise", exercise_params())
def test_every_argument_has_an_entry(exercise):
    for name, entries in clauses(exercise).items():
        listed = [entry["argument"] for entry in entries if "argument" in entry]
        assert len(listed) == len(set(listed)), f"{name}: an argument listed twice"
        assert set(listed) == set(arguments(exercise, name)), name


def test_every_exercise_has_a_table():
    assert all(checks_module_path(e).with_name("clauses.toml").is_file() for e in EXERCISES)
