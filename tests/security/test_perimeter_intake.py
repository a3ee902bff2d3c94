"""Intake treats what students hand in as hostile data (issue 17, item 4): identity and time from
the LMS's own structure, ids validated, duplicates and nested archives never fatal or
multiplied, only regular files collected from the exchange, CSVs without formulas."""

from __future__ import annotations

import csv
import io
import logging
import os
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory

from autograder.course.submitted import account
from autograder.nbgrader_plugins.intake import (
    BoundedExtractor,
    SafeCsvExport,
    SafeExchangeCollect,
    csv_cell,
    valid_student_id,
)
from autograder.nbgrader_plugins.lms_files import lms_fields
from tests.support.nbgrader_helpers import attn_grade, nbgrader

EX1 = "ex1_numpy_attention"
NOTEBOOK = f"{EX1}.ipynb"
STAMP = "2026-11-20-14-05-09"

# member name -> the student it belongs to (None: refused or not a submission)
HOSTILE = {
    # a Blackboard upload named like a classmate's attempt (replaced victim's notebook, 0/8)
    f"Exercise 1_victim_attempt_{STAMP}_{NOTEBOOK}": "victim",
    f"Exercise 1_mallory_attempt_2026-11-20-15-00-00_x_victim_attempt_2099-01-01-00-00-00_"
    f"{NOTEBOOK}": "mallory",
    # a Moodle participant folder whose file imitates another participant's fields
    f"Eve Doe_333333_assignsubmission_file_/x_444444_assignsubmission_file_{NOTEBOOK}": "333333",
    # a Canvas file imitating Blackboard's attempt fields
    f"trudy_55555_1_x_victim_attempt_2099-01-01-00-00-00_{NOTEBOOK}": "55555",
    # ids that must never reach a CSV or a terminal
    f'Exercise 1_=HYPERLINK("http://x";"y")_attempt_{STAMP}_{NOTEBOOK}': None,
    f"Exercise 1_al\x1b[2Jice_attempt_{STAMP}_{NOTEBOOK}": None,
    # the same student and notebook twice with no time to choose: both refused, not fatal
    f"dup_66666_1_{NOTEBOOK}": None,
    f"dup_66666_2_{NOTEBOOK}": None,
}


def test_the_lms_fields_come_before_the_students_own_name():
    for member, student in HOSTILE.items():
        fields = lms_fields(Path(member))
        if student is not None:
            assert fields is not None and fields["student_id"] == student, member
    fields = lms_fields(Path(f"Exercise 1_mallory_attempt_{STAMP}_x_attempt_2099-01-01-00-00-00_a"))
    assert fields["timestamp"] == "2026-11-20 14:05:09"


@pytest.mark.parametrize(
    "student", ['=HYPERLINK("x")', "a\x1b[2Jb", "", "-rf", "a" * 65, "a/b", "a b", "ä"]
)
def test_unsafe_ids_are_refused(student):
    assert not valid_student_id(student)


def test_safe_ids_are_kept():
    assert all(valid_student_id(s) for s in ("jdoe", "12345", "jane.doe@uni.edu", "a_b-c"))


@pytest.mark.slow
def test_zip_collect_of_a_hostile_download(tmp_path):
    course = tmp_path / "course"
    built = attn_grade("build", EX1, "--course", str(course))
    assert built.returncode == 0, built.stderr
    archive = course / "downloaded" / EX1 / "archive"
    archive.mkdir(parents=True)
    nested = io.BytesIO()
    with zipfile.ZipFile(nested, "w") as inner:  # for a student who submitted nothing
        inner.writestr(f"Zed_999999_assignsubmission_file_/{NOTEBOOK}", "zed")
    with zipfile.ZipFile(archive / "download.zip", "w") as bundle:
        for member in HOSTILE:
            bundle.writestr(member, member)
        bundle.writestr("Eve Doe_333333_assignsubmission_file_/extra.zip", nested.getvalue())
    done = nbgrader(course, "zip_collect", EX1, check=False)
    assert done.returncode == 1, "files were left out: " + done.stderr[-2000:]
    summary = done.stderr[done.stderr.index("left out") :]
    for left_out in ("dup_66666_1", "dup_66666_2", "HYPERLINK", "extra.zip", "al\\x1b[2Jice"):
        assert left_out in summary, f"{left_out} is named in the summary:\n{summary}"
    submitted = {p.name for p in (course / "submitted").iterdir()}
    assert submitted == {s for s in HOSTILE.values() if s}
    victim = course / "submitted" / "victim" / EX1 / NOTEBOOK
    assert victim.read_text() == f"Exercise 1_victim_attempt_{STAMP}_{NOTEBOOK}"
    assert (
        (course / "submitted" / "victim" / EX1 / "timestamp.txt")
        .read_text()
        .startswith("2026-11-20 14:05:09")
    )
    assert "dup_66666_1" in done.stderr and "dup_66666_2" in done.stderr
    assert "\x1b" not in done.stderr


def test_nested_archives_and_bombs_are_bounded(tmp_path, caplog):
    archive, extracted = tmp_path / "archive", tmp_path / "extracted"
    archive.mkdir()
    with zipfile.ZipFile(archive / "a.zip", "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("bomb.ipynb", b"\0" * (80 << 20))  # 80 MiB of zeros, about 80 KB
        bundle.writestr("inner.zip", b"PK\x03\x04")
        bundle.writestr("../escape.ipynb", "x")
        bundle.writestr("/abs.ipynb", "x")
        bundle.writestr("ok/ex1_numpy_attention.ipynb", "kept")
        link = zipfile.ZipInfo("link.ipynb")
        link.external_attr = 0o120777 << 16
        bundle.writestr(link, "/etc/passwd")
    with caplog.at_level(logging.WARNING):
        BoundedExtractor(max_member_bytes=64 << 20).extract(str(archive), str(extracted))
    found = sorted(str(p.relative_to(extracted)) for p in extracted.rglob("*") if p.is_file())
    assert found == ["a/ok/ex1_numpy_attention.ipynb"]
    assert not (tmp_path / "escape.ipynb").exists()
    assert "over the size bounds" in caplog.text and "nested archive" in caplog.text


def test_collect_copies_only_regular_files(tmp_path):
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    reference = course / "source" / NOTEBOOK
    reference.write_text("the reference, filled in")
    inbound = tmp_path / "inbound" / "student+ex1+stamp"
    inbound.mkdir(parents=True)
    (inbound / NOTEBOOK).symlink_to(reference)
    os.link(reference, inbound / "hard.ipynb")
    (inbound / "notes.txt").write_text("mine")
    collector = SafeExchangeCollect(coursedir=CourseDirectory(root=str(course)))
    destination = tmp_path / "submitted"
    collector.do_copy(str(inbound), str(destination))
    assert sorted(p.name for p in destination.iterdir()) == ["notes.txt"]


def test_the_course_config_uses_the_safe_intake(tmp_path):
    from autograder.course.api import nbgrader_api
    from autograder.course.build import build_course

    course = tmp_path / "course"
    build_course(course, [EX1], release=False)
    config = nbgrader_api(course).config
    assert config.ZipCollectApp.extractor_plugin.endswith("intake.BoundedExtractor")
    assert config.ExchangeFactory.collect.endswith("intake.SafeExchangeCollect")
    assert config.ExportApp.plugin_class.endswith("intake.SafeCsvExport")


def test_export_writes_no_formula(tmp_path):
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db, "course") as gradebook:
        gradebook.add_assignment(EX1)
        gradebook.add_student("s1", first_name='=HYPERLINK("http://x","y")', last_name="Roe, Bob")
        gradebook.add_student("s2", first_name="+1", email="@cmd")
        exporter = SafeCsvExport(to=str(tmp_path / "grades.csv"))
        exporter.export(gradebook)
    rows = sorted(csv.DictReader((tmp_path / "grades.csv").open()), key=lambda r: r["student_id"])
    assert [r["student_id"] for r in rows] == ["s1", "s2"]
    assert rows[0]["first_name"] == '\'=HYPERLINK("http://x","y")'
    assert rows[0]["last_name"] == "Roe, Bob"
    assert rows[1]["first_name"] == "'+1" and rows[1]["email"] == "'@cmd"
    assert all(not cell.startswith(("=", "+", "-", "@")) for r in rows for cell in r.values())
    assert csv_cell(-1.5) == "'-1.5"  # negative numbers too: a spreadsheet reads them as text


def test_a_student_folder_with_an_unsafe_name_is_listed_not_graded(tmp_path):
    for student in ("alice", "al\x1b[2Jice", "=cmd"):
        folder = tmp_path / "submitted" / student / EX1
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_text("{}")
    out = account(tmp_path, [EX1], copy=False)
    assert [student for _, student, _ in out.found] == ["alice"]
    assert len(out.problems) == 2 and all("\x1b" not in p for p in out.problems)


def _repo(root: Path, name: str, date: str) -> str:
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    env |= {"GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s"}
    env |= {"GIT_COMMITTER_EMAIL": "s@x"}
    work = root / name
    work.mkdir()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "w"]):
        if args[0] == "add":
            (work / NOTEBOOK).write_text(name)
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    return f"file://{work}"


def test_a_commit_dated_far_away_does_not_stop_classroom_collect(tmp_path):
    from autograder.ci.classroom_repos import RosterEntry, collect

    roster = [
        RosterEntry("eve", _repo(tmp_path, "eve", "@1000000000000 +0000")),  # year 33658
        RosterEntry("old", _repo(tmp_path, "old", "@100 +0000")),  # 1970
        RosterEntry("alice", _repo(tmp_path, "alice", "2026-11-20T10:00:00+00:00")),
    ]
    course = tmp_path / "course"
    outcome = collect(roster, EX1, course, cache=tmp_path / "cache")
    assert outcome["alice"] == "collected"
    for student in ("eve", "old"):
        assert outcome[student].startswith("collected; its commit time is not believable")
        stamp = (course / "submitted" / student / EX1 / "timestamp.txt").read_text()
        assert stamp.startswith(str(datetime.now(UTC).year))
    alice = (course / "submitted" / "alice" / EX1 / "timestamp.txt").read_text()
    assert alice.startswith("2026-11-20 10:00:00")
