"""The exercise registry: an exercise is three parts, discovered; nothing else lists exercise ids.

An exercise `<id>` (id = `exN_words`) is
- `student_templates/<id>.ipynb.j2`: what students receive, English and Korean prose in one
  template;
- `reference/<id>.py`: the hidden solution (the functions/classes of EXERCISES.md; see
  `autograder/notebooks/solutions.py` for the conventions the notebook build relies on),
  imported as `autograder._reference.<id>`;
- `autograder/exercises/<id>/`: its hidden grading: `__init__.py`, the declaration
  `EXERCISE = Exercise(...)` (title, grading time, the demo's mistake, which checks test which
  student function), `checks.py` (the pytest checks, 8 points in all), `mistakes.py` (the
  catalogue of named mistakes) and its tables (clauses.toml, input_classes.toml, mutants.toml).
A folder without a declaration (`__init__.py`) is a draft: it is hidden like the rest of the
package but is no exercise (not built, not graded, not listed). A declared exercise that lacks
a part is refused (`IncompleteExercise`) when the registry is imported.
In a checkout `autograder/_reference` and `autograder/_student_templates` are links to the top
level folders; a wheel carries the files there, under the distribution's own package.
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

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # autograder/
PROJECT_ROOT = PACKAGE_DIR.parent  # the checkout in an editable install (tests, lint)
EXERCISES_DIR = PACKAGE_DIR / "exercises"
# Links to the checkout's top level `reference/` and `student_templates/` (a wheel holds the
# files here); the resolved paths are the real folders, which the sandbox hides.
REFERENCE_PACKAGE = "autograder._reference"
REFERENCE_DIR = PACKAGE_DIR / "_reference"
TEMPLATES_DIR = PACKAGE_DIR / "_student_templates"
DEFAULT_COURSE_DIR = Path("assignments")  # relative to where attn-grade runs
_ID = re.compile(r"ex(\d+)_[a-z0-9_]+")
# An exercise's folder under autograder/exercises/ (its hidden grading)
PARTS = ("__init__.py", "checks.py", "mistakes.py")


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
    # Its notebooks and checks train with torch.optim. The first optimizer of a process loads
    # the rest of torch (torch._dynamo, sympy: about 0.9 CPU-s): a batch that grades such an
    # exercise has its sandbox template load it once, instead of every child that trains
    # (sandbox/warm.py). tests/unit/test_registry.py holds it to the reference.
    trains: bool = False


class IncompleteExercise(RuntimeError):
    """A declared exercise lacks one of its parts (template, reference, checks, catalogue)."""


def parts_of(exercise: str, package_dir: Path = PACKAGE_DIR) -> tuple[Path, ...]:
    """Every file an exercise is made of: its template, its reference and its folder's parts."""
    folder = package_dir / "exercises" / exercise
    return (
        package_dir / "_student_templates" / f"{exercise}.ipynb.j2",
        package_dir / "_reference" / f"{exercise}.py",
        *(folder / part for part in PARTS),
    )


def discover(package_dir: Path = PACKAGE_DIR) -> tuple[str, ...]:
    """The declared exercises under `package_dir` (autograder/), by number; IncompleteExercise
    names every declared exercise that lacks a part (a folder without `__init__.py` is a
    draft and needs none)."""
    found = [
        folder.name
        for folder in (package_dir / "exercises").iterdir()
        if _ID.fullmatch(folder.name) and (folder / "__init__.py").is_file()
    ]
    missing = [
        str(path.relative_to(package_dir))
        for exercise in found
        for path in parts_of(exercise, package_dir)
        if not path.is_file()
    ]
    if missing:
        raise IncompleteExercise(
            "an exercise is a template student_templates/<id>.ipynb.j2, a reference "
            "reference/<id>.py and a folder autograder/exercises/<id>/ with __init__.py, "
            f"checks.py and mistakes.py; missing (below {package_dir}): {', '.join(missing)}"
        )
    return tuple(sorted(found, key=lambda name: int(_ID.fullmatch(name).group(1))))  # type: ignore[union-attr]


EXERCISES: tuple[str, ...] = discover()


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
    module = importlib.import_module(f"autograder.exercises.{resolve(exercise)}")
    declared = getattr(module, "EXERCISE", None)
    if not isinstance(declared, Exercise):
        raise TypeError(f"{module.__name__} declares no EXERCISE = Exercise(...)")
    return declared


def reference_module(exercise: str) -> ModuleType:
    return importlib.import_module(f"{REFERENCE_PACKAGE}.{resolve(exercise)}")


@cache
def reference_source(exercise: str) -> ModuleType:
    """The reference module's source, not run: enough to render notebooks (`inspect` and `ast`
    read it) without importing the reference and, through it, torch (about 2 s of every
    `attn-grade build`). Only its `GIVEN` tuple is evaluated, as a literal."""
    path = reference_path(exercise)
    module = ModuleType(f"{REFERENCE_PACKAGE}.{resolve(exercise)}")
    module.__file__ = str(path)
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == "GIVEN" for target in targets):
            module.GIVEN = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    return module


def mistakes_module(exercise: str) -> ModuleType:
    return importlib.import_module(f"autograder.exercises.{resolve(exercise)}.mistakes")


def checks_module_path(exercise: str) -> Path:
    return exercise_dir(exercise) / "checks.py"


def template_path(exercise: str) -> Path:
    return TEMPLATES_DIR / f"{resolve(exercise)}.ipynb.j2"


def reference_path(exercise: str) -> Path:
    return REFERENCE_DIR / f"{resolve(exercise)}.py"


def core_exercises() -> tuple[str, ...]:
    """The default release: the lesson's own exercises."""
    return tuple(exercise for exercise in EXERCISES if declaration(exercise).core)


def grading_seconds(exercise: str) -> float:
    return declaration(exercise).grading_seconds


def any_trains(exercises) -> bool:
    """Whether one of `exercises` trains with torch.optim (`Exercise.trains`)."""
    return any(declaration(exercise).trains for exercise in exercises)
