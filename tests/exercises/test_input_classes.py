"""Inputs that cover the contract, by construction (issue 20): next to the checks of every
exercise, `input_classes.toml` lists for every checked function the input classes the contract
admits that can change the answer, each with the checks that draw it. This test fails when a
checked function has no list (or a thin one), or a list names a check that does not exist or
does not belong to that function."""

from __future__ import annotations

import tomllib

import pytest

from autograder.core.registry import EXERCISES, checks_module_path, declaration

MIN_CLASSES = 2


def input_classes(exercise: str) -> dict[str, dict[str, list[str]]]:
    path = checks_module_path(exercise).with_name("input_classes.toml")
    assert path.is_file(), f"{exercise} has no input_classes.toml beside its checks"
    return tomllib.loads(path.read_text())


def check_names(exercise: str) -> set[str]:
    import ast

    tree = ast.parse(checks_module_path(exercise).read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_checked_function_lists_its_input_classes(exercise):
    listed = input_classes(exercise)
    checked = set(declaration(exercise).checks_of)
    assert set(listed) == checked, "one list per checked function, and no other"
    existing = check_names(exercise)
    for function, classes in listed.items():
        assert len(classes) >= MIN_CLASSES, f"{function}: only {len(classes)} input classes"
        own = declaration(exercise).checks_of[function]
        for name, checks in classes.items():
            assert checks, f"{function}: {name!r} is drawn by no check"
            for check in checks:
                assert check in existing, f"{function}: {name!r} names no check {check}"
                assert check.startswith(own), f"{function}: {check} is not one of its checks"
