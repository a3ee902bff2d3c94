"""The hidden grading of each exercise, one folder per exercise: `<id>/` holds its declaration
(`__init__.py`), checks, catalogue of mistakes and its tables. The registry that discovers
exercises is `autograder.core.registry`; these names are re-exported for code written before
it moved there (new code imports from the registry)."""

from autograder.core.registry import (
    EXERCISES,
    Exercise,
    declaration,
    exercise_dir,
    reference_module,
    resolve,
    short_name,
)

__all__ = [
    "EXERCISES",
    "Exercise",
    "declaration",
    "exercise_dir",
    "reference_module",
    "resolve",
    "short_name",
]
