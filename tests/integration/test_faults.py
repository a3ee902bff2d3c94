"""Faults injected into running batches (reliability round 1): a fault of the grader's
environment never becomes a student's grade, a stop never loses work, and after every fault the
same command run again ends with the grades of an unfaulted run, nothing lost or duplicated.

Each test copies one small course (three ex1 notebooks: the reference, a catalogued mistake, a
blank one) and stops its batch at a known step (ATTN_GRADE_STOP_AT) to inject the fault."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3

import pytest

from autograder.core import faults
from tests.support.batch_faults import (
    EXERCISE,
    Batch,
    Graded,
    assert_converged,
    assert_whole,
    autograded_report,
    graded,
    run,
)
from tests.support.built_once import built_once
from tests.support.nbgrader_helpers import attn_grade, submission_text

pytestmark = [pytest.mark.slow, pytest.mark.ex1]
STUDENTS = ("alice", "bob", "carol")
EXIT_ENVIRONMENT = 5


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    def build(folder):
        course = folder / "course"
        built = attn_grade("build", EXERCISE, "--course", str(course))
        assert built.returncode == 0, built.stderr
        release = course / "release" / EXERCISE / f"{EXERCISE}.ipynb"
        for student in STUDENTS:
            path = course / "submitted" / student / EXERCISE / f"{EXERCISE}.ipynb"
            path.parent.mkdir(parents=True)
            path.write_text(submission_text(release, EXERCISE, student))

    return built_once(tmp_path_factory, "faults-course", build) / "course"


@pytest.fixture(scope="module")
def unfaulted(template, tmp_path_factory):
    """The course graded by one batch that nothing disturbed, and what it holds."""
    course = shutil.copytree(template, tmp_path_factory.mktemp("unfaulted") / "course")
    code, err = run(course)
    assert code == 0, err
    assert_whole(course)
    return course, graded(course)


def copy(course, tmp_path, name="course"):
    return shutil.copytree(course, tmp_path / name)


def test_a_failed_write_is_retried_and_never_becomes_the_students_grade(
    template, unfaulted, tmp_path
):
    """Finding 1: bob's autograded folder cannot be made (a file stands where it goes: it fails
    for root too) for the whole run; on top, the first placement of a graded folder and each
    worker's first nbgrader step fail once with EIO (transient: retried, graded)."""
    course = copy(template, tmp_path)
    blocked = course / "autograded" / "bob"
    blocked.parent.mkdir()
    blocked.write_text("not a folder")
    env = {faults.FAIL_VARIABLE: "place:1,autograde:1"}
    code, err = run(course, env=env)
    assert code == EXIT_ENVIRONMENT, err
    assert "Traceback" not in err
    now = graded(course)
    assert set(now.rows) == set(now.scores) == {"alice", "carol"}, "bob: not graded, no 0"
    said = [line for line in err.splitlines() if line.startswith("attn-grade autograde: bob/")]
    said = [line for line in said if "not graded" in line]
    assert len(said) == 1, err
    assert str(blocked) in said[0] and "Not a directory" in said[0], said
    assert "run the same command again" in err
    assert_whole(course)

    blocked.unlink()  # the fault is gone: the same command grades bob, and only bob
    code, err = run(course)
    assert code == 0, err
    assert "2 of 3 submissions are already graded" in err
    assert_converged(course, unfaulted[1])


def test_killed_workers_are_replaced_and_their_submissions_graded(unfaulted, template, tmp_path):
    """Finding 4: at the first result one worker is killed, at the second the fork server and
    every worker; the batch goes on with new workers and grades everyone in the same run."""
    course = copy(template, tmp_path)
    batch = Batch.start(course, stop_at="merge:1,merge:2")
    batch.wait_stopped()
    victims = batch.workers()
    assert len(victims) == 2, victims
    os.kill(victims[0], signal.SIGKILL)
    batch.go_on()
    batch.wait_stopped()
    for pid in [*batch.fork_servers(), *batch.workers()]:
        os.kill(pid, signal.SIGKILL)
    batch.go_on()
    code = batch.finish()
    assert code == 0, batch.err
    assert "BrokenProcessPool" not in batch.err and "Traceback" not in batch.err
    assert "died" in batch.err, "the requeue is said"
    assert not batch.left_in_tmpdir() and not batch.orphans()
    assert_converged(course, unfaulted[1])
    code, err = run(course)  # the same command again: nothing to do
    assert code == 0 and "3 of 3 submissions are already graded" in err, err


STOPS = [
    pytest.param(signal.SIGTERM, False, (), "merge:1", id="sigterm"),
    pytest.param(signal.SIGINT, False, ("--force",), "merge:1", id="sigint-force"),
    pytest.param(signal.SIGINT, True, ("--force",), "merge:1", id="ctrl-c-force"),
    # one process, stopped inside nbgrader's step (which catches KeyboardInterrupt)
    pytest.param(signal.SIGTERM, False, ("--workers", "1"), "autograde:2", id="sigterm-nbgrader"),
]


@pytest.mark.parametrize(("signum", "group", "extra", "point"), STOPS)
def test_a_stopped_batch_keeps_what_it_graded_and_the_rerun_converges(
    unfaulted, template, tmp_path, signum, group, extra, point
):
    """Findings 2 and 5: a batch stopped at its first result (by SIGTERM, by SIGINT to it alone
    during a --force regrade of a graded course, by Ctrl-C to its whole process group), or in
    the middle of nbgrader's step, says so in one line and exits 128+signal; no graded
    submission loses its autograded notebook; no scratch, temp folder or process is left; the
    same command run again converges."""
    source = unfaulted[0] if "--force" in extra else template
    course = copy(source, tmp_path)
    batch = Batch.start(course, *extra, stop_at=point)
    batch.wait_stopped()
    if group:  # what Ctrl-C does: the whole foreground process group
        os.killpg(batch.process.pid, signum)
    else:
        os.kill(batch.process.pid, signum)
    batch.go_on()
    code = batch.finish()
    assert code == 128 + signum, batch.err
    assert "Traceback" not in batch.err and "KeyboardInterrupt" not in batch.err
    stopped = [line for line in batch.err.splitlines() if "stopped by" in line]
    assert len(stopped) == 1 and signal.Signals(signum).name in stopped[0], batch.err
    assert "run the same command again" in stopped[0]
    assert not batch.left_in_tmpdir(), batch.left_in_tmpdir()
    assert not batch.orphans()
    assert_whole(course)
    for student in graded(course).rows:
        assert autograded_report(course, student) is not None, student

    code, err = run(course, *extra)
    assert code == 0, err
    assert_converged(course, unfaulted[1], once=not extra)


def stale(course, student: str, score: float) -> None:
    """The gradebook says `score` for the student's every graded cell (a restored old backup)."""
    db = sqlite3.connect(course / "gradebook.db")
    db.execute(
        "update grade set auto_score = ? where auto_score is not null and notebook_id in ("
        "select n.id from submitted_notebook n join submitted_assignment s on "
        "n.assignment_id = s.id where s.student_id = ?)",
        (score, student),
    )
    db.commit()
    db.close()


def test_a_gradebook_that_disagrees_with_the_audit_log_is_found_and_regraded(unfaulted, tmp_path):
    """Finding 3: bob's scores set to 0 and carol's raised to 1 a cell (an old backup, an
    edit): `verify` says DIFFERENT and names the gradebook; `autograde` regrades exactly those
    two and the course converges."""
    course = copy(unfaulted[0], tmp_path)
    stale(course, "bob", 0.0)
    stale(course, "carol", 1.0)
    verified = attn_grade("verify", "--course", str(course), "--student", "bob")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    (line,) = [line for line in verified.stdout.splitlines() if line.startswith("bob ")]
    assert "DIFFERENT" in line and "gradebook" in line, line
    code, err = run(course)
    assert code == 0, err
    assert "1 of 3 submissions are already graded" in err
    assert_converged(course, unfaulted[1], once=False)
    verified = attn_grade("verify", "--course", str(course), "--student", "carol")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("size", [0, 8192, "half"])
def test_an_unreadable_gradebook_is_named_with_the_environment_code(unfaulted, tmp_path, size):
    """Finding 3 and 5: a gradebook cut short (or emptied) is a failure of the environment, with
    the file named in one line, from `autograde` and from `verify` (which said `same`)."""
    course = copy(unfaulted[0], tmp_path)
    gradebook = course / "gradebook.db"
    length = gradebook.stat().st_size // 2 if size == "half" else size
    with open(gradebook, "r+b") as handle:
        handle.truncate(length)
    if size == 0:
        gradebook.write_bytes(b"garbage" * 100)
    for command in (("autograde",), ("verify", "--student", "bob")):
        done = attn_grade(*command, "--course", str(course))
        assert done.returncode == EXIT_ENVIRONMENT, (command, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(gradebook) in lines[0], (command, done.stderr)


def test_the_graded_course_is_the_reference(unfaulted) -> None:
    """The reference run itself: everyone graded once, alice 8, bob between, carol 0."""
    _course, reference = unfaulted
    assert isinstance(reference, Graded)
    assert reference.records == dict.fromkeys(STUDENTS, 1)
    assert reference.scores["alice"] == 8 and reference.scores["carol"] == 0
    assert 0 < reference.scores["bob"] < 8
