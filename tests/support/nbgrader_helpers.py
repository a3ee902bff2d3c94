"""Helpers for tests that drive a real nbgrader course."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

from autograder.course.build import tool_env
from autograder.demo import student_notebook


def nbgrader(
    cwd: Path, *args: str, check: bool = True, plain: bool = False
) -> subprocess.CompletedProcess:
    """The nbgrader command line: nbgrader's own main(), started through our wrapper that skips
    a 2 s optional import (autograder/nbgrader_plugins/speedups.py); `plain=True` runs
    `python -m nbgrader`."""
    module = "nbgrader" if plain else "autograder.nbgrader_plugins.nbgrader_main"
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    if check:
        assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done


def nbgrader_as_students(jobs: list[tuple[Path, list[str]]]) -> None:
    """`nbgrader ARGS` for several students, each in their home, in one process
    (tests/support/students.py); `jobs` are (home, ARGS) pairs, run in order."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.students"],
        cwd=Path(__file__).resolve().parents[2],  # the checkout: `-m tests.support...`
        env=tool_env(),
        input=json.dumps([[str(home), arguments] for home, arguments in jobs]),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"the students' nbgrader:\n{done.stdout}{done.stderr}"


def attn_grade(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The attn-grade command line; `env` adds to (or overrides) the tool environment."""
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli.app", *args],
        env={**tool_env(), **(env or {})},
        capture_output=True,
        text=True,
    )


def submission_text(release: Path, exercise: str, student: str) -> str:
    """alice: the reference; bob: one catalogued mistake; carol: blank (see demo.py)."""
    return json.dumps(student_notebook(json.loads(release.read_text()), exercise, student))


def html_lines(path: Path) -> set[str]:
    text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))
    return {line.strip() for line in text.splitlines() if line.strip()}


def scores(db: Path | str, exercise: str) -> dict[str, dict[str, float | None]]:
    """student -> grade id -> auto score, read from the gradebook (a sqlite file or a URL)."""
    from nbgrader.api import Gradebook

    found: dict[str, dict[str, float | None]] = {}
    with Gradebook(db if isinstance(db, str) else f"sqlite:///{db}") as gradebook:
        for submission in gradebook.assignment_submissions(exercise):
            for notebook in submission.notebooks:
                found[submission.student.id] = {g.name: g.auto_score for g in notebook.grades}
    return found


def notebook_lines(path: Path) -> set[str]:
    """Stripped lines of every cell's source."""
    lines = set()
    for cell in json.loads(path.read_text())["cells"]:
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines |= {line.strip() for line in source.splitlines() if line.strip()}
    return lines
