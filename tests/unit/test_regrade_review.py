"""A regrade flags a hand grade for review only when the written answer's text changed (issue 38,
item 5), on a real nbgrader gradebook without running a notebook; the report's sentence says
what is true of the written answer; the item analysis is the whole course's (F8)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from nbgrader.api import Gradebook

from autograder.batch import scratch
from autograder.batch.resume import course_reports
from autograder.batch.table import Outcome, Submitted
from autograder.core.results import REPORT_KEY
from autograder.course.build import tool_env
from autograder.nbgrader_plugins.page_text import words
from autograder.nbgrader_plugins.report_cell import SUMMARY, written_summary

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own
EX, EX6 = "ex1_numpy_attention", "ex6_rope"
TEXT = "Dividing by $\\sqrt{d_k}$ keeps the variance at 1."


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """ex1's shape: 8 auto points in one check cell, a written answer of 2 (a solution cell,
    with the comment nbgrader keeps for it)."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    os.environ["PATH"] = tool_env()["PATH"]  # nbgrader runs alembic when it creates one
    with Gradebook(f"sqlite:///{path}") as gradebook:
        gradebook.add_assignment(EX)
        gradebook.add_notebook(EX, EX)
        gradebook.add_grade_cell("checks", EX, EX, max_score=8, cell_type="code")
        gradebook.add_grade_cell("answer", EX, EX, max_score=2, cell_type="markdown")
        gradebook.add_solution_cell("answer", EX, EX)
        gradebook.add_student("alice")
        gradebook.add_submission(EX, "alice")
    return path


@pytest.fixture
def db(empty_gradebook, tmp_path) -> str:
    copy = tmp_path / "gradebook.db"
    shutil.copy(empty_gradebook, copy)
    return f"sqlite:///{copy}"


def notebook_file(path: Path, answer, *extra: dict) -> Path:
    cells = [
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "solve"}}, "source": "x = 1"},
        {
            "cell_type": "markdown",
            "metadata": {"nbgrader": {"grade_id": "answer"}},
            "source": answer,
        },
        *extra,
    ]
    path.write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    )
    return path


def hand_graded(db: str, answer: float | None, checks: float | None = None, review=False) -> None:
    """alice's submission as a first autograde and formgrader left it."""
    with Gradebook(db) as gradebook:
        notebook = gradebook.find_submission_notebook(EX, EX, "alice")
        for grade in notebook.grades:
            grade.auto_score = 8.0 if grade.name == "checks" else None
            grade.manual_score = answer if grade.name == "answer" else checks
            grade.needs_manual_grade = review
        gradebook.db.commit()


def regrade(db: str, now: dict, graded: dict | None) -> dict[str, bool]:
    """A regrade's merge: the answers' digests `now`, those of the newest audit record
    `graded`; each grade's review flag after it."""
    extracted = {
        "exercise": EX,
        "student": "alice",
        "timestamp": None,
        "notebooks": {
            EX: {
                "late_submission_penalty": None,
                "grades": {"checks": [8.0, False], "answer": [None, True]},
                "comments": {"answer": None},
            }
        },
        "answers": now,
    }
    scratch.merge(db, "course", extracted, graded)
    with Gradebook(db) as gradebook:
        notebook = gradebook.find_submission_notebook(EX, EX, "alice")
        return {g.name: bool(g.needs_manual_grade) for g in notebook.grades}


@pytest.mark.parametrize(
    "now, graded, review",
    [
        ({"answer": "aa"}, {"answer": "aa"}, False),  # a code change, or nothing: the same text
        ({"answer": "bb"}, {"answer": "aa"}, True),  # the answer changed
        ({"answer": "aa"}, {}, True),  # a record from before digests: not known, reviewed
        ({"answer": "aa"}, None, True),  # no audit record at all
        ({"answer": None}, {"answer": "aa"}, True),  # the answer cell is gone, or unreadable
        ({"answer": None}, {"answer": None}, True),  # gone both times: nothing to compare
    ],
)
def test_a_hand_grade_is_reviewed_only_when_the_answer_changed(db, now, graded, review):
    hand_graded(db, answer=1.5)
    assert regrade(db, now, graded) == {"checks": False, "answer": review}
    with Gradebook(db) as gradebook:
        grade = gradebook.find_grade("answer", EX, EX, "alice")
        assert grade.manual_score == 1.5, "a hand grade survives every regrade"


def test_a_review_asked_for_stays_until_the_instructor_grades_again(db):
    hand_graded(db, answer=1.5, review=True)
    assert regrade(db, {"answer": "aa"}, {"answer": "aa"})["answer"] is True


def test_an_answer_without_a_hand_grade_follows_nbgrader(db):
    hand_graded(db, answer=None, review=True)
    assert regrade(db, {"answer": "aa"}, {"answer": "aa"})["answer"] is True, "still waits"


def test_a_hand_grade_of_a_check_keeps_nbgraders_rule(db):
    """An override of an automatic check is not an answer's: it stays flagged at a regrade."""
    hand_graded(db, answer=None, checks=7.0)
    assert regrade(db, {"answer": "aa"}, {"answer": "aa"})["checks"] is True


def test_the_digest_is_of_the_answer_text_only(tmp_path):
    names = {"answer"}
    as_text = scratch.answer_digests(notebook_file(tmp_path / "a.ipynb", TEXT), names)
    as_lines = scratch.answer_digests(
        notebook_file(tmp_path / "b.ipynb", [TEXT[:10], TEXT[10:]]), names
    )
    assert as_text == as_lines and as_text["answer"] is not None, "nbformat's two spellings"
    other = scratch.answer_digests(notebook_file(tmp_path / "c.ipynb", TEXT + " "), names)
    assert other != as_text, "any change of the text"
    copy = {
        "cell_type": "markdown",
        "metadata": {"nbgrader": {"grade_id": "answer"}},
        "source": "x",
    }
    first = scratch.answer_digests(notebook_file(tmp_path / "d.ipynb", TEXT, copy), names)
    assert first == as_text, "the first cell of the id, as autograde keeps it"
    missing = scratch.answer_digests(notebook_file(tmp_path / "e.ipynb", TEXT), {"answer", "two"})
    assert missing == {**as_text, "two": None}
    (tmp_path / "f.ipynb").write_text("{ not a notebook")
    assert scratch.answer_digests(tmp_path / "f.ipynb", names) == {"answer": None}


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize(
    "state, points, given, shown",
    [
        ("graded", 2.0, 1.5, ("1.5", "2")),
        ("blank", 2.0, 0.0, ("2",)),
        ("review", 2.0, 1.5, ("1.5", "2")),
        ("pending", 2.0, 0.0, ("2",)),
    ],
)
def test_the_report_says_what_is_true_of_the_written_answer(lang, state, points, given, shown):
    pending = words(SUMMARY["pending"], lang) % ("6.5", "8", "2")
    source = f"<p><strong>report</strong>: {pending}</p>\n<table></table>\n"
    said = written_summary(source, lang, state, points, given)
    sentence = words(SUMMARY[state], lang) % ("6.5", "8", *shown)
    assert said == f"<p><strong>report</strong>: {sentence}</p>\n<table></table>\n"
    if state != "pending":
        assert pending not in said
    assert written_summary("<p>no sentence</p>", lang, state, points, given) == "<p>no sentence</p>"


def test_every_sentence_has_korean():
    assert all(words(text, "ko") != text for text in SUMMARY.values())


def autograded(course: Path, student: str, exercise: str, passed: bool) -> dict:
    report = {
        "exercise": exercise,
        "status": "ok",
        "checks": [{"name": "test_one", "grade_id": "c", "max_points": 1.0, "passed": passed}],
    }
    for folder in ("submitted", "autograded"):
        path = course / folder / student / exercise / f"{exercise}.ipynb"
        path.parent.mkdir(parents=True)
        notebook = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {}}
        if folder == "autograded":
            notebook["metadata"][REPORT_KEY] = report
        path.write_text(json.dumps(notebook))
    return report


def test_the_item_analysis_counts_the_whole_course(tmp_path):
    """A run of one student (or of one exercise) counts every other submission of the course as
    its autograded notebook records it (F8), and this run's as it left them."""
    course = tmp_path / "course"
    stored = {
        (exercise, student): autograded(course, student, exercise, passed=True)
        for exercise in (EX, EX6)
        for student in ("alice", "bob", "carol")
    }
    (course / "submitted" / "dave" / EX).mkdir(parents=True)  # handed in, never autograded
    (course / "submitted" / "dave" / EX / f"{EX}.ipynb").write_text("{}")
    api = SimpleNamespace(
        coursedir=SimpleNamespace(
            autograded_directory="autograded",
            format_path=lambda folder, student, exercise: str(course / folder / student / exercise),
        )
    )
    regraded = {
        **stored[(EX, "bob")],
        "checks": [{**stored[(EX, "bob")]["checks"][0], "passed": False}],
    }
    bob = Submitted(EX, "bob", course / "submitted" / "bob" / EX / f"{EX}.ipynb")
    carol = Submitted(EX, "carol", course / "submitted" / "carol" / EX / f"{EX}.ipynb")
    outcomes = {bob: Outcome(report=regraded), carol: Outcome(reason="not graded", failed="grader")}
    reports = course_reports(api, course, outcomes)
    expected = [
        stored[(EX, "alice")],
        regraded,  # this run's
        # carol's ex1: this run could not grade it: left out, as the batch always did
        stored[(EX6, "alice")],
        stored[(EX6, "bob")],
        stored[(EX6, "carol")],
    ]
    assert [r["exercise"] for r in reports] == [r["exercise"] for r in expected]
    assert [r["checks"][0]["passed"] for r in reports] == [True, False, True, True, True]
