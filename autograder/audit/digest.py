"""The checks digest of one exercise, recorded with each of its grades (`checks_sha256`).

It covers the exercise's own parts, found through the registry (its folder: declaration,
checks, mistakes, tables; its reference and its template, wherever those live) and the shared
grading code (`core/versions.SHARED_POINTS_CODE`). An edit of ex8's checks changes ex8's digest
only: the next `autograde` regrades ex8 and finds every other exercise up to date.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from autograder.core import versions
from autograder.core.registry import exercise_dir, reference_path, template_path


def exercise_files(exercise: str) -> list[Path]:
    """The files of one exercise that decide its points."""
    own = versions.files_below(exercise_dir(exercise))
    own += versions.files_below(reference_path(exercise))
    own += versions.files_below(template_path(exercise))
    return sorted(set(own))


def points_files(exercise: str) -> list[Path]:
    """Every file that decides the exercise's points: its own and the shared grading code."""
    return versions.shared_points_files(versions.PACKAGE_DIR) + exercise_files(exercise)


@cache
def checks_digest(exercise: str) -> str:
    """The digest of this installation's checks of `exercise` and of everything else that
    decides its points."""
    return versions.digest_of(points_files(exercise))
