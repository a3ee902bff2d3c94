"""`attn-grade verify` replays the audit log; `attn-grade regrade --diff` shows score changes
and writes nothing. Two gradings (alice: the ex1 reference, bob: a catalogued mistake) make the
records every test starts from; each test copies them into a course of its own."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autograder.audit import log as audit
from autograder.authoring.catalogue import catalogue_for
from autograder.core.versions import CHECKS_VERSION
from autograder.course.build import tool_env
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX = "ex1_numpy_attention"
MISTAKE = "unstable_softmax"  # fails test_softmax_stable_for_large_logits only


def submitted(course: Path, student: str, name: str = f"{EX}.ipynb") -> Path:
    return course / "submitted" / student / EX / name


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """A course with alice's and bob's notebooks, and the audit record of each grading."""
    course = tmp_path_factory.mktemp("graded")
    mistake = catalogue_for(EX)[MISTAKE]
    records = {}
    for student, replace in (("alice", None), ("bob", {mistake.target: mistake.source})):
        path = write_notebook(source_notebook(EX, replace=replace), submitted(course, student))
        report = grade_notebook(path, exercise=EX, student=student)
        records[student] = audit.record(
            report.to_dict(), course=course, notebook=path, student=student, batch="first"
        )
    return course, records


def course_with(tmp_path: Path, graded, *records: dict, students=("alice", "bob")) -> Path:
    """A copy of the graded course holding `students`' notebooks and a log of `records`."""
    source, _ = graded
    course = tmp_path / "course"
    course.mkdir()
    for student in students:
        shutil.copytree(source / "submitted" / student, course / "submitted" / student)
    for line in records:
        audit.append(course, line)
    return course


def attn_grade(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli.app", *args],
        cwd=cwd,
        env=tool_env(),
        capture_output=True,
        text=True,
    )


def line_of(output: str, student: str) -> str:
    """The student's line, its column padding squeezed to two spaces."""
    (line,) = [line for line in output.splitlines() if line.startswith(f"{student} ")]
    return re.sub(" {2,}", "  ", line)


def snapshot(course: Path) -> dict[str, str]:
    """Every file under the course with the sha256 of its bytes."""
    return {
        str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(course.rglob("*"))
        if p.is_file()
    }


def test_records_hold_the_points_of_a_real_report(graded):
    _, records = graded
    assert records["alice"]["score"] == 8.0 and records["alice"]["status"] == "ok"
    assert records["bob"]["checks"]["test_softmax_stable_for_large_logits"] == 0.0
    assert records["bob"]["score"] == 8.0 - 1.0
    assert records["bob"]["notebook"] == f"submitted/bob/{EX}/{EX}.ipynb"


def test_a_log_of_the_reference_and_a_mistake_reproduces(graded, tmp_path):
    _, records = graded
    course = course_with(tmp_path, graded, records["alice"], records["bob"])
    carol = submitted(course, "carol")  # not JSON: the batch records it without any check
    carol.parent.mkdir(parents=True)
    carol.write_text("not a notebook")
    unreadable = {"exercise": EX, "seed": None, "status": "invalid_notebook", "checks": []}
    audit.append(
        course, audit.record(unreadable, course=course, notebook=carol, student="carol", batch="b")
    )
    done = attn_grade("verify", "--course", str(course), "ex1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert line_of(done.stdout, "alice") == f"alice  {EX}  same"
    assert line_of(done.stdout, "bob") == f"bob  {EX}  same"
    assert line_of(done.stdout, "carol").startswith(f"carol  {EX}  same")
    assert "verified 3 record(s): 3 same, 0 different" in done.stdout
    assert "warning" not in done.stderr


def missing(record: dict, student: str) -> dict:
    """A record of a notebook that is not in the course."""
    return {**record, "student": student, "notebook": f"submitted/{student}/{EX}/{EX}.ipynb"}


def test_a_changed_grade_in_the_log_is_found_and_its_check_named(graded, tmp_path):
    _, records = graded
    forged = json.loads(json.dumps(records["bob"]))
    forged["checks"]["test_softmax_stable_for_large_logits"] = 1.0  # bob given the point
    forged["score"] = 8.0
    total_only = {**records["alice"], "score": 7.5}  # only the total edited
    lines = [total_only, records["bob"], forged, missing(records["bob"], "carol")]
    course = course_with(tmp_path, graded, *lines)
    with open(audit.log_path(course), "ab") as handle:
        handle.write(b'{"exercise": "ex1_numpy_attention", "stud')  # a kill mid-write
    done = attn_grade("verify", "--course", str(course), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert line_of(done.stdout, "bob") == (
        f"bob  {EX}  DIFFERENT: test_softmax_stable_for_large_logits 1 -> 0; score 8 -> 7"
    )
    assert line_of(done.stdout, "alice") == f"alice  {EX}  DIFFERENT: score 7.5 -> 8"
    assert line_of(done.stdout, "carol") == (
        f"carol  {EX}  DIFFERENT: notebook missing (submitted/carol/{EX}/{EX}.ipynb)"
    )
    assert "verified 3 record(s): 0 same, 3 different" in done.stdout
    assert "1 line(s) of audit.jsonl are not whole records" in done.stderr


def test_a_changed_notebook_is_reported_without_regrading(graded, tmp_path):
    _, records = graded
    later = {**records["alice"], "batch": "second", "checks_version": "2"}  # older checks
    lines = [records["alice"], later, missing(records["alice"], "carol")]
    course = course_with(tmp_path, graded, *lines, students=["alice"])
    notebook = with_student_cells(source_notebook(EX), "x = 1")
    write_notebook(notebook, submitted(course, "alice"))  # edited after it was graded
    done = attn_grade(
        "verify", "--course", str(course), "--all", "--student", "alice", cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    first, second = done.stdout.splitlines()[:2]  # --all: both records of alice, only hers
    changed = (
        f"alice  {EX}  {records['alice']['recorded_at']}  DIFFERENT: notebook changed (sha256 "
        f"{records['alice']['notebook_sha256'][:12]} "
        f"-> {audit.sha256_file(submitted(course, 'alice'))[:12]})"
    )
    assert first == changed
    assert second == f"{changed} (since the record: checks_version 2 -> {CHECKS_VERSION}; " + (
        "this may explain it)"
    )
    assert "verified 2 record(s): 0 same, 2 different" in done.stdout
    assert "carol" not in done.stdout


def test_usage_errors_exit_2(graded, tmp_path):
    _, records = graded
    no_log = attn_grade("verify", "--course", str(tmp_path), cwd=tmp_path)
    assert no_log.returncode == 2 and "no audit log" in no_log.stderr
    course = course_with(tmp_path, graded, records["alice"], students=[])
    unknown = attn_grade("verify", "--course", str(course), "ex9", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown exercise 'ex9'" in unknown.stderr
    nobody = attn_grade("verify", "--course", str(course), "--student", "zed", cwd=tmp_path)
    assert nobody.returncode == 2 and "no audit record matches" in nobody.stderr
    plain = attn_grade("regrade", "--course", str(course), cwd=tmp_path)
    assert plain.returncode == 2 and "`attn-grade autograde`" in plain.stderr


def gradebook_with(course: Path, student: str, auto: float) -> None:
    """An nbgrader gradebook in which `student` has `auto` points on the code cells (and a
    hand grade on the written answer, which is not an auto score)."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning, module="nbgrader")  # as course_api
    (course / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.course_id = "verify-test"\n'
    )
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="verify-test") as book:
        book.add_assignment(EX)
        book.add_notebook(EX, EX)
        book.add_grade_cell("checks", EX, EX, max_score=8, cell_type="code")
        book.add_grade_cell("answer", EX, EX, max_score=2, cell_type="markdown")
        book.add_student(student)
        book.add_submission(EX, student)
        book.find_grade("checks", EX, EX, student).auto_score = auto
        book.find_grade("answer", EX, EX, student).manual_score = 2.0
        book.db.commit()


def test_regrade_diff_shows_each_change_and_writes_nothing(graded, tmp_path):
    _, records = graded
    source, _ = graded
    older = json.loads(json.dumps(records["alice"]))  # as if a check paid less before
    older["checks"]["test_softmax_stable_for_large_logits"] = 0.0
    older["score"] = 7.0
    course = course_with(tmp_path, graded, older, students=["alice"])
    bob = source / "submitted" / "bob" / EX / f"{EX}.ipynb"
    dave = submitted(course, "dave", f"{EX} (1).ipynb")  # misnamed: graded, never copied
    dave.parent.mkdir(parents=True)
    shutil.copyfile(bob, dave)
    erin = submitted(course, "erin")
    erin.parent.mkdir(parents=True)
    shutil.copyfile(bob, erin)
    gradebook_with(course, "dave", 5.0)
    before = snapshot(course)

    done = attn_grade("regrade", "--diff", "--course", str(course), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert line_of(done.stdout, "alice") == (
        f"alice  {EX}  7 -> 8 (+1)  test_softmax_stable_for_large_logits 0 -> 1"
    )
    assert line_of(done.stdout, "dave").startswith(f"dave  {EX}  5 -> 7 (+2)  was the gradebook")
    assert line_of(done.stdout, "erin") == f"erin  {EX}  new -> 7"
    assert "3 submission(s): 2 up, 0 down, 0 unchanged, 1 new" in done.stdout
    assert "grading 3 submission(s) with the current checks" in done.stderr, "never silent"
    assert "3/3 graded" in done.stderr
    assert "nothing was written; `attn-grade autograde`" in done.stdout
    assert snapshot(course) == before  # no audit line, no gradebook change, no copied notebook
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course"]  # nor anything beside it
