"""The grader's own errors: one hierarchy, each mapped to an exit code by the CLI.

A student's mistakes are never errors here: they are graded outcomes (a status and messages).
"""

from __future__ import annotations


class AttnGradeError(Exception):
    """Base of every error the grader raises on purpose."""

    exit_code = 3


class UsageError(AttnGradeError, ValueError):
    """The command was called wrongly (unknown exercise, missing file, bad option)."""

    exit_code = 2


class UnknownExercise(UsageError):
    """Which exercise a notebook belongs to cannot be told; pass it explicitly."""


class GraderError(AttnGradeError, RuntimeError):
    """The grader itself failed (a broken check module): never blamed on the student."""

    exit_code = 3


class IsolationError(AttnGradeError):
    """Grading is refused: the isolation needed to hide the hidden files is not available, or a
    requested level is not available on this host. The message says what is missing."""

    exit_code = 4
