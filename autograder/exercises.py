"""The five exercises: ids, short aliases and where each layer keeps its module."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

EXERCISES: tuple[str, ...] = (
    "ex1_numpy_attention",
    "ex2_attention_heatmap",
    "ex3_transformer_classifier",
    "ex4_gqa_analysis",
    "ex5_causal_mask",
)
# Seconds one grading of the reference takes (README "Grading", quiet 2-core machine): batches
# hand out the longest first, so that no slow notebook starts last while other workers idle.
GRADING_SECONDS = {
    "ex1_numpy_attention": 3.0,
    "ex2_attention_heatmap": 4.1,
    "ex3_transformer_classifier": 6.1,
    "ex4_gqa_analysis": 3.1,
    "ex5_causal_mask": 4.3,
}
AUTO_POINTS = 8.0
MANUAL_POINTS = 2.0
PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent  # the checkout in an editable install (tests, lint)
TEMPLATES_DIR = PACKAGE_DIR / "templates"  # package data: works from a wheel install too
DEFAULT_COURSE_DIR = Path("assignments")  # relative to where attn-grade runs


def short_name(exercise: str) -> str:
    """`ex3_transformer_classifier` -> `ex3` (also the pytest marker)."""
    return exercise.split("_", 1)[0]


def resolve(name: str) -> str:
    """Full exercise id from an id or its short name; ValueError for anything else."""
    for exercise in EXERCISES:
        if name in (exercise, short_name(exercise)):
            return exercise
    raise ValueError(f"unknown exercise {name!r}; choose from {', '.join(EXERCISES)}")


def reference_module(exercise: str) -> ModuleType:
    return importlib.import_module(f"reference.{resolve(exercise)}")


def checks_module_path(exercise: str) -> Path:
    return PACKAGE_DIR / "checks" / f"{resolve(exercise)}.py"
