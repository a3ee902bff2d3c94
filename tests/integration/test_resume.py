"""A batch killed with SIGKILL at any point and run again grades only what is missing: no grade
lost, duplicated or half-written, and the gradebook ends equal to an uninterrupted run's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from autograder.audit import log as audit
from autograder.core import faults
from autograder.course.build import tool_env
from autograder.sandbox.inside.supervisor import stat_fields
from tests.support.nbgrader_helpers import attn_grade, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
EXERCISE = "ex1_numpy_attention"
STUDENTS = ("alice", "bob", "carol", "dave")  # dave submits alice's code: another seed


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    course = tmp_path_factory.mktemp("resume") / "template"
    built = attn_grade("build", EXERCISE, "--course", str(course))
    assert built.returncode == 0, built.stderr
    release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
    for student in STUDENTS:
        path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(
            submission_text(release, EXERCISE, "alice" if student == "dave" else student)
        )
    return course


def copy_of(template, tmp_path, name):
    return shutil.copytree(template, tmp_path / name)


def batch(course, *extra: str, kill_at: str | None = None) -> subprocess.Popen:
    env = tool_env()
    if kill_at:
        env[faults.VARIABLE] = kill_at
    command = [sys.executable, "-m", "autograder.cli.app", "autograde", "--course", str(course)]
    return subprocess.Popen(
        [*command, "--workers", "2", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen) -> tuple[int, str]:
    _out, err = process.communicate(timeout=600)
    return process.returncode, err


def gradebook_rows(course) -> dict[str, list[tuple]]:
    """student -> every grade and comment row nbgrader keeps for the submission."""
    from nbgrader.api import Gradebook

    rows: dict[str, list[tuple]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for submission in gradebook.assignment_submissions(EXERCISE):
            found = [("timestamp", str(submission.timestamp))]
            for notebook in submission.notebooks:
                found += [
                    (g.name, g.cell.cell_type, g.auto_score, g.needs_manual_grade)
                    for g in notebook.grades
                ]
                found += [(c.name, c.auto_comment) for c in notebook.comments]
            rows[submission.student.id] = sorted(found, key=str)
    return rows


def assert_consistent(course) -> None:
    """Whatever the moment of the kill: every submission in the gradebook is whole (each code
    grade scored), and every audit record is of a submission whose grades are in it."""
    rows = gradebook_rows(course)
    for student, found in rows.items():
        code = [row for row in found if len(row) == 4 and row[1] == "code"]
        assert code and all(row[2] is not None for row in code), (student, found)
    for record in audit.read(course).records:
        assert record["student"] in rows, record


def test_killed_at_every_point_then_resumed_equals_one_uninterrupted_run(template, tmp_path):
    whole = copy_of(template, tmp_path, "whole")
    code, err = finished(batch(whole))
    assert code == 0, err
    expected = gradebook_rows(whole)
    assert set(expected) == set(STUDENTS)

    course = copy_of(template, tmp_path, "killed")
    for point in ("merge:2", "commit:1", "audit:1", "audit-write:1"):
        before = len(audit.read(course).records)
        code, err = finished(batch(course, kill_at=point))
        assert code == -signal.SIGKILL, (point, err)
        assert_consistent(course)
        if point == "commit:1":  # killed between flush and commit: that merge left nothing
            assert len(gradebook_rows(course)) == len(audit.read(course).records) == before
    log = audit.read(course)
    assert log.torn == 1  # the line cut by audit-write
    already = len({(r["exercise"], r["student"]) for r in log.records})
    assert 0 < already < len(STUDENTS)

    code, err = finished(batch(course))
    assert code == 0, err
    assert f"{already} of {len(STUDENTS)} submissions are already graded" in err
    assert gradebook_rows(course) == expected
    log = audit.read(course)
    assert sorted(r["student"] for r in log.records) == sorted(STUDENTS)  # one record each
    assert log.torn == 1

    code, err = finished(batch(course))  # nothing left to do
    assert code == 0, err
    assert f"{len(STUDENTS)} of {len(STUDENTS)} submissions are already graded" in err
    assert len(audit.read(course).records) == len(STUDENTS)

    changed = course / "submitted" / "bob" / EXERCISE / f"{EXERCISE}.ipynb"
    changed.write_text((template / "submitted" / "alice" / EXERCISE / changed.name).read_text())
    code, err = finished(batch(course))  # bob resubmitted: only bob is graded again
    assert code == 0, err
    assert f"{len(STUDENTS) - 1} of {len(STUDENTS)} submissions are already graded" in err
    latest = audit.read(course).latest()[(EXERCISE, "bob")]
    assert latest["score"] == latest["max_score"]


def descendants(pid: int) -> set[int]:
    from autograder.sandbox.inside.supervisor import children_by_parent

    tree, found, todo = children_by_parent(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        try:
            if stat_fields(f"/proc/{pid}/stat")[0] != b"Z":
                living.add(pid)
        except FileNotFoundError:
            pass
    return living


def test_killed_while_grading_leaves_no_process_and_a_clean_rerun(template, tmp_path):
    course = copy_of(template, tmp_path, "grading")
    process = batch(course)
    scratch = course / ".attn-grade" / "scratch"
    deadline = time.monotonic() + 120
    tree: set[int] = set()
    while time.monotonic() < deadline:  # both workers started, and sandboxes under them
        tree = descendants(process.pid)
        if len(list(scratch.glob("gradebook-*.db"))) >= 2 and len(tree) >= 4:
            break
        time.sleep(0.2)
    assert len(tree) >= 4, tree
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    deadline = time.monotonic() + 20
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(tree), "a worker or sandbox outlived the killed batch"
    assert_consistent(course)
    code, err = finished(batch(course))
    assert code == 0, err
    assert sorted(gradebook_rows(course)) == sorted(STUDENTS)
    assert not any(scratch.iterdir()) if scratch.exists() else True


def test_forced_regrade_keeps_hand_grades_under_review(template, tmp_path):
    """nbgrader's rule, kept by the merge: a grade given by hand survives a re-autograde and
    stays flagged for review; auto scores come out the same."""
    from nbgrader.api import Gradebook

    course = copy_of(template, tmp_path, "manual")
    code, err = finished(batch(course, "--workers", "1"))
    assert code == 0, err
    before = gradebook_rows(course)
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gradebook:
        notebook = gradebook.find_submission_notebook(EXERCISE, EXERCISE, "alice")
        code_grade = next(g for g in notebook.grades if g.cell.cell_type == "code")
        code_grade.manual_score, name = 0.5, code_grade.name
        gradebook.db.commit()
    code, err = finished(batch(course, "--force"))
    assert code == 0, err
    assert "already graded" not in err
    with Gradebook(url) as gradebook:
        notebook = gradebook.find_submission_notebook(EXERCISE, EXERCISE, "alice")
        grade = next(g for g in notebook.grades if g.name == name)
        assert grade.manual_score == 0.5 and grade.needs_manual_grade
    after = gradebook_rows(course)
    changed = {
        student: [row for row in after[student] if row not in before[student]]
        for student in STUDENTS
    }
    assert changed == {
        "alice": [(name, "code", grade.auto_score, True)],
        "bob": [],
        "carol": [],
        "dave": [],
    }


WATCHER = """
import os, sys, time
from autograder.batch import recorder
if sys.argv[2] == "poll":  # a kernel without pidfds
    def no_pidfds(pid):
        raise OSError(38, "Function not implemented")
    os.pidfd_open = no_pidfds
batch = int(sys.argv[1])
started = sys.argv[3] if len(sys.argv) > 3 else recorder.process_start_time(batch)
recorder._die_with_batch((batch, started))
print("watching", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["pidfd", "poll"])
def test_a_worker_dies_with_its_batch_whoever_its_parent_is(how):
    """Batch workers are children of the fork server, not of the batch: they watch the batch
    itself, through a pidfd or, on kernels without, by polling."""
    batch = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(batch.pid), how],
        stdout=subprocess.PIPE,
        text=True,
        env=tool_env(),
    )
    try:
        assert worker.stdout.readline().strip() == "watching"
        assert worker.poll() is None
        batch.kill()
        batch.wait()
        assert worker.wait(timeout=20) == -signal.SIGKILL
    finally:
        for process in (batch, worker):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_a_worker_whose_batch_is_gone_ends_at_once_even_if_its_pid_was_reused():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    reused = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the batch's pid now names another process (a start time that is not the batch's)
        for pid, started in ((gone.pid, "1"), (reused.pid, "1")):
            worker = subprocess.run(
                [sys.executable, "-c", WATCHER, str(pid), "pidfd", started],
                capture_output=True,
                text=True,
                env=tool_env(),
                timeout=60,
            )
            assert worker.returncode == -signal.SIGKILL, worker.stderr
            assert "watching" not in worker.stdout
    finally:
        reused.kill()
        reused.wait()
