"""Whose file is it: zip_collect reads the student from the fixed place each LMS writes it
("Hidden means hidden", item 4; "A Korean course through Canvas and Moodle", F1).

- Moodle: the top-level participant folder of the download, whatever folders the student made
  below it; Canvas and Blackboard: the top-level file name. A name nested in a folder never
  decides whose a file is.
- Canvas: the numeric ids identify the file, whatever the login field holds (Hangul, another
  script, nothing).
- Nothing vanishes: zip_collect ends with a summary naming every file it left out, and exits 1
  when a notebook (or anything refused) was left out.
"""

from __future__ import annotations

import csv
import re
import shutil
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from autograder.nbgrader_plugins.lms_files import download_name, lms_fields
from tests.support.built_once import built_once
from tests.support.nbgrader_helpers import attn_grade, nbgrader

EX1 = "ex1_numpy_attention"
NOTEBOOK = f"{EX1}.ipynb"
STAMP = "2026-11-20-14-05-09"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    def build(target: Path) -> None:
        done = attn_grade("build", EX1, "--course", str(target / "course"))
        assert done.returncode == 0, done.stderr

    return built_once(tmp_path_factory, "intake-identity-course", build) / "course"


@pytest.fixture
def course(built, tmp_path) -> Path:
    copy = tmp_path / "course"
    shutil.copytree(built, copy)
    return copy


def place(course: Path, name: str, members: dict[str, str]) -> None:
    archive = course / "downloaded" / EX1 / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive / name, "w") as bundle:
        for member, text in members.items():
            bundle.writestr(member, text)


def collected(course: Path) -> dict[str, dict[str, str]]:
    """student -> {file name: content} of submitted/."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted((course / "submitted").glob(f"*/{EX1}/*")):
        if path.name != "timestamp.txt":
            found.setdefault(path.parent.parent.name, {})[path.name] = path.read_text()
    return found


MOODLE_FOLDER = "{name}_{id}_assignsubmission_file_/"


def moodle(name: str, student: str, path: str) -> str:
    return MOODLE_FOLDER.format(name=name, id=student) + path


# Moodle keeps the folders a student makes inside her participant folder.
MOODLE = {
    moodle("Vic Tim", "12345", NOTEBOOK): "victim's own",
    # a folder named like the victim's participant folder (the victim kept his notebook)
    moodle("Mal One", "61001", f"Vic Tim_12345_assignsubmission_file_/{NOTEBOOK}"): "mal one",
    # ... like the folder of a participant who handed in nothing
    moodle("Mal Two", "61002", f"Zed Ghost_70001_assignsubmission_file_/{NOTEBOOK}"): "mal two",
    # a Canvas-style and a Blackboard-style file name in the student's own folders
    moodle("Mal Three", "61003", f"sub/ghost_70002_7000200_{NOTEBOOK}"): "mal three",
    moodle("Mal Four", "61004", f"a/b/Exercise 1_ghost_attempt_{STAMP}_{NOTEBOOK}"): "mal four",
    # two notebooks of one student for one exercise: neither is guessed at, both are named
    moodle("Mal Five", "61005", NOTEBOOK): "five top",
    moodle("Mal Five", "61005", f"old/{NOTEBOOK}"): "five old",
    # a notebook and its PDF are no conflict
    moodle("Pat Six", "61006", NOTEBOOK): "pat six",
    moodle("Pat Six", "61006", f"{EX1}.pdf"): "pdf",
}
CANVAS = {
    f"김민준_10001_5550001_{NOTEBOOK}": "hangul",
    f"_10002_5550002_{NOTEBOOK}": "empty login",
    f"_LATE_10003_5550003_{NOTEBOOK}": "empty login, late",
    f"иванова_10004_5550004_{EX1}-1.ipynb": "cyrillic, resubmitted",
    f"o_brien_10005_5550005_{NOTEBOOK}": "underscore in the login",
    # a Canvas name in a folder (Canvas writes none): it never decides whose a file is
    f"junk/victim_12345_5550006_{NOTEBOOK}": "nested canvas name",
    NOTEBOOK: "no LMS fields at all",
    "readme.txt": "not a notebook",
}
EXPECTED = {
    "12345": {NOTEBOOK: "victim's own"},
    "61001": {NOTEBOOK: "mal one"},
    "61002": {NOTEBOOK: "mal two"},
    "61003": {f"ghost_70002_7000200_{NOTEBOOK}": "mal three"},
    "61004": {f"Exercise 1_ghost_attempt_{STAMP}_{NOTEBOOK}": "mal four"},
    "61006": {NOTEBOOK: "pat six"},
    "10001": {NOTEBOOK: "hangul"},
    "10002": {NOTEBOOK: "empty login"},
    "10003": {NOTEBOOK: "empty login, late"},
    "10004": {NOTEBOOK: "cyrillic, resubmitted"},
    "10005": {NOTEBOOK: "underscore in the login"},
}
LEFT_OUT = [
    moodle("Mal Five", "61005", NOTEBOOK),
    moodle("Mal Five", "61005", f"old/{NOTEBOOK}"),
    f"junk/victim_12345_5550006_{NOTEBOOK}",
    f"canvas/{NOTEBOOK}",
]


@pytest.mark.slow
def test_identity_comes_from_the_top_of_the_download_only(course):
    place(course, "moodle.zip", MOODLE)
    place(course, "canvas.zip", CANVAS)
    done = nbgrader(course, "zip_collect", EX1, check=False)
    assert collected(course) == EXPECTED, done.stderr[-3000:]
    assert done.returncode == 1, "a notebook left out is not an exit code 0"
    summary = done.stderr[done.stderr.index("left out") :]
    for name in LEFT_OUT:
        assert name in summary, f"{name} is named in the summary:\n{summary}"
    assert "readme.txt" in summary, "the other files are listed too"
    assert "70001" not in "".join(collected(course)) and "ghost" not in collected(course)

    # nothing is autograded yet: lms-grades names whose grades are missing (exit 1, no file)
    made = attn_grade("lms-grades", "ex1", "--lms", "moodle", "--course", str(course))
    assert made.returncode == 1, made.stderr
    waiting = set(re.findall(r"^  (\S+) .*not autograded", made.stderr, flags=re.M))
    assert waiting == {"12345", "61001", "61002", "61003", "61004", "61006"}, (
        "the download's participants who handed in a notebook; no one a folder name made up"
    )
    assert "70001" not in made.stderr and "70002" not in made.stderr
    made = attn_grade("lms-grades", "ex1", "--lms", "moodle", "--course", str(course), "--partial")
    assert made.returncode == 0, made.stderr
    rows = list(csv.DictReader((course / f"grades_{EX1}_moodle.csv").open(encoding="utf-8-sig")))
    assert [(row["Identifier"], row["Grade"]) for row in rows] == [("Participant 61005", "")], (
        "an empty grade for 61005 (both notebooks refused); the others left out, not final"
    )


@pytest.mark.slow
def test_a_clean_download_with_hangul_names_collects_every_file_with_exit_0(course):
    place(course, "canvas.zip", {name: text for name, text in CANVAS.items() if "/" not in name
                                 and name not in (NOTEBOOK, "readme.txt")})  # fmt: skip
    done = nbgrader(course, "zip_collect", EX1, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(collected(course)) == {"10001", "10002", "10003", "10004", "10005"}
    stamp = (course / "submitted" / "10003" / EX1 / "timestamp.txt").read_text()
    assert stamp, "the _LATE_ flag of an empty login is read"


# Canvas: `<login>_[LATE_]<user id>_<attachment id>_<file>`; Canvas keeps the word characters of
# the student's sortable name (any script) in <login>, which may also be empty.
CANVAS_LOGINS = {
    f"김민준_10001_5550001_{NOTEBOOK}": ("10001", False),
    f"이서연_LATE_10006_5550006_{NOTEBOOK}": ("10006", True),
    f"_10002_5550002_{NOTEBOOK}": ("10002", False),
    f"_LATE_10003_5550003_{NOTEBOOK}": ("10003", True),
    f"иванова_10004_5550004_{NOTEBOOK}": ("10004", False),
    f"οδυσσέας_10007_5550007_{NOTEBOOK}": ("10007", False),
    f"محمد_10008_5550008_{NOTEBOOK}": ("10008", False),
    f"田中太郎_10009_5550009_{NOTEBOOK}": ("10009", False),
    f"garcíaluis_10010_5550010_{NOTEBOOK}": ("10010", False),
    f"o_brien_10011_5550011_{NOTEBOOK}": ("10011", False),
    f"abc123_10012_5550012_{NOTEBOOK}": ("10012", False),
    f"chocolate_10013_5550013_{NOTEBOOK}": ("10013", False),
    f"doejane_LATE_10014_5550014_{EX1}-2.ipynb": ("10014", True),
}


@pytest.mark.parametrize("name", list(CANVAS_LOGINS))
def test_canvas_files_are_identified_by_their_ids_whatever_the_login(name):
    fields = lms_fields(PurePosixPath(name))
    student, late = CANVAS_LOGINS[name]
    assert fields is not None, name
    assert fields["student_id"] == student and fields["file_id"] == NOTEBOOK
    assert bool(fields.get("late")) == late


# A Canvas name with more than one reading: both ends are the student's (Canvas keeps
# "_<digits>_" of a display name such as "Mallory__10002__7"; the uploaded file's name is any),
# so no rule can tell the real fields from the written ones (an independent attacker had a
# notebook filed as student 10002's through the login, reading the first pair).
AMBIGUOUS_CANVAS = [
    f"mallory_10002_7_10001_5550001_{NOTEBOOK}",  # the login holds another's fields
    f"kim_10001_5550001_10003_1_{NOTEBOOK}",  # the uploaded file's name does
    f"x_10004_2_LATE_10001_5550001_{NOTEBOOK}",  # a forged pair before a late flag
    f"_10005_5_10001_5550001_{NOTEBOOK}",  # an empty login and a forged pair
]


@pytest.mark.parametrize("name", AMBIGUOUS_CANVAS)
def test_a_canvas_name_with_more_than_one_reading_is_no_ones(name):
    fields = lms_fields(PurePosixPath(name))
    assert fields is not None and "ambiguous" in fields and "student_id" not in fields, fields
    assert download_name(PurePosixPath(name)) is None


@pytest.mark.parametrize(
    "relative",
    [
        f"sub/doejane_12345_6789012_{NOTEBOOK}",  # Canvas fields in a folder
        f"sub/Exercise 1_jdoe_attempt_{STAMP}_{NOTEBOOK}",  # Blackboard fields in a folder
        f"sub/Jane Doe_123456_assignsubmission_file_/{NOTEBOOK}",  # a participant folder, nested
        f"sub/Jane Doe_123456_assignsubmission_file_{NOTEBOOK}",  # Moodle's flat name, nested
    ],
)
def test_no_name_below_the_top_of_the_download_decides(relative):
    assert lms_fields(PurePosixPath(relative)) is None


@pytest.mark.parametrize(
    "below",
    [
        f"Vic_1_assignsubmission_file_/{NOTEBOOK}",  # another participant's folder
        f"x/doejane_12345_6789012_{NOTEBOOK}",  # Canvas fields, in a folder of hers
        f"Exercise 1_v_attempt_{STAMP}_a",  # Blackboard fields
        f"a/b/c/x_444444_assignsubmission_file_{NOTEBOOK}",  # Moodle's flat name, deep down
    ],
)
def test_the_participant_folder_decides_whatever_lies_below(below):
    fields = lms_fields(PurePosixPath("Eve Doe_333333_assignsubmission_file_") / below)
    assert fields is not None and fields["student_id"] == "333333"
