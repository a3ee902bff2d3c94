"""The nbgrader course cycle with the real nbgrader command line: build, release, fetch, submit,
collect, autograde (our checks inside), feedback, export.

The selected exercises go through the cycle together, in one course, as a course with several
assignments does: each phase that nbgrader runs for many assignments at once (`autograde '*'`,
`generate_feedback '*'`, `export`, the forced regrade) is one command for all of them, and the
exchange's commands (release, collect, release_feedback) one per exercise. Then each exercise's
test checks its own part. (One course per exercise started each nbgrader command once per
exercise: 80 processes for the eight, now 31.)"""

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


def _selected(session: pytest.Session) -> list[str]:
    """The exercises whose cycle test is selected in this run (`-m ex3`, `-k`), in order."""
    chosen = {
        item.callspec.params["exercise"]
        for item in session.items
        if item.module.__name__ == __name__ and hasattr(item, "callspec")
    }
    return [exercise for exercise in EXERCISES if exercise in chosen]


def _students(exercise: str) -> dict[str, str]:
    """student -> the behaviour of the notebook submitted (demo.py's alice, bob and carol)."""
    students = {"alice": "alice", "bob": "bob", "carol": "carol"}
    if exercise == "ex1_numpy_attention":
        students["dave"] = "alice"  # correct, but writes to stderr: one exercise is enough
    return students


class Cycle:
    """One course run through the nbgrader cycle for `exercises`, with what each test reads."""

    def __init__(self, root, exercises: list[str]):
        self.course, self.exchange = root / "course", root / "exchange"
        self.exchange.mkdir(mode=0o777)
        self.exercises = exercises
        self.released: dict[str, list] = {}  # exercise -> feedback files its release put out
        self.auto: dict[str, dict] = {}  # exercise -> the first autograde's scores
        self.first_grading: dict[str, int] = {}  # exercise -> alice's autograded file's mtime
        self.rows: list[dict[str, str]] = []  # grades.csv
        self.run(root)

    def run(self, root) -> None:
        # --small-demo: the demo cells train on less data for fewer epochs, doing the same
        # things (full demo cells: test_notebooks_execute, and through nbgrader
        # test_feedback_pages)
        built = attn_grade(
            "build",
            *self.exercises,
            "--course",
            str(self.course),
            "--exchange",
            str(self.exchange),
            "--small-demo",
        )
        assert built.returncode == 0, built.stderr
        for exercise in self.exercises:
            nbgrader(self.course, "release_assignment", exercise)
        homes = {s: root / "students" / s for e in self.exercises for s in _students(e)}
        flags = [f"--Exchange.root={self.exchange}", "--course", COURSE]
        for home in homes.values():
            home.mkdir(parents=True)
        # each student's own `nbgrader fetch_assignment` and `nbgrader submit`, run by
        # nbgrader's application in one process per phase (tests/support/students.py)
        nbgrader_as_students(
            [
                (homes[student], ["fetch_assignment", exercise, *flags])
                for exercise in self.exercises
                for student in _students(exercise)
            ]
        )
        for exercise in self.exercises:
            for student, behaves_like in _students(exercise).items():
                notebook = homes[student] / exercise / f"{exercise}.ipynb"
                notebook.write_text(submitted_text(notebook, exercise, student, behaves_like))
        nbgrader_as_students(
            [
                (homes[student], ["submit", exercise, "--student", student, *flags])
                for exercise in self.exercises
                for student in _students(exercise)
            ]
        )
        for exercise in self.exercises:
            nbgrader(self.course, "collect", exercise)
        nbgrader(self.course, "autograde", "*")
        nbgrader(self.course, "generate_feedback", "*")
        feedback = self.exchange / COURSE / "feedback"
        for exercise in self.exercises:
            before = set(feedback.glob("*.html")) if feedback.exists() else set()
            nbgrader(self.course, "release_feedback", exercise)
            self.released[exercise] = sorted(set(feedback.glob("*.html")) - before)

        from nbgrader.api import Gradebook

        for exercise in self.exercises:
            self.auto[exercise] = scores(self.course / "gradebook.db", exercise)
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            for exercise in self.exercises:  # alice's written answer, graded by hand
                answer = next(
                    g
                    for g in gradebook.find_submission_notebook(exercise, exercise, "alice").grades
                    if g.name.startswith("answer")
                )
                answer.manual_score = 1.5
            gradebook.db.commit()
        nbgrader(self.course, "export", "--to", "grades.csv")
        self.rows = list(csv.DictReader((self.course / "grades.csv").open()))
        # alice's submissions graded again (nbgrader's --force): her hand grades stay, and the
        # same notebooks earn the same auto scores (the grading is deterministic); the others
        # are not regraded, as the hand grade is hers alone
        for exercise in self.exercises:
            self.first_grading[exercise] = self.autograded(exercise).stat().st_mtime_ns
        nbgrader(self.course, "autograde", "*", "--student", "alice", "--force")

    def autograded(self, exercise: str):
        return self.course / "autograded" / "alice" / exercise / f"{exercise}.ipynb"


def submitted_text(notebook, exercise: str, student: str, behaves_like: str) -> str:
    text = submission_text(notebook, exercise, behaves_like)
    if student != "dave":
        return text
    data = json.loads(text)  # correct, but noisy on stderr in a solution cell
    first = next(
        c
        for c in data["cells"]
        if c["metadata"].get("nbgrader", {}).get("solution") and c["cell_type"] == "code"
    )
    first["source"] = WARNING_CELL + first["source"]
    return json.dumps(data)


@pytest.fixture(scope="module")
def cycle(request, tmp_path_factory) -> Cycle:
    return Cycle(tmp_path_factory.mktemp("cycle"), _selected(request.session))


@pytest.mark.parametrize("exercise", exercise_params())
def test_full_cycle_with_the_nbgrader_cli(exercise, cycle):
    course = cycle.course
    students = _students(exercise)
    assert len(cycle.released[exercise]) == len(students), (
        "release_feedback puts every student's feedback out"
    )

    auto = cycle.auto[exercise]
    assert set(auto) == set(students), "everyone was graded, for this exercise only"
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

    raw = {
        row["student_id"]: float(row["raw_score"])
        for row in cycle.rows
        if row["assignment"] == exercise
    }
    assert raw["alice"] == 9.5

    # the forced regrade of alice (Cycle.run): graded again, the same auto scores, her hand
    # grade kept, nobody else regraded
    autograded = cycle.autograded(exercise)
    assert autograded.stat().st_mtime_ns != cycle.first_grading[exercise], "alice was graded again"
    assert scores(course / "gradebook.db", exercise) == auto, "re-autograde is identical"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        answer = next(
            g
            for g in gradebook.find_submission_notebook(exercise, exercise, "alice").grades
            if g.name.startswith("answer")
        )
        assert answer.manual_score == 1.5, "a re-autograde keeps manual grades"
