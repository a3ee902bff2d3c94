"""Exit codes come from the error types only: an unexpected error is exit 3, never a usage error
(before: any ValueError, a bug included, was reported as exit 2, "called wrongly")."""

from __future__ import annotations

import pytest

from autograder.cli import app
from autograder.core.errors import GraderError, IsolationError, UsageError


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
    ],
)
def test_exit_code_of_each_error(monkeypatch, capsys, error, code):
    monkeypatch.setattr(app, "cmd_report", _raising(error))
    monkeypatch.setattr(app, "_apply_isolation", lambda args: None)
    assert app.main(["report"]) == code
    assert "Traceback" not in capsys.readouterr().err


def test_an_unknown_exercise_is_a_usage_error(capsys):
    assert app.main(["build", "ex99"]) == 2
    assert "unknown exercise" in capsys.readouterr().err
