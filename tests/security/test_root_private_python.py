"""A root grader whose Python lives under a private home (/root/.pyenv) and a host without
bubblewrap: the sandbox uid could not run that Python, so no level is available and grading is
refused with exit 4 and what to change, never an internal error (exit 3).

The CLI runs in a subprocess that hides bubblewrap (`jail.bwrap` finds none) and, on a machine
whose Python other users can enter, also makes its installation private (as under /root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course.build import tool_env
from autograder.sandbox import isolation
from tests.conftest import source_notebook, write_notebook

pytestmark = [
    pytest.mark.ex1,
    pytest.mark.skipif(os.geteuid() != 0, reason="a root grader's refusal"),
]
EXERCISE = "ex1_numpy_attention"

# attn-grade on this host without bubblewrap, its Python private to root
PROGRAM = """
import sys
from autograder.sandbox import isolation, jail
jail.bwrap = lambda: None
if all(isolation._others_can_enter(p) for p in isolation.python_roots()):
    isolation._others_can_enter = lambda path: False  # a Python under /root, simulated
from autograder.cli.app import main
raise SystemExit(main(sys.argv[1:]))
"""


def attn_grade_without_bwrap(*args: str, env: dict[str, str] | None = None):
    environment = tool_env()
    environment.pop(isolation.ENVIRONMENT_VARIABLE, None)  # auto unless the test says
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        env=environment,
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def notebook(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("private-python") / f"{EXERCISE}.ipynb"
    return write_notebook(source_notebook(EXERCISE), path)


def assert_refused_with_remedy(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 4, done.stderr
    assert "internal error" not in done.stderr and "AssertionError" not in done.stderr
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    assert "bubblewrap" in message  # what to install
    assert "other users cannot enter" in message
    assert "python3 -m venv" in message  # a Python that other users can read, how
    private = isolation.private_python() or isolation.python_roots()  # real, or simulated
    assert all(root in message for root in private)  # which Python, and why


@pytest.mark.parametrize(
    ("options", "env"),
    [
        pytest.param((), {}, id="auto"),
        pytest.param(("--isolation", "uid"), {}, id="uid"),
        pytest.param(("--isolation", "landlock"), {}, id="landlock"),
        pytest.param((), {isolation.ENVIRONMENT_VARIABLE: "rlimits"}, id="rlimits-env"),
    ],
)
def test_grade_is_refused_with_what_to_change(notebook, options, env):
    done = attn_grade_without_bwrap("grade", str(notebook), *options, env=env)
    assert_refused_with_remedy(done)


def test_autograde_is_refused_with_what_to_change(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    config = "c = get_config()\nc.CourseDirectory.course_id = 'course'\n"
    (course / "nbgrader_config.py").write_text(config)
    done = attn_grade_without_bwrap("autograde", "--course", str(course))
    assert_refused_with_remedy(done)
