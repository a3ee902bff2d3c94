"""GitHub Classroom: student repo template, collect from git, feedback branch (issue 10, 2).

Student repositories are local bare repositories reached through file:// URLs.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from autograder.ci.classroom import reporter_totals
from autograder.ci.student_repo.visible_checks import check_outcomes, reporter_results
from autograder.core.registry import checks_module_path
from autograder.course.build import build_course
from tests.conftest import source_notebook, write_notebook
from tests.support.nbgrader_helpers import attn_grade, nbgrader, submission_text

pytestmark = [pytest.mark.ex1, pytest.mark.slow]
EXERCISE = "ex1_numpy_attention"
NOTEBOOK = f"{EXERCISE}.ipynb"
FIRST = "2026-11-20T10:00:00+00:00"
SECOND = "2026-11-21T12:30:00+00:00"


def git(cwd: Path, *args: str, date: str = FIRST) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    env |= {"GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s"}
    env |= {"GIT_COMMITTER_EMAIL": "s@x"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def student_repo(root: Path, student: str, files: dict[str, str], date: str = FIRST) -> Path:
    """A work repo with one commit of `files` (value `->target` makes a symlink), and its
    bare clone (the "GitHub" side); returns the work repo."""
    work = root / f"{student}-work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    commit(work, files, date)
    git(root, "clone", "-q", "--bare", str(work), f"{student}.git")
    git(work, "remote", "add", "origin", str(root / f"{student}.git"))
    return work


def commit(work: Path, files: dict[str, str], date: str) -> None:
    for name, content in files.items():
        if content.startswith("->"):
            (work / name).symlink_to(content[2:])
        else:
            (work / name).write_text(content)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "work", date=date)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("classroom") / "course"
    build_course(course, [EXERCISE])
    return course


def test_init_writes_a_student_repo_with_visible_checks_only(tmp_path):
    repo = tmp_path / "template"
    done = attn_grade("classroom", "init", "ex1", str(repo))
    assert done.returncode == 0, done.stderr
    workflow = (repo / ".github" / "workflows" / "classroom.yml").read_text()
    assert f"visible_checks.py {NOTEBOOK}" in workflow
    assert "autograding-grading-reporter" in workflow
    text = "\n".join(p.read_text() for p in repo.rglob("*") if p.is_file())
    assert "attn-grade grade" not in text and "autograder" not in text
    hidden = [line[4:].split("(")[0] for line in checks_module_path(EXERCISE).read_text().split(
        "\n") if line.startswith("def test_")]  # fmt: skip
    assert hidden and not any(name in text for name in hidden), "no hidden check leaks"
    release = json.loads((repo / NOTEBOOK).read_text())
    assert "NotImplementedError" in "".join("".join(c["source"]) for c in release["cells"])

    blank = check_outcomes(str(repo / NOTEBOOK))
    assert blank and all(test["status"] == "fail" for test in blank)
    results = reporter_results(blank)
    assert results["status"] == "fail" and reporter_totals([("visible", results)]) == (0, 0, 0)
    solved = write_notebook(source_notebook(EXERCISE), tmp_path / NOTEBOOK)
    assert [t["status"] for t in check_outcomes(str(solved))] == ["pass"] * len(blank)


def test_collect_grade_and_push_feedback_round_trip(course, tmp_path):
    release = course / "release" / EXERCISE / NOTEBOOK
    alice = student_repo(tmp_path, "alice", {NOTEBOOK: submission_text(release, EXERCISE, "alice")})
    student_repo(tmp_path, "mallory", {NOTEBOOK: "->/etc/passwd"})
    student_repo(tmp_path, "carol", {"README.md": "nothing yet"})
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "# student,repository\n"
        + "".join(f"{s},file://{tmp_path / s}.git\n" for s in ("alice", "mallory", "carol"))
    )
    common = ["--roster", str(roster), "--course", str(course)]

    done = attn_grade("classroom", "collect", "ex1", *common)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines["alice"] == "collected"
    assert "no regular file" in lines["mallory"] and "no regular file" in lines["carol"]
    assert not (course / "submitted" / "mallory").exists()
    submitted = course / "submitted" / "alice" / EXERCISE
    assert (submitted / NOTEBOOK).read_text() == (alice / NOTEBOOK).read_text()
    stamp = (submitted / "timestamp.txt").read_text()
    assert stamp == datetime.fromisoformat(FIRST).astimezone(UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f %Z"
    )

    commit(alice, {"notes.md": "second push"}, SECOND)  # a later push is collected again
    git(alice, "push", "-q", "origin", "main")
    assert attn_grade("classroom", "collect", "ex1", *common).returncode == 0
    assert (submitted / "timestamp.txt").read_text().startswith("2026-11-21 12:30:00")

    done = attn_grade("autograde", "ex1", "--course", str(course), "--workers", "1")
    assert done.returncode == 0, done.stderr
    nbgrader(course, "generate_feedback", EXERCISE)
    done = attn_grade("classroom", "feedback", "ex1", *common)
    assert done.returncode == 0, done.stderr
    assert "alice: pushed" in done.stdout and "carol: no feedback" in done.stdout
    bare = tmp_path / "alice.git"
    page = git(bare, "show", f"feedback:{EXERCISE}.html")
    assert "Score: 8.0 / 10.0" in page  # 8 auto points; the written answer not graded yet
    assert git(bare, "rev-parse", "main").strip() == git(alice, "rev-parse", "HEAD").strip()

    assert attn_grade("classroom", "feedback", "ex1", *common).returncode == 0
    history = git(bare, "log", "--format=%s", "feedback").split("\n")
    assert history[:2] == [f"Feedback on {EXERCISE}"] * 2, "a second push adds a commit"
