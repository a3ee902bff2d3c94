"""`nbgrader zip_collect` of Canvas, Moodle and Blackboard downloads, with no pattern to write
(the whole term through an LMS: tests/integration/test_lms_term.py)."""

from __future__ import annotations

import zipfile

import pytest

from tests.support.nbgrader_helpers import attn_grade, nbgrader

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
