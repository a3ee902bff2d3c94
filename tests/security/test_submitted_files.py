"""Every file under submitted/ is accounted for: misnamed notebooks are graded with a note,
ambiguous ones are listed and make `attn-grade autograde` exit 1; nothing is skipped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.course.submitted import account
from tests.support.nbgrader_helpers import attn_grade, scores, submission_text

EX1 = "ex1_numpy_attention"
MISNAMED = f"{EX1} (1).ipynb"


def put(course: Path, relative: str, text: str = "{}") -> Path:
    path = course / "submitted" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_kind_of_file_is_accounted_for(tmp_path):
    put(tmp_path, f"alice/{EX1}/{MISNAMED}", '{"a": 1}')
    put(tmp_path, f"bob/{EX1}/first.ipynb")
    put(tmp_path, f"bob/{EX1}/second.ipynb")
    put(tmp_path, f"carol/{EX1}/{EX1}.ipynb")
    put(tmp_path, f"carol/{EX1}/extra.ipynb", '{"b": 2}')
    put(tmp_path, f"carol/{EX1}/timestamp.txt", "2026-11-22")
    put(tmp_path, f"carol/{EX1}/data.csv", "1,2")
    put(tmp_path, f"dave/ex1/{EX1}.ipynb")
    put(tmp_path, "erin.ipynb")
    put(tmp_path, "frank\x1b[2J/notes.ipynb")
    found = account(tmp_path, [EX1])
    assert [(e, s) for e, s, _ in found.found] == [(EX1, "alice"), (EX1, "carol")]
    copied = tmp_path / "submitted" / "alice" / EX1 / f"{EX1}.ipynb"
    assert copied.read_text() == '{"a": 1}', "the misnamed notebook is graded under nbgrader's name"
    assert (copied.parent / MISNAMED).exists(), "the student's file stays as it was"
    assert found.notes[(EX1, "alice")] == f"graded {MISNAMED!r} (misnamed)"
    assert "also submitted, not graded: 'extra.ipynb'" in found.notes[(EX1, "carol")]
    assert "other files: 'data.csv'" in found.notes[(EX1, "carol")]
    assert "timestamp" not in found.notes[(EX1, "carol")]
    problems = "\n".join(found.problems)
    assert "bob/ex1_numpy_attention: not graded" in problems and "'first.ipynb'" in problems
    assert "dave/ex1: a folder that is not an exercise folder" in problems
    assert "erin.ipynb: a file directly in submitted/" in problems
    assert "\x1b" not in problems and "'frank\\x1b[2J': not a valid student id" in problems
    again = account(tmp_path, [EX1])
    assert again.notes[(EX1, "alice")] == found.notes[(EX1, "alice")], "a re-run says the same"


@pytest.mark.slow
@pytest.mark.ex1
def test_autograde_grades_a_misnamed_notebook_and_exits_1_for_an_ambiguous_one(tmp_path):
    course = tmp_path / "course"
    built = attn_grade("build", EX1, "--course", str(course))
    assert built.returncode == 0, built.stderr
    release = course / "release" / EX1 / f"{EX1}.ipynb"
    text = submission_text(release, EX1, "alice")
    put(course, f"alice/{EX1}/{MISNAMED}", text)
    put(course, f"bob/{EX1}/a.ipynb", text)
    put(course, f"bob/{EX1}/b.ipynb", text)
    done = attn_grade("autograde", EX1, "--course", str(course), "--workers", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    alice = next(line for line in done.stdout.splitlines() if line.startswith("alice"))
    assert "8/8" in alice and "(misnamed)" in alice
    assert "NOT GRADED   bob/ex1_numpy_attention" in done.stdout
    assert "submissions not graded: 1" in done.stdout
    assert "bob/ex1_numpy_attention: not graded" in done.stderr
    assert set(scores(course / "gradebook.db", EX1)) == {"alice"}
