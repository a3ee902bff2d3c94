"""The nbgrader course cycle with the real nbgrader command line: build, release, fetch, submit,
collect, autograde (our checks inside), feedback, export."""

from __future__ import annotations

import csv
import inspect
import json

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.core.registry import EXERCISES, checks_module_path, declaration, reference_module
from tests.conftest import exercise_params
from tests.support.nbgrader_helpers import (
    attn_grade,
    html_lines,
    nbgrader,
    nbgrader_as_students,
    notebook_lines,
    scores,
    submission_text,
)

pytestmark = pytest.mark.slow
COURSE = "attention-transformers"
WARNING_CELL = (
    "import sys, warnings\nwarnings.warn('this API is deprecated')\n"
    "print('a note on stderr', file=sys.stderr)\n"
)


def check_module_lines() -> set[str]:
    lines = set()
    for exercise in EXERCISES:
        path = checks_module_path(exercise)
        text = path.read_text()
        lines |= {line.strip() for line in text.splitlines() if len(line.strip()) > 12}
    return lines


@pytest.mark.parametrize("exercise", exercise_params())
def test_full_cycle_with_the_nbgrader_cli(exercise, tmp_path):
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    exchange.mkdir(mode=0o777)
    # --small-demo: the demo cells train on less data for fewer epochs, doing the same things
    # (full demo cells: test_notebooks_execute, and through nbgrader test_feedback_pages)
    built = attn_grade(
        "build", exercise, "--course", str(course), "--exchange", str(exchange), "--small-demo"
    )
    assert built.returncode == 0, built.stderr
    nbgrader(course, "release_assignment", exercise)
    students = {"alice": "alice", "bob": "bob", "carol": "carol"}
    if exercise == "ex1_numpy_attention":
        students["dave"] = "alice"  # correct, but writes to stderr: one exercise is enough
    homes = {student: tmp_path / "students" / student for student in students}
    flags = [f"--Exchange.root={exchange}", "--course", COURSE]
    for home in homes.values():
        home.mkdir(parents=True)
    # each student's own `nbgrader fetch_assignment` and `nbgrader submit`, run by nbgrader's
    # application in one process per phase (tests/support/students.py)
    nbgrader_as_students(
        [(home, ["fetch_assignment", exercise, *flags]) for home in homes.values()]
    )
    for student, behaves_like in students.items():
        notebook = homes[student] / exercise / f"{exercise}.ipynb"
        text = submission_text(notebook, exercise, behaves_like)
        if student == "dave":  # correct, but noisy on stderr in a solution cell
            data = json.loads(text)
            first = next(
                c
                for c in data["cells"]
                if c["metadata"].get("nbgrader", {}).get("solution") and c["cell_type"] == "code"
            )
            first["source"] = WARNING_CELL + first["source"]
            text = json.dumps(data)
        notebook.write_text(text)
    nbgrader_as_students(
        [(homes[s], ["submit", exercise, "--student", s, *flags]) for s in students]
    )
    nbgrader(course, "collect", exercise)
    nbgrader(course, "autograde", exercise)
    nbgrader(course, "generate_feedback", exercise)
    nbgrader(course, "release_feedback", exercise)
    released = list((exchange / COURSE / "feedback").glob("*.html"))
    assert len(released) == len(students), "release_feedback puts every student's feedback out"

    auto = scores(course / "gradebook.db", exercise)
    totals = {
        student: sum(v for gid, v in cells.items() if not gid.startswith("answer"))
        for student, cells in auto.items()
    }
    assert totals["alice"] == 8
    assert totals.get("dave", 8) == 8, "a warning on stderr must not cost points"
    assert 0 < totals["bob"] < 8
    assert totals["carol"] == 0

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        alice = gradebook.find_submission(exercise, "alice")
        carol = gradebook.find_submission(exercise, "carol")
        assert alice.needs_manual_grade, "the written answer is flagged for grading"
        assert not carol.needs_manual_grade, "a blank answer is graded zero automatically"
        answer = next(
            g
            for g in gradebook.find_submission_notebook(exercise, exercise, "alice").grades
            if g.name.startswith("answer")
        )
        answer.manual_score = 1.5
        gradebook.db.commit()

    feedback = {s: course / "feedback" / s / exercise / f"{exercise}.html" for s in students}
    mistake = catalogue_for(exercise)[declaration(exercise).demo_mistake]
    assert mistake.description in feedback["bob"].read_text()
    # No line of a check module or of the reference may reach a student's feedback, unless it
    # is in what the student was given (the release) or wrote (the submission).
    hidden = check_module_lines() | {
        line.strip()
        for line in inspect.getsource(reference_module(exercise)).splitlines()
        if len(line.strip()) > 12
    }
    given = notebook_lines(course / "release" / exercise / f"{exercise}.ipynb")
    for student, path in feedback.items():
        own = notebook_lines(course / "submitted" / student / exercise / f"{exercise}.ipynb")
        leaked = (hidden & html_lines(path)) - given - own
        assert not leaked, f"hidden code in {student}'s feedback: {leaked}"

    nbgrader(course, "export", "--to", "grades.csv")
    rows = list(csv.DictReader((course / "grades.csv").open()))
    assert {row["student_id"]: float(row["raw_score"]) for row in rows}["alice"] == 9.5

    # alice's submission graded again (nbgrader's --force): her hand grade stays, and the same
    # notebook earns the same auto scores (the grading is deterministic); the others are not
    # regraded, as the hand grade is hers alone
    autograded = course / "autograded" / "alice" / exercise / f"{exercise}.ipynb"
    first_grading = autograded.stat().st_mtime_ns
    nbgrader(course, "autograde", exercise, "--student", "alice", "--force")
    assert autograded.stat().st_mtime_ns != first_grading, "alice was graded again"
    assert scores(course / "gradebook.db", exercise) == auto
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        answer = next(
            g
            for g in gradebook.find_submission_notebook(exercise, exercise, "alice").grades
            if g.name.startswith("answer")
        )
        assert answer.manual_score == 1.5, "a re-autograde keeps manual grades"
    assert scores(course / "gradebook.db", exercise) == auto, "re-autograde is identical"
