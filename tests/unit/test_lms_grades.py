"""Grades as the LMS files and the report read them ("A Korean course through Canvas and
Moodle", F2, F3, F5, F6, F7), on a real nbgrader gradebook without running a notebook:

- the late penalty is the course's plugin applied to the final score, hand grades included,
  however late the hand grade came (F2: "zero" exported 0.5 = auto 4 + hand 0.5 - 4);
- a grade is final only when nothing waits (F3: an ungraded answer, a hand grade under review,
  a notebook handed in after its autograde were exported as final);
- the LMS files: a UTF-8 byte order mark, Canvas's "Name (id)" column, Moodle's maximum (F5,
  F6); display names kept and split as people write them (F7).
"""

from __future__ import annotations

import csv
import datetime
import os
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import LateSubmissionPlugin
from traitlets.config import Config

from autograder.course.build import tool_env
from autograder.course.grades import exercise_grades, unfinished
from autograder.nbgrader_plugins.intake import SafeCsvExport
from autograder.nbgrader_plugins.late_penalty import settle_late_penalties
from autograder.nbgrader_plugins.lms_return import canvas_column, lms_gradebook
from autograder.nbgrader_plugins.names import full_name, recordable, split_name
from tests.support.nbgrader_helpers import attn_grade

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own
EX = "ex1_numpy_attention"
DUE = datetime.datetime(2026, 11, 20, 12, 0, 0)
LATE = DUE + datetime.timedelta(days=1)  # one day late
ON_TIME = DUE - datetime.timedelta(hours=1)


class HalfPerDay(LateSubmissionPlugin):
    """A course's own rule: half the score per day late."""

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        return score * 0.5 * total_seconds_late / 86_400


class Everything(LateSubmissionPlugin):
    """A rule that asks more than there is (nbgrader bounds it to the score)."""

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        return 1000.0


def config(method: str = "zero", plugin: type | None = None) -> Config:
    c = Config()
    c.LateSubmissionPlugin.penalty_method = method
    if plugin is not None:
        c.AssignLatePenalties.plugin_class = plugin
    return c


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """A gradebook with ex1's shape: 8 auto points in one code cell, a written answer of 2."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    os.environ["PATH"] = tool_env()["PATH"]  # nbgrader runs alembic when it creates one
    with Gradebook(f"sqlite:///{path}") as gradebook:
        gradebook.add_assignment(EX, duedate=DUE)
        gradebook.add_notebook(EX, EX)
        gradebook.add_grade_cell("checks", EX, EX, max_score=8, cell_type="code")
        gradebook.add_grade_cell("answer", EX, EX, max_score=2, cell_type="markdown")
        gradebook.add_solution_cell("answer", EX, EX)
    return path


@pytest.fixture
def db(empty_gradebook, tmp_path) -> str:
    copy = tmp_path / "gradebook.db"
    shutil.copy(empty_gradebook, copy)
    return f"sqlite:///{copy}"


def hand_in(
    db: str,
    student: str,
    when: datetime.datetime,
    auto: float,
    hand: float | None,
    *,
    review: bool = False,
    extension_hours: float = 0,
) -> None:
    """A submission as autograde left it (its penalty from the auto score alone, as nbgrader's
    AssignLatePenalties computed it under "zero"), then the hand grade as formgrader gives it."""
    with Gradebook(db) as gradebook:
        gradebook.add_student(student)
        submission = gradebook.add_submission(EX, student, timestamp=when)
        if extension_hours:
            submission.extension = datetime.timedelta(hours=extension_hours)
        notebook = gradebook.find_submission_notebook(EX, EX, student)
        for grade in notebook.grades:
            if grade.name == "checks":
                grade.auto_score, grade.needs_manual_grade = auto, False
            else:
                grade.auto_score, grade.needs_manual_grade = 0.0, hand is None or review
                grade.manual_score = hand
        gradebook.db.commit()
        notebook.late_submission_penalty = auto if when > DUE else None
        gradebook.db.commit()


# (penalty rule, handed in, auto, hand, extension in hours) -> (penalty, score)
CASES = {
    "zero: the hand grade goes too": (config(), LATE, 4, 0.5, 0, 4.5, 0.0),
    "zero: answer not graded yet": (config(), LATE, 4, None, 0, 4.0, 0.0),
    "zero: full marks by hand": (config(), LATE, 0, 2, 0, 2.0, 0.0),
    "zero: on time": (config(), ON_TIME, 8, 2, 0, 0.0, 10.0),
    "zero: an extension covers it": (config(), LATE, 8, 1.5, 25, 0.0, 9.5),
    "none": (config("none"), LATE, 4, 0.5, 0, 0.0, 4.5),
    "the course's own rule": (config(plugin=HalfPerDay), LATE, 4, 2, 0, 3.0, 3.0),
    "a rule asking too much is bounded": (config(plugin=Everything), LATE, 6, 1, 0, 7.0, 0.0),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_late_penalty_is_that_of_the_final_score(db, case):
    rule, when, auto, hand, extension, penalty, score = CASES[case]
    hand_in(db, "s1", when, auto, hand, extension_hours=extension)
    with Gradebook(db) as gradebook:
        grade = exercise_grades(gradebook, rule, EX)["s1"]
        assert (grade.penalty, grade.score) == (penalty, score)
        # stored, so that nbgrader's own readers (GetGrades for the feedback) agree
        stored = gradebook.find_submission_notebook(EX, EX, "s1").late_submission_penalty
        assert (stored or 0.0) == penalty


def test_a_hand_grade_changed_later_moves_the_penalty(db):
    hand_in(db, "s1", LATE, 4, 2)
    rule = config(plugin=HalfPerDay)
    with Gradebook(db) as gradebook:
        assert exercise_grades(gradebook, rule, EX)["s1"].penalty == 3.0
        answer = gradebook.find_grade("answer", EX, EX, "s1")
        answer.manual_score = 0.0
        gradebook.db.commit()
        assert exercise_grades(gradebook, rule, EX)["s1"].penalty == 2.0
        assert settle_late_penalties(gradebook, rule, EX) == 0, "settled: nothing to change"


def test_nbgrader_export_applies_it(db, tmp_path):
    hand_in(db, "late", LATE, 4, 0.5)
    hand_in(db, "early", ON_TIME, 8, 1.5)
    export = SafeCsvExport(config=config())
    export.to = str(tmp_path / "grades.csv")
    with Gradebook(db) as gradebook:
        export.export(gradebook)
    rows = {r["student_id"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert (rows["late"]["raw_score"], rows["late"]["late_submission_penalty"]) == ("4.5", "4.5")
    assert rows["late"]["score"] == "0.0"
    assert rows["early"]["score"] == "9.5"


def submitted(root: Path, student: str, when: datetime.datetime | None, name: str = EX) -> None:
    folder = root / "submitted" / student / EX
    folder.mkdir(parents=True)
    (folder / f"{name}.ipynb").write_text("{}")
    if when is not None:
        (folder / "timestamp.txt").write_text(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC")


def test_what_waits_before_a_grade_is_final(db, tmp_path):
    hand_in(db, "done", ON_TIME, 8, 2)
    hand_in(db, "ungraded", ON_TIME, 8, None)
    hand_in(db, "review", ON_TIME, 8, 1.5, review=True)
    hand_in(db, "again", ON_TIME, 8, 2)
    for student in ("done", "ungraded", "review"):
        submitted(tmp_path, student, ON_TIME)
    submitted(tmp_path, "again", ON_TIME + datetime.timedelta(minutes=5))  # a new download
    submitted(tmp_path, "new", ON_TIME)  # collected, never autograded
    submitted(tmp_path, "misnamed", ON_TIME, name=f"{EX} (1)")  # autograde grades it too
    (tmp_path / "submitted" / "pdf" / EX).mkdir(parents=True)  # a PDF only: nothing to grade
    (tmp_path / "submitted" / "pdf" / EX / "answers.pdf").write_text("%PDF")
    everyone = ["done", "ungraded", "review", "again", "new", "misnamed", "pdf", "absent"]
    with Gradebook(db) as gradebook:
        waiting = unfinished(gradebook, CourseDirectory(root=str(tmp_path)), EX, everyone)
    assert set(waiting) == {"ungraded", "review", "again", "new", "misnamed"}
    assert waiting["ungraded"] == "not graded by hand yet: answer"
    assert waiting["review"].startswith("hand grade under review") and "answer" in waiting["review"]
    assert "handed in again" in waiting["again"]
    assert "not autograded" in waiting["new"] and "not autograded" in waiting["misnamed"]


GRADES = {"10001": (9.5, "2026-11-20 11:00:00"), "10002": (0.0, "2026-11-21 09:30:00")}
NAMES = {"10001": "김민준", "10002": "obriensiobhan", "10003": "nosubmission"}


def rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open(encoding="utf-8-sig")))


def test_lms_files_open_in_a_spreadsheet_with_korean_names(tmp_path):
    for lms in ("canvas", "moodle"):
        out = tmp_path / f"{lms}.csv"
        lms_gradebook(lms, EX, NAMES, GRADES, 10.0, out)
        assert out.read_bytes().startswith(b"\xef\xbb\xbf"), "a UTF-8 byte order mark, for Excel"
        assert "김민준" in out.read_bytes()[3:].decode("utf-8")


def test_canvas_column_and_scale(tmp_path):
    out = tmp_path / "canvas.csv"
    header = "연습 1: 어텐션 직접 구현 (123456)"
    lms_gradebook("canvas", EX, NAMES, GRADES, 10.0, out, column=header, out_of=100)
    table = rows(out)
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", header]
    assert {r[1]: r[5] for r in table[1:]} == {"10001": "95", "10002": "0", "10003": ""}
    lms_gradebook("canvas", EX, NAMES, GRADES, 10.0, out)
    assert rows(out)[0][-1] == EX, "the default column: the exercise id"


@pytest.mark.parametrize(
    "header, matched",
    [
        ("연습 1: 어텐션 직접 구현 (123456)", "id 123456"),
        ("Exercise 1 (draft) (42)", "id 42"),
        (EX, "exactly this name"),
        ("연습 1", "exactly this name"),
        ("Section", None),
        ("ID", None),
        ("Final Grade Project (7)", None),  # Canvas drops a header holding "Final Grade"
        ("  ", None),
    ],
)
def test_a_canvas_column_canvas_reads_as_the_assignment(header, matched):
    if matched is None:
        with pytest.raises(ValueError):
            canvas_column(header)
    else:
        assert matched in canvas_column(header)


@pytest.mark.parametrize(
    "options, says",
    [
        (["--lms", "moodle", "--column", "연습 1 (123)"], "--column names Canvas's"),
        (["--lms", "canvas", "--out-of", "0"], "--out-of is the LMS assignment's maximum"),
        (["--lms", "moodle", "--out-of", "nan"], "--out-of is the LMS assignment's maximum"),
    ],
)
def test_options_that_cannot_be_meant(tmp_path, options, says):
    done = attn_grade("lms-grades", "ex1", *options, "--course", str(tmp_path))
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert not list(tmp_path.iterdir())


def test_moodle_maximum_and_students_left_out(tmp_path):
    out = tmp_path / "moodle.csv"
    kept = {s: n for s, n in NAMES.items() if s != "10002"}  # --partial leaves one out
    lms_gradebook("moodle", EX, kept, GRADES, 10.0, out, out_of=100)
    table = list(csv.DictReader(out.open(encoding="utf-8-sig")))
    assert [(r["Identifier"], r["Grade"], r["Maximum Grade"]) for r in table] == [
        ("Participant 10001", "95", "100"),
        ("Participant 10003", "", "100"),
    ], "no row for a student left out: Moodle keeps what it has"


NAMES_SPLIT = {
    "Jane Doe": ("Jane", "Doe"),
    "Siobhan O'Brien": ("Siobhan", "O'Brien"),
    "Siobhan O’Brien": ("Siobhan", "O’Brien"),
    "Luis García, Jr.": ("Luis", "García, Jr."),
    "Martin Luther King Jr.": ("Martin Luther", "King Jr."),
    "Henry Ford II": ("Henry", "Ford II"),
    "김 민준": ("민준", "김"),
    "김민준": ("", "김민준"),
    "山田 太郎": ("太郎", "山田"),
    "  Jane   Doe ": ("Jane", "Doe"),
}


@pytest.mark.parametrize("name", NAMES_SPLIT)
def test_names_split_as_people_write_them(name):
    first, last = split_name(name)
    assert (first, last) == NAMES_SPLIT[name]
    assert full_name(first, last) == " ".join(name.split())


@pytest.mark.parametrize(
    "name, kept",
    [
        ("Siobhan O'Brien", True),
        ("Luis García, Jr.", True),
        ("김민준", True),
        ("<script>alert(1)</script>", False),
        ('Eve "quoted"', False),
        ("=HYPERLINK(1)", False),
        ("Tab\there", False),
    ],
)
def test_names_the_gradebook_records(name, kept):
    assert recordable(name) is kept
