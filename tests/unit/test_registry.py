"""The exercise registry: exercises are folders, discovered; no table outside a folder lists them.

Before the layout issue an exercise lived in six directories and six hand-kept tables
(`EXERCISES`, `GRADING_SECONDS`, the pytest markers, `DEMO_MISTAKES`, `CHECKS_OF`, help texts).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import (
    EXERCISES,
    EXERCISES_DIR,
    PACKAGE_DIR,
    PROJECT_ROOT,
    Exercise,
    IncompleteExercise,
    declaration,
    discover,
    parts_of,
    reference_module,
    short_name,
)
from tests.conftest import exercise_params

ID_OR_SHORT = re.compile(r"ex\d+(_[a-z0-9_]+)?")


def test_every_folder_with_a_declaration_is_a_complete_exercise():
    assert EXERCISES, "no exercise discovered"
    for exercise in EXERCISES:
        missing = [path for path in parts_of(exercise) if not path.is_file()]
        assert missing == [], f"{exercise} lacks {missing}"
        assert isinstance(declaration(exercise), Exercise)


def _tree(root: Path, exercise: str = "ex9_tiny") -> Path:
    """A package directory (like autograder/) holding one complete exercise of three parts."""
    folder = root / "exercises" / exercise
    folder.mkdir(parents=True)
    for part in ("__init__.py", "checks.py", "mistakes.py"):
        (folder / part).write_text("")
    (root / "_reference").mkdir()
    (root / "_reference" / f"{exercise}.py").write_text("def f(x):\n    return x\n")
    (root / "_student_templates").mkdir()
    (root / "_student_templates" / f"{exercise}.ipynb.j2").write_text("")
    return root


def test_an_exercise_is_discovered_from_its_three_parts(tmp_path):
    package = _tree(tmp_path)
    (package / "exercises" / "ex10_draft").mkdir()  # no declaration: a draft, needs no parts
    assert discover(package) == ("ex9_tiny",)
    assert discover(PACKAGE_DIR) == EXERCISES


@pytest.mark.parametrize(
    "part",
    [
        "_student_templates/ex9_tiny.ipynb.j2",
        "_reference/ex9_tiny.py",
        "exercises/ex9_tiny/checks.py",
        "exercises/ex9_tiny/mistakes.py",
    ],
)
def test_an_exercise_missing_a_part_is_refused(tmp_path, part):
    package = _tree(tmp_path)
    (package / part).unlink()
    with pytest.raises(IncompleteExercise, match=part.split("/")[-1].replace(".", r"\.")):
        discover(package)


@pytest.mark.parametrize("exercise", exercise_params())
def test_a_declaration_names_what_its_folder_has(exercise):
    declared = declaration(exercise)
    assert declared.demo_mistake in {m.id for m in catalogue_for(exercise)}
    public = {n for n in vars(reference_module(exercise)) if not n.startswith("_")}
    assert set(declared.checks_of) <= public and declared.grading_seconds > 0


def _literal_ids(node: ast.AST) -> int:
    """How many distinct exercise ids (or short names) one literal table spells out: the keys of
    a dict (something per exercise), or the elements of a sequence that names every exercise (a
    list of them). A sequence naming a few is a test's choice of examples, not a table."""
    if isinstance(node, ast.Dict):
        elements = [key for key in node.keys if key is not None]
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        elements = node.elts
    else:
        return 0
    names = {
        e.value
        for e in elements
        if isinstance(e, ast.Constant)
        and isinstance(e.value, str)
        and ID_OR_SHORT.fullmatch(e.value)
    }
    found = len(names & ({*EXERCISES} | {short_name(e) for e in EXERCISES}))
    if isinstance(node, ast.Dict) or found >= len(EXERCISES):
        return found
    return 0


def _python_outside_the_exercise_folders() -> list[Path]:
    roots = [PACKAGE_DIR, PROJECT_ROOT / "tests", PROJECT_ROOT / "benchmarks"]
    return [
        path
        for root in roots
        for path in root.rglob("*.py")
        if EXERCISES_DIR not in path.parents or path.parent == EXERCISES_DIR
    ]


def test_no_per_exercise_table_outside_the_exercise_folders():
    tables = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"
        for path in _python_outside_the_exercise_folders()
        for node in ast.walk(ast.parse(path.read_text()))
        if _literal_ids(node) >= 2
    ]
    assert tables == [], "lists of exercises belong to the registry (autograder/core/registry.py)"


def test_pytest_markers_come_from_the_registry():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    markers = config["tool"]["pytest"]["ini_options"]["markers"]
    assert not [m for m in markers if ID_OR_SHORT.match(m.split(":")[0])]


def test_the_table_detector_sees_a_table():
    assert (
        _literal_ids(
            ast.parse('{"ex1_numpy_attention": 1, "ex2_attention_heatmap": 2}').body[0].value
        )
        == 2
    )  # type: ignore[attr-defined]
    every = ", ".join(f'"{short_name(e)}"' for e in EXERCISES)
    assert _literal_ids(ast.parse(f"({every})").body[0].value) == len(EXERCISES)  # type: ignore[attr-defined]
    assert _literal_ids(ast.parse('("ex1", "ex3")').body[0].value) == 0  # type: ignore[attr-defined]


def test_an_exercise_trains_when_its_reference_uses_torch_optim():
    """`Exercise.trains` says which batches have their sandbox template load what the first
    optimizer loads; one declared wrong costs every training child about 0.9 CPU-s (or every
    template as much for nothing)."""
    from autograder.core.registry import EXERCISES, declaration, reference_path

    uses = {ex: "torch.optim." in reference_path(ex).read_text() for ex in EXERCISES}
    assert {ex: declaration(ex).trains for ex in EXERCISES} == uses
    assert any(uses.values()) and not all(uses.values())
