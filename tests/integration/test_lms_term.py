"""A Korean term through Canvas and Moodle, as its instructor lives it (issue 21, and "A Korean
course through Canvas and Moodle": F1-F7), with the real commands of docs/instructors.md, in one
test.

An LMS-only course (the exchange named, never made by hand), the exercise in Korean, a late
penalty of "zero", a Canvas download (a Hangul login, an empty login, `_LATE_` files, an
extension given in Canvas) and a Moodle download (an apostrophe, a comma and an accent in the
names, a time from submission_times.csv), autograde, hand grades given in formgrader's way, a
written answer left ungraded, a resubmission by a second download; then what goes back: the
feedback pages, `nbgrader export`, the LMS's gradebook files, the feedback zip, the report.
"""

from __future__ import annotations

import csv
import html
import json
import re
import stat
import zipfile
from pathlib import Path

import pytest

from autograder.nbgrader_plugins.report_cell import REPORT_CELL_ID
from tests.support.english import english_sentences
from tests.support.nbgrader_helpers import attn_grade, nbgrader, submission_text
from tests.support.pages import ENGLISH_CHROME, page_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EX1 = "ex1_numpy_attention"
NOTEBOOK = f"{EX1}.ipynb"
DUE = "2026-11-20 12:00:00"
# member name -> (the time the LMS wrote for it, or None: the zip format's "no time"), the
# student id, the submission time that must be recorded, who wrote it (demo.py: alice is right,
# bob makes the exercise's demo mistake)
TERM = {
    "canvas": {
        f"김민준_10001_5550001_{NOTEBOOK}": ((2026, 11, 20, 11, 0, 0), "10001",
                                           "2026-11-20 11:00:00", "alice"),
        # Canvas kept nothing of a Hangul-only name: an empty login (F1)
        f"_10004_5550004_{NOTEBOOK}": ((2026, 11, 20, 10, 0, 0), "10004", "2026-11-20 10:00:00",
                                       "bob"),
        f"roebob_LATE_23456_7890123_{NOTEBOOK}": ((2026, 11, 21, 9, 30, 0), "23456",
                                                 "2026-11-21 09:30:00", "alice"),
        # Canvas says late (its own due date for this student), its time says otherwise
        f"leejoe_LATE_34567_8901234_{NOTEBOOK}": ((2026, 11, 20, 10, 0, 0), "34567",
                                                 "2026-11-20 12:00:01", "alice"),
        # Canvas says on time (an extension given in Canvas), its time is after our due date
        f"kimann_45678_9012345_{NOTEBOOK}": ((2026, 11, 22, 8, 0, 0), "45678",
                                           "2026-11-20 12:00:00", "alice"),
    },
    "moodle": {
        f"Jane Doe_123456_assignsubmission_file_/{NOTEBOOK}": ((2026, 11, 20, 8, 15, 0),
                                                               "123456", "2026-11-20 08:15:00",
                                                               "alice"),
        # no time in the download: the instructor's submission_times.csv gives it
        f"Bob Roe_234567_assignsubmission_file_/{NOTEBOOK}": (None, "234567",
                                                              "2026-11-19 23:00:00", "alice"),
        f"Siobhan O'Brien_20002_assignsubmission_file_/{NOTEBOOK}": ((2026, 11, 21, 14, 0, 0),
                                                                     "20002",
                                                                     "2026-11-21 14:00:00",
                                                                     "bob"),
        f"Luis García, Jr._20003_assignsubmission_file_/{NOTEBOOK}": ((2026, 11, 20, 9, 0, 0),
                                                                      "20003",
                                                                      "2026-11-20 09:00:00",
                                                                      "alice"),
    },
}  # fmt: skip
LATE = {"23456", "34567", "20002"}
# the hand grade of each written answer; 10004's is never given until the end (F3)
HAND = {"10001": 2, "23456": 1.5, "34567": 2, "45678": 1, "123456": 1.5, "234567": 2,
        "20002": 1, "20003": 2}  # fmt: skip
COLUMN = "연습 1: 어텐션 직접 구현 (123456)"  # Canvas's "Name (id)" of the assignment


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


def tidy_code(course: Path, student: str) -> None:
    """The student's submitted notebook with a comment added to their code (their written
    answer as it was graded): a hand-in again, to be regraded."""
    path = course / "submitted" / student / EX1 / NOTEBOOK
    notebook = json.loads(path.read_text())
    code = next(
        c
        for c in notebook["cells"]
        if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")
    )
    source = code["source"]
    code["source"] = ("".join(source) if isinstance(source, list) else source) + "\n# 정리함\n"
    path.write_text(json.dumps(notebook))


def grade_by_hand(course: Path, scores: dict[str, float], comment: str | None = None) -> None:
    """What formgrader does when the instructor grades the written answer."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, points in scores.items():
            notebook = gradebook.find_submission_notebook(EX1, EX1, student)
            answer = next(g for g in notebook.grades if g.cell_type == "markdown")
            answer.manual_score, answer.needs_manual_grade = points, False
            if comment is not None:
                next(c for c in notebook.comments if c.name == answer.name).manual_comment = comment
        gradebook.db.commit()


def code_scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s.student.id: s.code_score for s in gradebook.assignment_submissions(EX1)}


def lms_file(course: Path, lms: str) -> list[list[str]]:
    path = course / f"grades_{EX1}_{lms}.csv"
    assert path.read_bytes().startswith(b"\xef\xbb\xbf"), "a UTF-8 byte order mark (F5)"
    return list(csv.reader(path.open(encoding="utf-8-sig")))


def test_a_korean_term_through_canvas_and_moodle(tmp_path):
    from nbgrader.api import Gradebook

    course, exchange = tmp_path / "course", tmp_path / "srv" / "exchange"
    built = attn_grade(
        "build", EX1, "--lang", "ko", "--course", str(course), "--exchange", str(exchange)
    )
    assert built.returncode == 0, built.stderr
    assert stat.S_IMODE(exchange.stat().st_mode) == 0o1777, "the exchange is made (F4)"
    with (course / "nbgrader_config.py").open("a") as config:
        config.write('c.LateSubmissionPlugin.penalty_method = "zero"\n')
    nbgrader(course, "db", "assignment", "add", EX1, f"--duedate={DUE} UTC")
    release = course / "release" / EX1 / NOTEBOOK
    work = {who: submission_text(release, EX1, who) for who in ("alice", "bob")}
    download = course / "downloaded" / EX1
    (download / "archive").mkdir(parents=True)
    for lms, members in TERM.items():
        with zipfile.ZipFile(download / "archive" / f"{lms}.zip", "w") as bundle:
            for name, (when, _, _, who) in members.items():
                bundle.writestr(zipfile.ZipInfo(name, when or (1980, 1, 1, 0, 0, 0)), work[who])
    (download / "submission_times.csv").write_text(
        "student_id,timestamp\n234567,2026-11-19 23:00:00\n<bad>,yesterday\n"
    )

    done = nbgrader(course, "zip_collect", EX1)
    assert "<bad>" in done.stderr, "a row that is not an id and a time is named"
    assert "not recorded" not in done.stderr and "not kept" not in done.stderr, (
        "O'Brien's name is kept, and nothing says otherwise (F7)"
    )
    for members in TERM.values():
        for _, student, recorded, _ in members.values():
            stamp = (course / "submitted" / student / EX1 / "timestamp.txt").read_text()
            assert stamp.startswith(recorded), (student, stamp)

    graded = attn_grade("autograde", EX1, "--course", str(course))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    auto = code_scores(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for submission in gradebook.assignment_submissions(EX1):
            late = submission.student.id in LATE
            assert (submission.total_seconds_late > 0) == late, submission.student.id
        names = {s.id: (s.first_name, s.last_name) for s in gradebook.students}
    assert names["20002"] == ("Siobhan", "O'Brien"), "recorded, apostrophe and all (F7)"
    assert names["20003"] == ("Luis", "García, Jr."), "the suffix stays with the last name (F7)"
    assert names["123456"] == ("Jane", "Doe")
    grade_by_hand(course, HAND, comment="좋아요. 그런데 **왜** $\\sqrt{d_k}$인가요?")

    # 10004's answer is not graded yet: nothing is exported as final (F3)
    canvas = ["lms-grades", "ex1", "--lms", "canvas", "--course", str(course)]
    refused = attn_grade(*canvas)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "10004" in refused.stderr and "not graded by hand yet" in refused.stderr
    assert not (course / f"grades_{EX1}_canvas.csv").exists(), "nothing written"
    partial = attn_grade(*canvas, "--partial", "--column", COLUMN)
    assert partial.returncode == 0, partial.stderr
    assert "10004" in partial.stdout, "the student left out is named"
    assert "Canvas matches the assignment with id 123456" in partial.stdout
    table = lms_file(course, "canvas")
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", COLUMN], "F6"
    final = {
        student: 0.0 if student in LATE else auto[student] + HAND[student]
        for _, student, _, _ in TERM["canvas"].values()
        if student != "10004"
    }
    assert {row[1]: float(row[5]) for row in table[1:]} == final, (
        "late under 'zero': 0, the hand-graded points too (F2); no row for 10004"
    )
    assert {row[0] for row in table[1:]} == {"김민준", "roebob", "leejoe", "kimann"}

    grade_by_hand(course, {"10004": 0.5})
    done = attn_grade(*canvas)
    assert done.returncode == 0, done.stderr
    table = lms_file(course, "canvas")
    assert float(next(r[5] for r in table if r[1] == "10004")) == auto["10004"] + 0.5

    # a second Moodle download: Jane Doe changed her written answer after it was graded
    (download / "archive" / "canvas.zip").unlink()
    name = next(n for n in TERM["moodle"] if n.startswith("Jane Doe"))
    with zipfile.ZipFile(download / "archive" / "moodle.zip", "w") as bundle:
        bundle.writestr(zipfile.ZipInfo(name, (2026, 11, 20, 9, 0, 0)), resubmitted(work["alice"]))
    nbgrader(course, "zip_collect", "--force", EX1)
    moodle = ["lms-grades", "ex1", "--lms", "moodle", "--course", str(course), "--out-of", "100"]
    stale = attn_grade(*moodle)
    assert stale.returncode == 1 and "123456" in stale.stderr, stale.stderr
    assert "handed in again" in stale.stderr, "her new notebook is not autograded yet (F3)"
    graded = attn_grade("autograde", EX1, "--course", str(course))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    review = attn_grade(*moodle)
    assert review.returncode == 1 and "123456" in review.stderr, review.stderr
    assert "under review" in review.stderr, "her hand grade waits for a new look (F3)"
    # García tidies his code; his written answer is the one graded: his regrade keeps the hand
    # grade final, and the course's item analysis keeps every student (issue 38, item 5; F8)
    tidy_code(course, "20003")
    regraded = attn_grade("autograde", EX1, "--course", str(course), "--student", "20003")
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    review = attn_grade(*moodle)
    assert "20003" not in review.stderr, "his hand grade is not under review"
    items = list(csv.DictReader((course / "item_analysis.csv").open()))
    assert {row["graded"] for row in items} == {"9"}, "all nine submissions, not his alone"

    nbgrader(course, "generate_feedback", EX1)
    page = course / "feedback" / "123456" / EX1 / f"{EX1}.html"
    assert '<html lang="ko">' in page.read_text()
    text = page_text(page, code=False)
    assert [word for word in ENGLISH_CHROME if word in text] == [], "Korean chrome only"
    assert "$" not in text and "**" not in text, "math and markdown rendered, comment included"
    assert "재검토 중" in text and "새 답안" in text, "the changed answer is under review"
    assert f"(점수: {auto['123456']:.1f} / 10.0; 서술형 답안은 재검토 중이라" in text, (
        "the total leaves out the hand grade under review, and says so"
    )
    assert "채점 후 바뀌어(이전 점수 1.5 / 2점)" in text, "the report's sentence says it too"
    garcia = page_text(course / "feedback" / "20003" / EX1 / f"{EX1}.html", code=False)
    assert "재검토" not in garcia and "바뀌었습니다" not in garcia, "only his code changed"
    assert "서술형 답안은 담당 교수자가 채점했습니다: 2 / 2점." in garcia
    assert "채점합니다" not in garcia, "his answer is graded already"
    for student in ("123456", "10001", "23456"):
        grader_text = graders_words(course / "autograded" / student / EX1 / f"{EX1}.ipynb")
        assert grader_text and english_sentences(" ".join(grader_text)) == [], grader_text
    late_page = page_text(course / "feedback" / "23456" / EX1 / f"{EX1}.html", code=False)
    raw = auto["23456"] + HAND["23456"]
    assert f"-{raw}" in late_page and f"0.0 / {10.0}" in late_page, (
        "the late page takes the hand grade too (F2)"
    )

    grade_by_hand(course, {"123456": 2})
    done = attn_grade(*moodle)
    assert done.returncode == 0, done.stderr
    table = lms_file(course, "moodle")
    rows = {r[0]: (r[1], r[4], r[5]) for r in table[1:]}
    expected = {
        f"Participant {student}": (
            folder.split("_", 1)[0],
            "0" if student in LATE else f"{(auto[student] + HAND[student]) * 10:g}",
            "100",
        )
        for folder, (_, student, _, _) in TERM["moodle"].items()
    }
    expected["Participant 123456"] = ("Jane Doe", f"{(auto['123456'] + 2) * 10:g}", "100")
    assert rows == expected, "scaled to Moodle's maximum (F6); names as the download wrote them"

    nbgrader(course, "export", "--to", "grades.csv")
    exported = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    for student in LATE:
        row = exported[student]
        assert float(row["score"]) == 0.0, row
        assert float(row["late_submission_penalty"]) == float(row["raw_score"]) > 0, row

    done = nbgrader(course, "release_feedback", EX1)
    students = [student for members in TERM.values() for _, student, _, _ in members.values()]
    assert all(student in done.stderr for student in students), "each is named, none lost"
    assert "feedback-zip" in done.stderr, "and the warning says how their feedback goes back"
    for lms, members in TERM.items():
        made = attn_grade("feedback-zip", "ex1", "--lms", lms, "--course", str(course))
        assert made.returncode == 0, made.stderr
        with zipfile.ZipFile(course / f"feedback_{EX1}_{lms}.zip") as bundle:
            entries = set(bundle.namelist())
        # named as the download named each student's file (the LMS matches on that prefix)
        assert entries == {
            name.rsplit(NOTEBOOK, 1)[0] + f"{EX1}_feedback.html" for name in members
        }, entries

    made = attn_grade("report", "--course", str(course))
    assert made.returncode == 0, made.stderr
    report = page_text(course / "report.html", code=True)
    assert "6. Students: names and late submissions" in report
    for line in (
        "20003 Luis García, Jr. moodle: Luis García, Jr.",
        "20002 Siobhan O'Brien moodle: Siobhan O'Brien",
        "10001 — canvas: 김민준",
        "10004 — —",
    ):
        assert line in report, line
    assert f"{EX1} 23456 2026-11-21 09:30 UTC 2026-11-20 12:00 UTC 21 h 30 min" in report
    assert f"{raw:g} −{raw:g} 0 / 10" in report, "the late student's penalty, hand grade included"


def graders_words(path: Path) -> list[str]:
    """What the grader wrote into an autograded notebook: its report cell and the outputs of
    its check cells (the notebook's own prose and code are the template's)."""
    notebook = json.loads(path.read_text())
    found = []
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("id") == REPORT_CELL_ID:
            found.append(re.sub(r"<[^>]+>", " ", "".join(cell["source"])))
        elif cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            found += ["".join(o.get("text", "")) for o in cell.get("outputs", [])]
    return [html.unescape(text) for text in found if text.strip()]
