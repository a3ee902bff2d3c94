"""The exercise registry: one folder per exercise, discovered; nothing else lists exercise ids.

An exercise is a folder `autograder/exercises/<id>/` (id = `exN_words`) holding
- `__init__.py`: its declaration, `EXERCISE = Exercise(...)` (title, grading time, the demo's
  mistake, which checks test which student function);
- `reference.py`: the hidden solution (the functions/classes of EXERCISES.md; see
  `autograder/notebooks/solutions.py` for the conventions the notebook build relies on);
- `template.ipynb.j2`: the student notebook, English and Korean prose in one template;
- `checks.py`: the hidden pytest checks (8 points in all);
- `mistakes.py`: the catalogue of named mistakes.
A folder without a declaration (`__init__.py`) is a draft: it is hidden like the rest of the
package but is no exercise (not built, not graded, not listed).
Markers (`-m ex3`), the batch's scheduling, the demo's students, the fake-stub matrix and help
texts all derive from the declarations.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

from autograder.core.errors import UsageError

EXERCISES_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = EXERCISES_DIR.parent  # autograder/
PROJECT_ROOT = PACKAGE_DIR.parent  # the checkout in an editable install (tests, lint)
DEFAULT_COURSE_DIR = Path("assignments")  # relative to where attn-grade runs
_ID = re.compile(r"ex(\d+)_[a-z0-9_]+")
PARTS = ("__init__.py", "reference.py", "template.ipynb.j2", "checks.py", "mistakes.py")


@dataclass(frozen=True)
class Exercise:
    """What an exercise's folder declares about it (its `__init__.py`)."""

    title: str
    # Seconds one grading of the reference takes on a quiet 2-core machine: batches hand out
    # the longest first, so that no slow notebook starts last while other workers idle.
    grading_seconds: float
    # The catalogued mistake (an id of its mistakes.py) that bob makes in `attn-grade demo`.
    demo_mistake: str
    # Student function/class -> the name prefixes of the checks that test it (the fake-stub
    # matrix: a stub of that function must fail every one of them).
    checks_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # One of the lesson's five (released by default) or a companion chapter's exercise, built
    # and demonstrated only when asked for (`attn-grade build --all`, or by name).
    core: bool = True
    # Edits to the demo cells that keep them doing the same things on less data or for fewer
    # epochs (text -> replacement, each found exactly once in the demo cells): `attn-grade build
    # --small-demo`, for trying a cycle quickly; the suite's nbgrader cycles build with it.
    small_demo: Mapping[str, str] = field(default_factory=dict)
    # The checks that rest on a probe's answer (evidence the child reports about its own
    # objects), which a notebook that takes over the child's request pipe could forge (README
    # "What probes cannot prove"). Kept by hand: tests/security/test_probe_stakes.py fails when
    # a check starts or stops using a probe, so that the list is changed on purpose.
    probe_checks: frozenset[str] = frozenset()


def _discover() -> tuple[str, ...]:
    found = [
        folder.name
        for folder in EXERCISES_DIR.iterdir()
        if _ID.fullmatch(folder.name) and (folder / "__init__.py").is_file()
    ]
    return tuple(sorted(found, key=lambda name: int(_ID.fullmatch(name).group(1))))  # type: ignore[union-attr]


EXERCISES: tuple[str, ...] = _discover()


def short_name(exercise: str) -> str:
    """`ex3_transformer_classifier` -> `ex3` (also the pytest marker)."""
    return exercise.split("_", 1)[0]


def short_names() -> str:
    """`ex1..ex5` for help texts."""
    return f"{short_name(EXERCISES[0])}..{short_name(EXERCISES[-1])}"


def resolve(name: str) -> str:
    """Full exercise id from an id or its short name; UsageError (a ValueError) otherwise."""
    for exercise in EXERCISES:
        if name in (exercise, short_name(exercise)):
            return exercise
    raise UsageError(f"unknown exercise {name!r}; choose from {', '.join(EXERCISES)}")


def exercise_dir(exercise: str) -> Path:
    return EXERCISES_DIR / resolve(exercise)


@cache
def declaration(exercise: str) -> Exercise:
    module = importlib.import_module(f"{__name__}.{resolve(exercise)}")
    declared = getattr(module, "EXERCISE", None)
    if not isinstance(declared, Exercise):
        raise TypeError(f"{module.__name__} declares no EXERCISE = Exercise(...)")
    return declared


def reference_module(exercise: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{resolve(exercise)}.reference")


@cache
def reference_source(exercise: str) -> ModuleType:
    """The reference module's source, not run: enough to render notebooks (`inspect` and `ast`
    read it) without importing the reference and, through it, torch (about 2 s of every
    `attn-grade build`). Only its `GIVEN` tuple is evaluated, as a literal."""
    path = reference_path(exercise)
    module = ModuleType(f"{__name__}.{resolve(exercise)}.reference")
    module.__file__ = str(path)
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == "GIVEN" for target in targets):
            module.GIVEN = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    return module


def mistakes_module(exercise: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{resolve(exercise)}.mistakes")


def reference_path(exercise: str) -> Path:
    return exercise_dir(exercise) / "reference.py"


def checks_module_path(exercise: str) -> Path:
    return exercise_dir(exercise) / "checks.py"


def template_path(exercise: str) -> Path:
    return exercise_dir(exercise) / "template.ipynb.j2"


def core_exercises() -> tuple[str, ...]:
    """The default release: the lesson's own exercises."""
    return tuple(exercise for exercise in EXERCISES if declaration(exercise).core)


def grading_seconds(exercise: str) -> float:
    return declaration(exercise).grading_seconds
