"""Intake follows only paths it owns ("Hidden means hidden", item 4; item 7): every component of
what a student hands in is looked at without following it, and anything that is not a plain
folder or a plain file with one name (a symbolic link, a hard link, a FIFO, a socket, a git
link or submodule) is refused and named, at every intake: the exchange's `collect`,
zip_collect's archive folder and extracted tree, Classroom's git objects, Gradescope's
submission folder, and the course's `submitted/`. Each class has several variants; a checked
component swapped for a link before it is read is one of them."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import zipfile
from pathlib import Path

import pytest
from nbgrader.coursedir import CourseDirectory

from autograder.nbgrader_plugins.intake import BoundedExtractor, SafeExchangeCollect

EX1 = "ex1_numpy_attention"
NOTEBOOK = f"{EX1}.ipynb"
REFERENCE = '{"the": "reference notebook, filled in"}'
OWN = '{"the": "student\'s own notebook"}'


def outside(tmp_path: Path) -> Path:
    """A folder the student does not own: the course's source/ex1 with the reference."""
    folder = tmp_path / "course" / "source" / EX1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_text(REFERENCE)
    (folder / "reference.py").write_text("SECRET = 1\n")
    return folder


def swap_for_link_after_check(monkeypatch, target: Path, link_to: Path) -> None:
    """The race: the first time `target` is looked at without following it (lstat), it is
    replaced by a link to `link_to` right after the look, before it is opened."""
    real_lstat, real_stat = os.lstat, os.stat
    done = []

    def swap() -> None:
        if not done:
            done.append(True)
            moved = target.with_name(target.name + ".moved")
            target.rename(moved)
            target.symlink_to(link_to)

    def is_target(path, dir_fd) -> bool:
        name = os.fsdecode(path)
        if dir_fd is None:
            return os.path.abspath(name) == str(target)
        return name == target.name and os.path.samestat(os.fstat(dir_fd), real_stat(target.parent))

    def lstat(path, *, dir_fd=None):
        found = real_lstat(path, dir_fd=dir_fd)
        if not done and is_target(path, dir_fd):
            swap()
        return found

    def stat(path, *, dir_fd=None, follow_symlinks=True):
        found = real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if not follow_symlinks and not done and not isinstance(path, int):
            if is_target(path, dir_fd):
                swap()
        return found

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "stat", stat)


# --- the exchange: `nbgrader collect` -------------------------------------------------------
# variant -> (make(submission folder, outside folder, monkeypatch), paths that must be named)


def _own(src: Path) -> None:
    src.mkdir(parents=True)
    (src / NOTEBOOK).write_text(OWN)


def _folder_is_link(src, out, mp):
    src.symlink_to(out, target_is_directory=True)
    return [src.name]


def _link_in_the_middle(src, out, mp):
    _own(src)
    (src / "a").mkdir()
    (src / "a" / "work").symlink_to(out, target_is_directory=True)
    return ["work"]


def _file_link_outside(src, out, mp):
    _own(src)
    (src / "data.ipynb").symlink_to(out / NOTEBOOK)
    return ["data.ipynb"]


def _hard_link(src, out, mp):
    _own(src)
    os.link(out / NOTEBOOK, src / "copy.ipynb")
    return ["copy.ipynb"]


def _fifo(src, out, mp):
    _own(src)
    os.mkfifo(src / "pipe.ipynb")
    return ["pipe.ipynb"]


def _socket(src, out, mp):
    _own(src)
    here = os.getcwd()
    os.chdir(src)  # a UNIX socket's path is at most 108 bytes: bind it by its short name
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind("sock")
        server.close()
    finally:
        os.chdir(here)
    return ["sock"]


def _file_swapped_after_check(src, out, mp):
    src.mkdir(parents=True)
    (src / NOTEBOOK).write_text(OWN)
    swap_for_link_after_check(mp, src / NOTEBOOK, out / NOTEBOOK)
    return [NOTEBOOK]


def _folder_swapped_after_check(src, out, mp):
    _own(src)
    (src / "work").mkdir()
    (src / "work" / "mine.txt").write_text("mine")
    swap_for_link_after_check(mp, src / "work", out)
    return ["work"]


EXCHANGE_VARIANTS = {
    "the submission folder is a link": _folder_is_link,
    "a folder in the middle is a link": _link_in_the_middle,
    "a file is a link outside": _file_link_outside,
    "a hard link": _hard_link,
    "a FIFO": _fifo,
    "a socket": _socket,
    "a file swapped for a link after the check": _file_swapped_after_check,
    "a folder swapped for a link after the check": _folder_swapped_after_check,
}


def copied_tree(top: Path) -> list[tuple[str, str]]:
    """(relative path, content or what it is) of everything under `top`, links not followed."""
    found = []
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(root) / name
            relative = str(path.relative_to(top))
            if path.is_symlink():
                found.append((relative, "LINK"))
            elif path.is_file():
                found.append((relative, path.read_text()))
    return sorted(found)


@pytest.mark.parametrize("variant", list(EXCHANGE_VARIANTS))
def test_exchange_collect_copies_only_what_the_student_owns(variant, tmp_path, monkeypatch, caplog):
    out = outside(tmp_path)
    src = tmp_path / "exchange" / "inbound" / "mallory+ex1+2026-11-20 10:00:00.000000 UTC"
    src.parent.mkdir(parents=True)
    named = EXCHANGE_VARIANTS[variant](src, out, monkeypatch)
    collector = SafeExchangeCollect(coursedir=CourseDirectory(root=str(tmp_path / "course")))
    dest = tmp_path / "course" / "submitted" / "mallory" / EX1
    with caplog.at_level(logging.WARNING):
        collector.do_copy(str(src), str(dest))
    monkeypatch.undo()
    tree = copied_tree(dest) if dest.exists() else []
    assert all(kind != "LINK" for _, kind in tree), tree
    assert all(text not in (REFERENCE, "SECRET = 1\n") for _, text in tree), tree
    if variant != "the submission folder is a link" and "swapped" not in variant:
        assert (NOTEBOOK, OWN) in tree, "the rest of her submission is kept"
    text = "\n".join(record.getMessage() for record in caplog.records)
    for name in named:
        assert name in text, f"{name} is named in a warning: {text}"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """An ex1 course (shared with test_intake_identity.py: built once per run)."""
    from tests.support.built_once import built_once
    from tests.support.nbgrader_helpers import attn_grade

    def build(target: Path) -> None:
        done = attn_grade("build", EX1, "--course", str(target / "course"))
        assert done.returncode == 0, done.stderr

    return built_once(tmp_path_factory, "intake-identity-course", build) / "course"


@pytest.mark.slow
def test_nbgrader_collect_files_no_reference_for_a_linked_submission(built, tmp_path):
    """The attack as it was shown: the inbound submission folder is a link to the course's
    source/ex1; `nbgrader collect` filed the reference as hers (8/8). Now she has nothing, a
    link inside another submission is left out, everyone else is collected, collect exits 1."""
    from autograder.course.build import COURSE_ID
    from tests.support.nbgrader_helpers import nbgrader

    course, exchange = tmp_path / "course", tmp_path / "exchange"
    shutil.copytree(built, course)
    inbound = exchange / COURSE_ID / "inbound"
    inbound.mkdir(parents=True)
    stamp = "2026-11-20 10:00:00.000000 UTC"
    (inbound / f"mallory+{EX1}+{stamp}").symlink_to(course / "source" / EX1)
    for student in ("alice", "trudy"):
        (inbound / f"{student}+{EX1}+{stamp}").mkdir()
        (inbound / f"{student}+{EX1}+{stamp}" / NOTEBOOK).write_text(OWN)
    (inbound / f"trudy+{EX1}+{stamp}" / "answers").symlink_to(course / "source" / EX1)
    done = nbgrader(course, "collect", EX1, f"--Exchange.root={exchange}", check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    submitted = course / "submitted"
    assert not (submitted / "mallory" / EX1 / NOTEBOOK).exists()
    for student in ("alice", "trudy"):
        assert copied_tree(submitted / student / EX1) == [(NOTEBOOK, OWN)], student
    summary = done.stderr[done.stderr.index("left out") :]
    assert f"mallory+{EX1}" in summary and "answers" in summary, summary


# --- Gradescope: /autograder/submission ------------------------------------------------------


def _gs_folder_is_link(sub, out):
    sub.symlink_to(out, target_is_directory=True)
    return "submission"


def _gs_notebook_link(sub, out):
    sub.mkdir()
    (sub / NOTEBOOK).symlink_to(out / NOTEBOOK)
    return NOTEBOOK


def _gs_folder_link_inside(sub, out):
    sub.mkdir()
    (sub / "work").symlink_to(out, target_is_directory=True)
    return "work"


def _gs_hard_link(sub, out):
    sub.mkdir()
    os.link(out / NOTEBOOK, sub / NOTEBOOK)
    return NOTEBOOK


def _gs_fifo(sub, out):
    sub.mkdir()
    os.mkfifo(sub / NOTEBOOK)
    return NOTEBOOK


GRADESCOPE_VARIANTS = {
    "the submission folder is a link": _gs_folder_is_link,
    "the notebook is a link": _gs_notebook_link,
    "a folder inside is a link": _gs_folder_link_inside,
    "the notebook is a hard link": _gs_hard_link,
    "the notebook is a FIFO": _gs_fifo,
}


@pytest.mark.parametrize("variant", list(GRADESCOPE_VARIANTS))
def test_gradescope_reads_no_notebook_it_does_not_own(variant, tmp_path):
    from autograder.ci.gradescope import pick_notebook

    out = outside(tmp_path)
    submission = tmp_path / "autograder" / "submission"
    submission.parent.mkdir()
    named = GRADESCOPE_VARIANTS[variant](submission, out)
    notebook, reason = pick_notebook(submission, EX1)
    assert notebook is None, f"picked {notebook}"
    assert reason and named in reason, reason
    assert any(word in reason for word in ("link", "FIFO")), reason


def test_gradescope_grades_the_plain_notebook_and_names_the_link_beside_it(tmp_path):
    from autograder.ci.gradescope import pick_notebook

    out = outside(tmp_path)
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / NOTEBOOK).write_text(OWN)
    (submission / "answers.ipynb").symlink_to(out / NOTEBOOK)
    notebook, note = pick_notebook(submission, EX1)
    assert notebook == submission / NOTEBOOK
    assert note and "answers.ipynb" in note, note


@pytest.mark.slow
def test_gradescope_results_say_the_submission_was_a_link(tmp_path, monkeypatch):
    from autograder.ci import gradescope

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / gradescope.CONFIG_NAME).write_text(
        json.dumps({"exercise": EX1, "visibility": "visible"})
    )
    (root / "source" / NOTEBOOK).write_text(REFERENCE)
    (root / "submission").symlink_to(root / "source", target_is_directory=True)
    results = gradescope.run(root)
    assert results["score"] == 0
    assert "submission" in results["output"] and "link" in results["output"]


# --- Classroom: the notebook from git objects ------------------------------------------------


def _git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x"}
    env |= {"GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@x"}
    env |= {"GIT_AUTHOR_DATE": "2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE": "2026-11-20T10:00:00Z"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, input=input)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def repo_with(tmp_path: Path, mode: str) -> Path:
    """A bare repository whose HEAD has `ex1_numpy_attention.ipynb` with git mode `mode`."""
    repo = tmp_path / f"repo-{mode}.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(repo))
    blob = _git(repo, "hash-object", "-w", "--stdin", input=OWN.encode()).strip()
    if mode == "040000":
        inner = _git(repo, "mktree", input=f"100644 blob {blob}\tx\n".encode()).strip()
        row = f"040000 tree {inner}\t{NOTEBOOK}\n"
    elif mode == "160000":
        row = f"160000 commit {'1' * 40}\t{NOTEBOOK}\n"
    elif mode == "120000":
        target = _git(repo, "hash-object", "-w", "--stdin", input=b"/etc/passwd").strip()
        row = f"120000 blob {target}\t{NOTEBOOK}\n"
    else:
        row = f"{mode} blob {blob}\t{NOTEBOOK}\n"
    tree = _git(repo, "mktree", input=row.encode()).strip()
    commit = _git(repo, "commit-tree", tree, input=b"work").strip()
    _git(repo, "update-ref", "refs/heads/main", commit)
    return repo


@pytest.mark.parametrize(
    "mode, refusal",
    [
        ("100644", None),
        ("100755", None),  # the executable bit: a plain file (item 7)
        ("120000", "symbolic link"),
        ("160000", "submodule"),
        ("040000", "folder"),
    ],
)
def test_classroom_takes_plain_files_whatever_their_executable_bit(mode, refusal, tmp_path):
    from autograder.ci.classroom_repos import CollectError, committed_notebook

    repo = repo_with(tmp_path, mode)
    if refusal is None:
        blob, _ = committed_notebook(repo, EX1)
        assert blob.decode() == OWN
    else:
        with pytest.raises(CollectError, match=refusal):
            committed_notebook(repo, EX1)


# --- zip_collect's archive folder (BoundedExtractor) -----------------------------------------


def _moodle_folder(archive: Path) -> Path:
    folder = archive / "Mal Lory_61001_assignsubmission_file_"
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text(OWN)
    return folder


def _ar_folder_link(archive, out):
    _moodle_folder(archive)
    (archive / "unpacked").symlink_to(out.parent, target_is_directory=True)
    return "unpacked"


def _ar_link_in_participant(archive, out):
    (_moodle_folder(archive) / "data.ipynb").symlink_to(out / NOTEBOOK)
    return "data.ipynb"


def _ar_hard_link(archive, out):
    os.link(out / NOTEBOOK, _moodle_folder(archive) / "copy.ipynb")
    return "copy.ipynb"


def _ar_fifo(archive, out):
    os.mkfifo(_moodle_folder(archive) / "pipe.ipynb")
    return "pipe.ipynb"


def _ar_students_zip(archive, out):
    with zipfile.ZipFile(_moodle_folder(archive) / "mine.zip", "w") as inner:
        inner.writestr(f"Vic Tim_12345_assignsubmission_file_/{NOTEBOOK}", REFERENCE)
    return "mine.zip"


def _ar_zip_is_link(archive, out):
    _moodle_folder(archive)
    elsewhere = out.parent / "elsewhere.zip"
    with zipfile.ZipFile(elsewhere, "w") as bundle:
        bundle.writestr(f"Vic Tim_12345_assignsubmission_file_/{NOTEBOOK}", REFERENCE)
    (archive / "download.zip").symlink_to(elsewhere)
    return "download.zip"


ARCHIVE_VARIANTS = {
    "a folder link": _ar_folder_link,
    "a notebook link in a participant folder": _ar_link_in_participant,
    "a hard link": _ar_hard_link,
    "a FIFO": _ar_fifo,
    "a student's zip in an unpacked download": _ar_students_zip,
    "a linked zip": _ar_zip_is_link,
}


@pytest.mark.parametrize("variant", list(ARCHIVE_VARIANTS))
def test_the_archive_folder_is_read_without_following_links(variant, tmp_path, caplog):
    out = outside(tmp_path)
    archive, extracted = tmp_path / "downloaded" / EX1 / "archive", tmp_path / "extracted"
    named = ARCHIVE_VARIANTS[variant](archive, out)
    with caplog.at_level(logging.WARNING):
        BoundedExtractor().extract(str(archive), str(extracted))
    tree = copied_tree(extracted)
    assert all(kind != "LINK" for _, kind in tree), tree
    assert all(text not in (REFERENCE, "SECRET = 1\n") for _, text in tree), tree
    assert ("Mal Lory_61001_assignsubmission_file_/" + NOTEBOOK, OWN) in tree
    assert named in caplog.text, caplog.text


@pytest.mark.slow
def test_zip_collect_files_nothing_through_a_link_in_the_extracted_tree(built, tmp_path):
    """Files put in extracted/ by another extractor or by hand (no archive folder: zip_collect
    reads extracted/ as it is): a notebook link to the reference, a folder link, a hard link
    and a FIFO are refused and named, the plain notebook beside them is collected."""
    from tests.support.nbgrader_helpers import nbgrader

    course = tmp_path / "course"
    shutil.copytree(built, course)
    reference = course / "source" / EX1 / NOTEBOOK
    extracted = course / "downloaded" / EX1 / "extracted"
    folders = {
        s: extracted / f"{name}_{s}_assignsubmission_file_"
        for s, name in (("61001", "Al Ice"), ("61002", "Mal Lory"), ("61003", "Tru Dy"))
    }
    for folder in folders.values():
        folder.mkdir(parents=True)
    (folders["61001"] / NOTEBOOK).write_text(OWN)
    (folders["61002"] / NOTEBOOK).symlink_to(reference)
    (folders["61002"] / "work").symlink_to(reference.parent, target_is_directory=True)
    os.link(reference, folders["61003"] / NOTEBOOK)
    os.mkfifo(folders["61003"] / "answers.ipynb")
    done = nbgrader(course, "zip_collect", EX1, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["61001"]
    assert (course / "submitted" / "61001" / EX1 / NOTEBOOK).read_text() == OWN
    summary = done.stderr[done.stderr.index("left out") :]
    for path in ("Mal Lory_61002_assignsubmission_file_/" + NOTEBOOK, "work", "answers.ipynb",
                 "Tru Dy_61003_assignsubmission_file_/" + NOTEBOOK):  # fmt: skip
        assert path in summary, f"{path} is named:\n{summary}"


# --- the course's submitted/ (what autograde grades) -----------------------------------------


@pytest.mark.parametrize("level", ["student folder", "exercise folder", "notebook"])
def test_submitted_links_are_listed_not_graded(level, tmp_path):
    from autograder.course.submitted import account

    out = outside(tmp_path)
    student = tmp_path / "submitted" / "mallory"
    if level == "student folder":
        (out / EX1).mkdir()
        shutil.copy(out / NOTEBOOK, out / EX1 / NOTEBOOK)
        student.parent.mkdir(parents=True)
        student.symlink_to(out, target_is_directory=True)
    elif level == "exercise folder":
        student.mkdir(parents=True)
        (student / EX1).symlink_to(out, target_is_directory=True)
    else:
        (student / EX1).mkdir(parents=True)
        (student / EX1 / NOTEBOOK).symlink_to(out / NOTEBOOK)
    found = account(tmp_path, [EX1], copy=False)
    assert found.found == []
    assert any("mallory" in problem and "link" in problem for problem in found.problems), (
        found.problems
    )
