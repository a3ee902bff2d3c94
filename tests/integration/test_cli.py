"""`attn-grade grade`: exit codes, results.json, and notebooks that cannot be graded."""

from __future__ import annotations

import json

import pytest

from autograder.core.registry import PROJECT_ROOT
from autograder.grading.notebook import MAX_NOTEBOOK_BYTES
from autograder.sandbox import isolation
from tests.conftest import source_notebook, write_notebook
from tests.support.nbgrader_helpers import attn_grade

pytestmark = pytest.mark.ex1
EXERCISE = "ex1_numpy_attention"


def test_grade_writes_gradescope_results(tmp_path):
    path = write_notebook(source_notebook(EXERCISE), tmp_path / "submission.ipynb")
    results = tmp_path / "results.json"
    done = attn_grade(
        "grade", str(path), "--exercise", "ex1", "--results", str(results), "--student", "s1"
    )
    assert done.returncode == 0, done.stderr
    assert "8 / 8" in done.stdout and "PASS" in done.stdout
    data = json.loads(results.read_text())
    assert data["score"] == data["max_score"] == 8
    assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(data["tests"][0])
    extra = data["extra_data"]
    assert extra["exercise"] == EXERCISE and extra["status"] == "ok"
    assert extra["manual_points_pending"] == 2 and isinstance(extra["seed"], int)
    assert extra["isolation"] == isolation.choose().describe()
    again = attn_grade(
        "grade", str(path), "--exercise", "ex1", "--format", "json", "--seed", str(extra["seed"])
    )
    assert [t["extra_data"]["seed"] for t in json.loads(again.stdout)["tests"]] == [
        t["extra_data"]["seed"] for t in data["tests"]
    ]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{ not json", "not valid JSON"),
        ('{"hello": "world"}', "not a Jupyter notebook"),
        ('{"cells": [], "nbformat": 3}', "only nbformat 4"),
        ("x" * (MAX_NOTEBOOK_BYTES + 1), "notebooks over"),
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"cells": [42], "nbformat": 4}', "cell 1 is not an object"),
    ],
    ids=["not_json", "not_a_notebook", "old_format", "too_large", "deep", "bad_cell"],
)
def test_ungradable_file_is_a_graded_outcome(content, reason, tmp_path):
    path = tmp_path / f"{EXERCISE}.ipynb"
    path.write_text(content)
    done = attn_grade("grade", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["score"] == 0 and data["extra_data"]["status"] == "invalid_notebook"
    assert reason in data["output"]
    assert data["tests"] and all(t["status"] == "failed" for t in data["tests"])


def test_notebook_of_another_exercise_scores_zero(tmp_path):
    path = write_notebook(source_notebook("ex4_gqa_analysis"), tmp_path / "mine.ipynb")
    done = attn_grade("grade", str(path), "--exercise", "ex1", "--format", "json")
    data = json.loads(done.stdout)
    assert done.returncode == 0 and data["score"] == 0
    assert "this notebook is for ex4_gqa_analysis" in data["output"]
    text = attn_grade("grade", str(path), "--exercise", "ex1").stdout
    assert text.count("this notebook is for ex4_gqa_analysis") == 1, "said once, not per check"


def test_usage_errors_exit_2(tmp_path):
    assert attn_grade("grade", str(tmp_path / "missing.ipynb")).returncode == 2
    directory = attn_grade("grade", str(tmp_path))
    assert directory.returncode == 2 and "is a directory" in directory.stderr
    anonymous = write_notebook(source_notebook(EXERCISE), tmp_path / "notebook.ipynb")
    data = json.loads(anonymous.read_text())
    del data["metadata"]["attn_grade"]
    anonymous.write_text(json.dumps(data))
    done = attn_grade("grade", str(anonymous))
    assert done.returncode == 2 and "pass --exercise" in done.stderr
    assert attn_grade("grade", str(anonymous), "--exercise", "ex9").returncode == 2
    assert attn_grade("grade").returncode == 2
    assert attn_grade("grade", str(anonymous), "--format", "xml").returncode == 2


def test_build_in_korean_through_nbgrader(tmp_path):
    course = tmp_path / "course"
    done = attn_grade("build", "ex1", "--lang", "ko", "--course", str(course))
    assert done.returncode == 0, done.stderr
    release = json.loads((course / "release" / EXERCISE / f"{EXERCISE}.ipynb").read_text())
    assert release["metadata"]["attn_grade"]["lang"] == "ko"
    prose = "".join("".join(c["source"]) for c in release["cells"] if c["cell_type"] == "markdown")
    assert "연습" in prose
    assert "YOUR ANSWER HERE" not in prose and "여기에 답을 쓰세요" in prose, "the stub too"
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in release["cells"]]
    english = json.loads(
        (PROJECT_ROOT / "assignments" / "source" / EXERCISE / f"{EXERCISE}.ipynb").read_text()
    )
    assert ids == [c["metadata"].get("nbgrader", {}).get("grade_id") for c in english["cells"]]


def test_commands_run_inside_the_course_find_it(tmp_path):
    """Issue 21: inside the course, `report` said "run attn-grade build first", and `build`
    there nested a new course in ./assignments."""
    import subprocess
    import sys

    from autograder.course.build import tool_env

    course = tmp_path / "course"
    assert attn_grade("build", "ex1", "--course", str(course), "--no-release").returncode == 0

    def inside(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "autograder.cli.app", *args]
        return subprocess.run(command, cwd=course, env=tool_env(), capture_output=True, text=True)

    report = inside("report")
    assert report.returncode == 0, report.stderr
    assert (course / "report.html").is_file()
    rebuilt = inside("build", "ex2", "--no-release")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (course / "source" / "ex2_attention_heatmap").is_dir()
    assert not (course / "assignments").exists(), "no course nested in the course"
