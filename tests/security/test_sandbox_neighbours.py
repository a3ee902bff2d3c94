"""Sandboxes side by side never touch each other: one process holding two (a Dask worker with
several threads), two graders with different $TMPDIRs, a uid a killed grader left processes
under. Each test would fail on the code before its fix (a neighbour's close() killed every
later child of the process; the uid slots lived under $TMPDIR; a freed uid was handed out
with the dead grader's processes still running under it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from autograder.sandbox import identity, isolation, sweep
from autograder.sandbox.process import Sandbox

pytestmark = pytest.mark.ex1

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 and os.environ.get("CI") != "true",
    reason="sandbox uids are handed out to a root grader only",
)


def ping(sandbox: Sandbox) -> dict:
    return sandbox.request({"op": "ping"}, timeout=30)[0]


def test_closing_a_sandbox_leaves_a_later_neighbour_in_the_same_process_running():
    first = Sandbox()
    first.start()
    second = Sandbox()
    second.start()  # started after the first: a child the first did not know of
    try:
        first.close()
        assert second.alive
        assert ping(second)  # it still answers
    finally:
        first.close()
        second.close()


def test_sandboxes_of_threads_closing_in_turn_leave_the_others_answering():
    count = 4
    started = threading.Barrier(count)
    turns = [threading.Event() for _ in range(count + 1)]
    turns[0].set()
    answers, problems = [], []

    def one(index: int) -> None:
        try:
            with Sandbox() as sandbox:
                started.wait(timeout=120)  # every sandbox is running
                turns[index].wait(timeout=120)  # those before this one have closed
                answers.append(ping(sandbox))
        except Exception as error:  # noqa: BLE001 - reported below
            problems.append(f"sandbox {index}: {error!r}")
        finally:
            turns[index + 1].set()

    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not problems
    assert len(answers) == count


def test_the_uid_slots_do_not_depend_on_tmpdir(tmp_path):
    code = "from autograder.sandbox import identity; print(identity.lock_directory())"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "TMPDIR": str(folder)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for folder in (tmp_path, tmp_path / "other")
        if folder.mkdir(exist_ok=True) is None
    }
    assert len(seen) == 1
    assert str(tmp_path) not in seen.pop()


def test_a_lock_directory_someone_else_made_is_refused(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / identity.LOCK_NAME).symlink_to(tmp_path)  # a planted link
    monkeypatch.setattr(identity, "LOCK_PARENTS", (theirs, mine))
    assert identity.lock_directory() == mine / identity.LOCK_NAME
    monkeypatch.setattr(identity, "LOCK_PARENTS", (theirs,))
    with pytest.raises(RuntimeError, match="lock"):
        identity.lock_directory()


@needs_root
@pytest.mark.parametrize("dumpable", [True, False], ids=["dumpable", "not-dumpable"])
def test_a_uid_is_handed_out_with_nothing_running_under_it(dumpable):
    """A grader killed with SIGKILL frees its uid slot at once; what ran under the uid must not
    meet the next submission graded under it, even a process that made itself not dumpable
    (its /proc entry is then root's: found by the owner of /proc/PID alone, it was missed)."""
    # the uid acquire() hands out next in this process (a sandbox this worker keeps open, such
    # as the suite's shared one, holds the first slot it would have looked at)
    probe = identity.acquire(sweep.clean)
    uid, slot = probe.uid, probe.uid - identity.FIRST_UID
    probe.release()
    hide = "" if dumpable else "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "  # PR_SET_DUMPABLE
    script = (
        f"import ctypes, os, time; os.setgroups([]); os.setresgid({uid}, {uid}, {uid}); "
        f"os.setresuid({uid}, {uid}, {uid}); {hide}print('ready', flush=True); time.sleep(300)"
    )
    leftover = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert leftover.stdout.readline().strip() == "ready"
        assert identity.processes_of(uid) == [leftover.pid]
        held = identity.acquire(sweep.clean)
        try:
            if held.uid != uid:
                pytest.fail(f"slot {slot} was taken by a concurrent grader; rerun")
            assert leftover.wait(timeout=10) == -signal.SIGKILL
            assert identity.processes_of(uid) == []
        finally:
            held.release()
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()


@pytest.fixture
def restored_isolation(monkeypatch):
    """grade_on_worker sets the level for its process: put it back, and forget the levels
    chosen meanwhile, so later tests in this process see what they would have seen."""
    monkeypatch.delenv(isolation.ENVIRONMENT_VARIABLE, raising=False)
    yield
    isolation._choose.cache_clear()


@pytest.mark.usefixtures("restored_isolation")
def test_two_gradings_in_threads_of_one_process_equal_serial_ones(tmp_path):
    """What a Dask worker started with several threads does: the gradings of one process are
    taken one at a time, and each equals the same grading done alone."""
    import nbformat

    from autograder.audit.digest import checks_digest
    from autograder.batch.dask_cluster import grade_on_worker
    from tests.conftest import source_notebook

    exercise = "ex4_gqa_analysis"
    notebook = nbformat.writes(source_notebook(exercise)).encode()
    level = isolation.choose().level
    serial = grade_on_worker(exercise, "solo", notebook, level, checks_digest(exercise))
    results: dict[str, bytes] = {}

    def grade(student: str) -> None:
        results[student] = grade_on_worker(
            exercise, student, notebook, level, checks_digest(exercise)
        )

    threads = [threading.Thread(target=grade, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)

    def summary(answer: bytes) -> str:  # the task's JSON answer (batch/dask_results.py)
        report = json.loads(answer)["report"]
        checks = [(c["name"], c["passed"], c["max_points"]) for c in report["checks"]]
        return json.dumps([report["status"], checks])

    assert set(results) == {"one", "two"}
    assert {summary(graded) for graded in results.values()} == {summary(serial)}
    assert json.loads(serial)["report"]["status"] == "ok"
