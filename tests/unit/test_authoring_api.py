"""The check-author API's front door (issue 42): `from autograder.authoring import ...` works as
its docstring and CONTRIBUTING say, and every exercise's checks and catalogue use it alone."""

from __future__ import annotations

import ast
import re

import pytest

import autograder.authoring as authoring
from autograder.core.registry import EXERCISES, PROJECT_ROOT, checks_module_path, exercise_dir


def _documented_lines(text: str) -> list[str]:
    return re.findall(r"^\s*`?(from autograder\.authoring import [\w, ]+)`?$", text, re.M)


@pytest.mark.parametrize("name", authoring.__all__)
def test_every_public_name_imports(name):
    namespace: dict = {}
    exec(f"from autograder.authoring import {name}", namespace)
    assert namespace[name] is getattr(authoring, name)


def test_the_documented_lines_work_and_check_is_the_decorator():
    lines = _documented_lines(authoring.__doc__ or "")
    lines += _documented_lines((PROJECT_ROOT / "CONTRIBUTING.md").read_text())
    assert len(lines) == 2 and len(set(lines)) == 1, lines  # the same five names, both places
    assert len(lines[0].partition(" import ")[2].split(", ")) == 5
    for line in lines:
        namespace: dict = {}
        exec(line, namespace)
    mark = authoring.check(points=0.5, grade_id="check_x")
    assert mark.name == "check" and mark.kwargs["points"] == 0.5
    with pytest.raises(authoring.CheckFailed):
        authoring.ensure(False, "a message for the student")


def test_all_lists_each_public_name_once_and_nothing_private():
    assert len(set(authoring.__all__)) == len(authoring.__all__)
    assert not [name for name in authoring.__all__ if name.startswith("_")]
    assert all(hasattr(authoring, name) for name in authoring.__all__)


def _grader_imports(path) -> list[str]:
    """The grader modules a file imports from, other than its own exercise's."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("autograder")]
    return found


@pytest.mark.parametrize("exercise", EXERCISES)
def test_checks_and_mistakes_import_the_api_in_one_line(exercise):
    own = (f"autograder.exercises.{exercise}", "autograder._reference")  # its own parts
    for path in (checks_module_path(exercise), exercise_dir(exercise) / "mistakes.py"):
        imports = [m for m in _grader_imports(path) if not m.startswith(own)]
        assert imports == ["autograder.authoring"], (path.name, imports)
