"""Exit codes come from the error types only: an unexpected error is exit 3, never a usage error
(before: any ValueError, a bug included, was reported as exit 2, "called wrongly")."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from autograder.cli import app
from autograder.core.errors import EnvironmentFailure, GraderError, IsolationError, UsageError


def database_failure():
    import sqlalchemy.exc

    return sqlalchemy.exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError("locked"))


def _raising(error: BaseException):
    def run(args):
        raise error

    return run


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("bad option"), 2),
        (GraderError("a check module is broken"), 3),
        (IsolationError("no jail"), 4),
        (ValueError("an internal bug"), 3),
        (KeyError("an internal bug"), 3),
        (EnvironmentFailure("writing /c/autograded/bob failed: Not a directory"), 5),
        (OSError(errno.ENOSPC, "No space left on device", "/c/report.html"), 5),
        (database_failure(), 5),
        (KeyboardInterrupt(), 130),
    ],
)
def test_exit_code_of_each_error(monkeypatch, capsys, error, code):
    monkeypatch.setattr(app, "cmd_report", _raising(error))
    monkeypatch.setattr(app, "_apply_isolation", lambda args: None)
    assert app.main(["report"]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_failure_of_the_environment_says_what_where_and_what_to_do(monkeypatch, capsys):
    """Exit 5, not 3 (the grader's own bugs): the file, the failure, the advice, one line."""
    error = OSError(errno.ENOSPC, "No space left on device", "/c/report.html")
    monkeypatch.setattr(app, "cmd_report", _raising(error))
    monkeypatch.setattr(app, "_apply_isolation", lambda args: None)
    assert app.main(["report"]) == 5
    assert capsys.readouterr().err == (
        "attn-grade report: No space left on device: /c/report.html; fix it and run the same "
        "command again\n"
    )


def test_an_unknown_exercise_is_a_usage_error(capsys):
    assert app.main(["build", "ex99"]) == 2
    assert "unknown exercise" in capsys.readouterr().err
