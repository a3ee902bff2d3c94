"""The blind corpus: correct solutions written by people who saw only EXERCISES.md and the
lesson, never the grader (tests/exercises/blind/<student>/<exercise>.py, one whole solution per
file, in styles unlike the reference's). `blind_notebook` turns one into the exercise's
notebook: each function or class of the contract replaces its solution cell, and everything
else of the file (imports, helpers, constants) goes in a cell of its own before them."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.notebooks.render import render_cells
from tests.conftest import source_notebook, with_student_cells

BLIND = Path(__file__).resolve().parents[1] / "exercises" / "blind"


def blind_solutions() -> list[tuple[str, str]]:
    """(student, exercise) of every file of the corpus."""
    return sorted((path.parent.name, path.stem) for path in BLIND.glob("*/ex*.py"))


def _is_main_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def blind_notebook(student: str, exercise: str):
    source = (BLIND / student / f"{exercise}.py").read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    solutions = {c.grade_id for c in render_cells(exercise) if c.role == "solution"}
    replace: dict[str, str] = {}
    rest: list[str] = []
    for node in tree.body:
        if _is_main_block(node):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        text = "".join(lines[first - 1 : node.end_lineno])
        name = getattr(node, "name", None)
        if name in solutions:
            replace[name] = text
        else:
            rest.append(text)
    missing = solutions - set(replace)
    assert not missing, f"{student}/{exercise} lacks {sorted(missing)}"
    notebook = source_notebook(exercise, replace=replace)
    setup = next(
        i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    return with_student_cells(notebook, "\n".join(rest), position=setup)
