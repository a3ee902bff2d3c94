"""The exceptions of the grader, in two trees.

- `AttnGradeError`: the grader's own errors, each mapped to an exit code by the CLI (anything
  else that escapes a command is an internal error, exit 3, except a failure of the
  environment, `environment_cause`, exit 5).
- `GradedOutcome`: what a submission earns, raised while grading and always caught by the
  grader, which records it as a status and messages (a failed check, student code that raised,
  a sandbox that died, a notebook that cannot be read). Never an exit code, never blamed on the
  grader.
"""

from __future__ import annotations

from typing import Any

from autograder.core.student_text import TYPE_NAME, quoted


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


class EnvironmentFailure(AttnGradeError):
    """What the grader relies on failed, not the grader and never the student: a file could not
    be written or read (a full disk, a folder that cannot be written), the gradebook's database
    was unreachable or cannot be read. It was retried where that can help; nothing was recorded
    for what it touched, and the same command run again once it is fixed does that work. The
    message says what failed, on which file or database, and what to do."""

    exit_code = 5


# Errors of a database (SQLAlchemy's and the drivers'), by class name: connection lost or
# refused, locked, disk full (OperationalError), a broken connection (InterfaceError), a file that
# is not a database (DatabaseError itself; its other subclasses are a program's errors).
DATABASE_ERRORS = ("OperationalError", "InterfaceError", "DatabaseError")
DATABASE_MODULES = ("sqlalchemy", "sqlite3", "psycopg")


def is_database_failure(error: BaseException) -> bool:
    kind = type(error)
    return kind.__name__ in DATABASE_ERRORS and kind.__module__.startswith(DATABASE_MODULES)


def environment_cause(error: BaseException | None) -> BaseException | None:
    """The OSError or database failure behind `error` (itself, or what it was raised from or
    while handling), else None: a failure of the environment, not of the grader."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) or is_database_failure(error):
            return error
        error = error.__cause__ or error.__context__
    return None


def describe_failure(error: BaseException) -> str:
    """One line on an environment failure: `Not a directory: '/c/autograded/bob'`, or the
    database's own first line (no SQL, no parameters)."""
    if isinstance(error, OSError) and error.strerror:
        where = error.filename if error.filename is not None else ""
        return f"{error.strerror}: {where!s}" if where != "" else error.strerror
    text = str(getattr(error, "orig", None) or error).strip()
    return (text.splitlines() or [type(error).__name__])[0]


class GradedOutcome(Exception):
    """Base of every outcome of grading that is the submission's, not the grader's."""


class CheckFailed(GradedOutcome, AssertionError):
    """A check's expectation was not met: the message is for the student; `mistake` is the
    catalogued mistake whose output matched (an `autograder.authoring.catalogue.Mistake`)."""

    def __init__(self, message: str, mistake: Any = None):
        super().__init__(message)
        self.message = message
        self.mistake = mistake


class StudentError(GradedOutcome):
    """Student code raised an exception (in a cell or in a call)."""

    def __init__(self, what: str, error: dict):
        error = error if isinstance(error, dict) else {}
        # The notebook chooses these: one line each, bounded (exception text is a channel out of
        # the sandbox into results.json and the feedback page).
        self.type = quoted(error.get("type", "Exception"), TYPE_NAME)
        self.message = quoted(error.get("message", ""))
        self.traceback = str(error.get("traceback", ""))[:4000]
        if self.type == "NotImplementedError" and not self.message:
            text = f"{what} is not implemented yet (it raised NotImplementedError)"
        elif self.message:
            text = f"{what} raised {self.type}: {self.message}"
        else:
            text = f"{what} raised {self.type}"
        super().__init__(text)


class Unavailable(GradedOutcome):
    """The submission could not be run (e.g. too many restarts); no call can succeed."""
