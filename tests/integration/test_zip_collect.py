"""`nbgrader zip_collect` of Canvas, Moodle and Blackboard downloads, with no pattern to write."""

from __future__ import annotations

import csv
import json
import zipfile

import pytest

from tests.support.nbgrader_helpers import attn_grade, nbgrader, submission_text
from tests.support.pages import ENGLISH_CHROME, page_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EX1 = "ex1_numpy_attention"
NOTEBOOK = f"{EX1}.ipynb"
# Archive member names as each LMS writes them -> the nbgrader student id they must give.
LAYOUTS = {
    "canvas": {
        f"doejane_12345_6789012_{NOTEBOOK}": "12345",
        f"roebob_LATE_23456_7890123_{EX1}-1.ipynb": "23456",
    },
    "moodle": {
        f"Jane Doe_123456_assignsubmission_file_/{NOTEBOOK}": "123456",
        f"Bob Roe_234567_assignsubmission_file_/{EX1} (1).ipynb": "234567",
    },
    "blackboard": {
        f"Exercise 1_jdoe_attempt_2026-11-20-14-05-09_{NOTEBOOK}": "jdoe",
        "Exercise 1_jdoe_attempt_2026-11-20-14-05-09.txt": None,
    },
}


def test_zip_collect_reads_each_lms_layout(tmp_path):
    course = tmp_path / "course"
    built = attn_grade("build", EX1, "--course", str(course))
    assert built.returncode == 0, built.stderr
    release = (course / "release" / EX1 / NOTEBOOK).read_text()
    archive = course / "downloaded" / EX1 / "archive"
    archive.mkdir(parents=True)
    for lms, members in LAYOUTS.items():
        with zipfile.ZipFile(archive / f"{lms}.zip", "w") as bundle:
            for name in members:
                bundle.writestr(name, release if name.endswith(".ipynb") else "Name: Jane Doe")
    done = nbgrader(course, "zip_collect", EX1)
    assert "Regular expression not provided" not in done.stderr
    expected = {s for members in LAYOUTS.values() for s in members.values() if s}
    submitted = {p.parent.parent.name for p in (course / "submitted").glob(f"*/{EX1}/*.ipynb")}
    assert submitted == expected
    for student in expected:
        assert (course / "submitted" / student / EX1 / NOTEBOOK).read_text() == release
    stamp = (course / "submitted" / "jdoe" / EX1 / "timestamp.txt").read_text()
    assert stamp.startswith("2026-11-20 14:05:09")


DUE = "2026-11-20 12:00:00"
# member name -> (the time the LMS wrote for it, or None: the zip format's "no time"),
# the student id and the submission time that must be recorded (issue 21: every LMS download
# gets a time, so late penalties apply and release_feedback finds it)
TERM = {
    "canvas": {
        f"doejane_12345_6789012_{NOTEBOOK}": ((2026, 11, 20, 11, 0, 0), "12345",
                                             "2026-11-20 11:00:00"),
        f"roebob_LATE_23456_7890123_{NOTEBOOK}": ((2026, 11, 21, 9, 30, 0), "23456",
                                                 "2026-11-21 09:30:00"),
        # Canvas says late (its own due date for this student), its time says otherwise
        f"leejoe_LATE_34567_8901234_{NOTEBOOK}": ((2026, 11, 20, 10, 0, 0), "34567",
                                                 "2026-11-20 12:00:01"),
        # Canvas says on time (an extension given in Canvas), its time is after our due date
        f"kimann_45678_9012345_{NOTEBOOK}": ((2026, 11, 22, 8, 0, 0), "45678",
                                           "2026-11-20 12:00:00"),
    },
    "moodle": {
        f"Jane Doe_123456_assignsubmission_file_/{NOTEBOOK}": ((2026, 11, 20, 8, 15, 0), "123456",
                                                               "2026-11-20 08:15:00"),
        # no time in the download: the instructor's submission_times.csv gives it
        f"Bob Roe_234567_assignsubmission_file_/{NOTEBOOK}": (None, "234567",
                                                              "2026-11-19 23:00:00"),
    },
}  # fmt: skip
LATE = {"23456", "34567"}


def resubmitted(solved: str) -> str:
    """The same notebook with a new written answer."""
    notebook = json.loads(solved)
    answer = next(
        c
        for c in notebook["cells"]
        if c["cell_type"] == "markdown" and c["metadata"].get("nbgrader", {}).get("solution")
    )
    answer["source"] = "새 답안: $\\sqrt{d_k}$로 나누면 분산이 1이 됩니다."
    return json.dumps(notebook)


def test_an_lms_term_records_times_applies_late_penalties_and_releases_feedback(tmp_path):
    """The term of issue 21, in Korean: build, release, a Canvas download with late work and a
    Moodle download, zip_collect, autograde, a hand grade, a resubmission, feedback (no English
    chrome, no raw `$`, the changed answer under review), feedback and grades for the LMS."""
    from nbgrader.api import Gradebook

    course, exchange = tmp_path / "course", tmp_path / "exchange"
    exchange.mkdir(mode=0o777)
    built = attn_grade(
        "build", EX1, "--lang", "ko", "--course", str(course), "--exchange", str(exchange)
    )
    assert built.returncode == 0, built.stderr
    with (course / "nbgrader_config.py").open("a") as config:
        config.write('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    nbgrader(course, "db", "assignment", "add", EX1, f"--duedate={DUE} UTC")
    nbgrader(course, "release_assignment", EX1)
    solved = submission_text(course / "release" / EX1 / NOTEBOOK, EX1, "alice")
    download = course / "downloaded" / EX1
    (download / "archive").mkdir(parents=True)
    for lms, members in TERM.items():
        with zipfile.ZipFile(download / "archive" / f"{lms}.zip", "w") as bundle:
            for name, (when, _, _) in members.items():
                bundle.writestr(zipfile.ZipInfo(name, when or (1980, 1, 1, 0, 0, 0)), solved)
    (download / "submission_times.csv").write_text(
        "student_id,timestamp\n234567,2026-11-19 23:00:00\n<bad>,yesterday\n"
    )

    done = nbgrader(course, "zip_collect", EX1)
    assert "<bad>" in done.stderr, "a row that is not an id and a time is named"
    for members in TERM.values():
        for _, student, recorded in members.values():
            stamp = (course / "submitted" / student / EX1 / "timestamp.txt").read_text()
            assert stamp.startswith(recorded), (student, stamp)

    nbgrader(course, "autograde", EX1)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for submission in gradebook.assignment_submissions(EX1):
            late = submission.student.id in LATE
            assert (submission.total_seconds_late > 0) == late, submission.student.id
            assert submission.code_score == 8
            assert submission.late_submission_penalty == (8 if late else 0)
        jane = gradebook.find_submission_notebook(EX1, EX1, "123456")
        answer = next(g for g in jane.grades if g.cell_type == "markdown")
        answer.manual_score, answer.needs_manual_grade = 1.5, False  # as formgrader does
        comment = next(c for c in jane.comments if c.name == answer.name)
        comment.manual_comment = "좋아요. 그런데 **왜** $\\sqrt{d_k}$인가요?"
        gradebook.db.commit()

    # a second Moodle download: Jane Doe changed her written answer after it was graded
    (download / "archive" / "canvas.zip").unlink()
    name = next(n for n in TERM["moodle"] if n.startswith("Jane Doe"))
    with zipfile.ZipFile(download / "archive" / "moodle.zip", "w") as bundle:
        bundle.writestr(zipfile.ZipInfo(name, (2026, 11, 20, 9, 0, 0)), resubmitted(solved))
    nbgrader(course, "zip_collect", "--force", EX1)
    nbgrader(course, "autograde", EX1, "--student", "123456", "--force")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        jane = gradebook.find_submission_notebook(EX1, EX1, "123456")
        answer = next(g for g in jane.grades if g.cell_type == "markdown")
        assert answer.needs_manual_grade and answer.manual_score == 1.5
    nbgrader(course, "export", "--to", "grades.csv")
    names = {
        row["student_id"]: (row["first_name"], row["last_name"])
        for row in csv.DictReader((course / "grades.csv").open())
    }
    assert names["123456"] == ("Jane", "Doe") and names["234567"] == ("Bob", "Roe"), names
    nbgrader(course, "generate_feedback", EX1)
    page = course / "feedback" / "123456" / EX1 / f"{EX1}.html"
    assert '<html lang="ko">' in page.read_text()
    text = page_text(page, code=False)
    assert [word for word in ENGLISH_CHROME if word in text] == [], "Korean chrome only"
    assert "$" not in text and "**" not in text, "math and markdown rendered, comment included"
    assert "재검토 중" in text and "새 답안" in text, "the changed answer is under review"
    done = nbgrader(course, "release_feedback", EX1)
    students = [student for members in TERM.values() for _, student, _ in members.values()]
    assert all(student in done.stderr for student in students), "each is named, none lost"
    assert "feedback-zip" in done.stderr, "and the warning says how their feedback goes back"

    for lms, members in TERM.items():
        made = attn_grade("feedback-zip", "ex1", "--lms", lms, "--course", str(course))
        assert made.returncode == 0, made.stderr
        with zipfile.ZipFile(course / f"feedback_{EX1}_{lms}.zip") as bundle:
            names = set(bundle.namelist())
        # named as the download named each student's file (the LMS matches on that prefix)
        assert names == {
            name.rsplit(NOTEBOOK, 1)[0] + f"{EX1}_feedback.html" for name in members
        }, names
        assert "not in the" in made.stdout, "the other LMS's students are listed, not guessed"

    # the LMS gradebooks' import files, in each one's published column layout
    made = attn_grade("lms-grades", "ex1", "--lms", "canvas", "--course", str(course))
    assert made.returncode == 0, made.stderr
    canvas = list(csv.reader((course / f"grades_{EX1}_canvas.csv").open()))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", EX1]
    assert {row[1]: row[5] for row in canvas[1:]} == {
        student: "0" if student in LATE else "8" for _, student, _ in TERM["canvas"].values()
    }, "late penalty applied; rows keyed by the Canvas user id"
    assert {row[0] for row in canvas[1:]} == {"doejane", "roebob", "leejoe", "kimann"}
    made = attn_grade("lms-grades", "ex1", "--lms", "moodle", "--course", str(course))
    assert made.returncode == 0, made.stderr
    moodle = list(csv.DictReader((course / f"grades_{EX1}_moodle.csv").open()))
    assert list(moodle[0]) == [
        "Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
        "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
        "Feedback comments",
    ]  # fmt: skip
    assert {(r["Identifier"], r["Full name"], r["Grade"], r["Maximum Grade"]) for r in moodle} == {
        ("Participant 123456", "Jane Doe", "9.5", "10"),
        ("Participant 234567", "Bob Roe", "8", "10"),
    }
