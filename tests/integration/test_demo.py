"""`attn-grade demo` runs the course cycle (here on one exercise, to keep the suite fast)."""

from __future__ import annotations

import csv

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import EXERCISES, declaration
from tests.support.nbgrader_helpers import attn_grade

pytestmark = [pytest.mark.slow, pytest.mark.ex1]


def test_every_exercise_has_its_demo_mistake():
    for exercise in EXERCISES:
        assert catalogue_for(exercise)[declaration(exercise).demo_mistake]


def test_demo_cycle_on_one_exercise(tmp_path):
    course = tmp_path / "demo"
    done = attn_grade("demo", "ex1", "--course", str(course), "--workers", "2")
    assert done.returncode == 0, done.stderr
    rows = {
        r["student_id"]: float(r["raw_score"])
        for r in csv.DictReader((course / "grades.csv").open())
    }
    assert rows["alice"] == 8 and rows["carol"] == 0 and 0 < rows["bob"] < 8
    for student in ("alice", "bob", "carol"):
        assert (course / "feedback" / student / EXERCISES[0] / f"{EXERCISES[0]}.html").exists()
    assert "alice" in done.stdout and "feedback" in done.stdout
    report = course / "report.html"
    assert f"report:   {report}" in done.stdout
    assert "no_sqrt_scaling" in report.read_text() and (course / "report-checks.csv").is_file()
    again = attn_grade("demo", "ex1", "--course", str(course))
    assert again.returncode == 0, "a demo course is rebuilt from scratch"


def test_demo_refuses_to_overwrite_another_directory(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    done = attn_grade("demo", "ex1", "--course", str(tmp_path))
    assert done.returncode != 0
    assert (tmp_path / "precious.txt").read_text() == "keep me"
