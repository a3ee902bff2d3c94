"""The batch's parts that keep a fault from becoming a grade (reliability round 1): what counts as
a failure of the environment, the bounded retry, the placement of an autograded folder, the
requeue of a dead worker's submissions, the stop on a signal, and the temp folders of killed
batches. The end-to-end faults are in tests/integration/test_faults.py."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from autograder.batch import retry, scratch
from autograder.batch.dispatch import MAX_ATTEMPTS, Dispatcher
from autograder.batch.stops import Stopped, StopSignals
from autograder.batch.table import Submitted
from autograder.core import faults
from autograder.core.errors import EnvironmentFailure, environment_cause


def database_error(kind: str = "OperationalError", text: str = "database is locked"):
    import sqlalchemy.exc

    return getattr(sqlalchemy.exc, kind)("SELECT 1", {}, sqlite3.OperationalError(text))


def raised_from(cause: BaseException) -> BaseException:
    """An error raised while handling `cause`, as nbgrader's InvalidEntry is."""
    outer = ValueError("InvalidEntry: rolled back")
    outer.__context__ = cause
    return outer


@pytest.mark.parametrize(
    ("error", "environment"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/c/gradebook.db"), True),
        (PermissionError(errno.EACCES, "Permission denied", "/c/autograded/bob"), True),
        (database_error(), True),
        (database_error("DatabaseError", "file is not a database"), True),
        (database_error("InterfaceError", "connection is closed"), True),
        (sqlite3.OperationalError("database or disk is full"), True),
        (raised_from(database_error()), True),  # nbgrader wraps it
        (database_error("IntegrityError", "UNIQUE constraint failed"), False),  # a bug
        (ValueError("a bug"), False),
        (KeyError("a bug"), False),
    ],
)
def test_what_is_a_failure_of_the_environment(error, environment):
    assert (environment_cause(error) is not None) == environment


@pytest.fixture
def no_waiting(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def test_a_transient_failure_is_retried_with_a_bounded_backoff(no_waiting):
    said: list[str] = []
    calls = iter([OSError(errno.EIO, "Input/output error", "/c/x"), database_error(), "done"])

    def action():
        outcome = next(calls)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    assert retry.retrying(action, "writing /c/x", say=said.append) == "done"
    assert no_waiting == list(retry.DELAYS[:2])
    assert len(said) == 2 and "retrying in 0.5 s (attempt 2 of 6)" in said[0]
    assert "Input/output error: /c/x" in said[0]


def test_a_lasting_failure_ends_in_one_line_naming_it(no_waiting):
    def action():
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", "/c/autograded/bob")

    with pytest.raises(EnvironmentFailure) as failure:
        retry.retrying(action, "writing /c/autograded/bob/ex1", delays=(0.5, 1), say=print)
    text = str(failure.value)
    assert "\n" not in text and EnvironmentFailure.exit_code == 5
    assert "writing /c/autograded/bob/ex1 failed (3 attempts over 1.5 s)" in text
    assert "Not a directory: /c/autograded/bob" in text and retry.AGAIN in text
    assert no_waiting == [0.5, 1]


def test_a_gradebook_that_is_not_a_database_and_a_bug_are_not_retried(no_waiting):
    def unreadable():
        raise database_error("DatabaseError", "database disk image is malformed")

    with pytest.raises(EnvironmentFailure, match="malformed; restore it from a backup"):
        retry.retrying(unreadable, "reading the gradebook /c/gradebook.db")

    def bug():
        raise KeyError("x")

    with pytest.raises(KeyError):
        retry.retrying(bug, "anything")
    assert no_waiting == []


def test_a_placed_folder_replaces_the_old_one_or_leaves_it(tmp_path, monkeypatch):
    built, target = tmp_path / "scratch" / "new", tmp_path / "ag" / "bob" / "ex1"
    trash = tmp_path / "t"
    built.mkdir(parents=True)
    (built / "ex1.ipynb").write_text("new")
    target.mkdir(parents=True)
    (target / "ex1.ipynb").write_text("old")
    scratch.place(built, target, trash)
    assert (target / "ex1.ipynb").read_text() == "new" and not built.exists()
    assert not any(trash.iterdir())

    again = tmp_path / "scratch" / "again"
    again.mkdir()

    def refused(source, destination):
        if Path(source) == again:
            raise OSError(errno.EIO, "Input/output error", str(source))
        os.replace(source, destination)

    monkeypatch.setattr(os, "rename", refused)
    with pytest.raises(OSError):
        scratch.place(again, target, trash)
    assert (target / "ex1.ipynb").read_text() == "new", "the old folder is back"

    scratch.place(None, target, trash)  # nbgrader made none: none is left beside new grades
    assert not target.exists()


def test_a_file_where_the_students_folder_goes_is_named(tmp_path):
    (tmp_path / "ag").mkdir()
    (tmp_path / "ag" / "bob").write_text("")
    with pytest.raises(NotADirectoryError) as failure:
        scratch.place(None, tmp_path / "ag" / "bob" / "ex1", tmp_path / "t")
    assert failure.value.filename == str(tmp_path / "ag" / "bob")


class FakeWorkers:
    count = 2

    def __init__(self, broken: int = 0) -> None:
        self.generation = 0
        self.futures: list[Future] = []
        self.broken = broken  # pools that refuse work (a worker died since the last look)

    def submit(self, _call, *args) -> Future:
        if self.broken > self.generation:
            raise BrokenProcessPool("A child process terminated abruptly")
        future: Future = Future()
        future.args = args  # type: ignore[attr-defined]
        self.futures.append(future)
        return future

    def renew(self) -> None:
        self.generation += 1


def test_a_dead_workers_submissions_are_handed_out_again_then_given_up(capsys):
    items = [Submitted("ex1", student, Path(student)) for student in ("alice", "bob", "carol")]
    done, failed = [], []
    workers = FakeWorkers()
    dispatcher = Dispatcher(workers, None, lambda i, r: done.append((i.student, r)),
                            lambda i, why, env: failed.append((i.student, why, env)))  # fmt: skip
    for item in items:
        dispatcher.add(item, item.student)
    assert [f.args for f in workers.futures] == [("alice",), ("bob",)], "one per worker"
    workers.futures[0].set_result("graded")
    workers.futures[1].set_exception(BrokenProcessPool("a worker died"))
    dispatcher.pump(block=True)
    assert done == [("alice", "graded")] and workers.generation == 1
    assert sorted(f.args for f in workers.futures[2:]) == [("bob",), ("carol",)]
    assert "a new worker grades it again (attempt 2 of 3)" in capsys.readouterr().err
    for _ in range(MAX_ATTEMPTS - 1):  # bob is running each time a pool breaks
        bob = next(f for f in workers.futures if f.args == ("bob",) and not f.done())
        bob.set_exception(BrokenProcessPool("again"))
        dispatcher.pump(block=True)
    carol = next(f for f in workers.futures if f.args == ("carol",) and not f.done())
    carol.set_exception(RuntimeError("a check module is broken"))
    dispatcher.drain()
    assert failed == [
        ("bob", f"a worker process died {MAX_ATTEMPTS} times while grading it", True),
        ("carol", "worker failed (RuntimeError: a check module is broken)", False),
    ]


@pytest.fixture
def sigint_default():
    """SIGINT as at a terminal (a run started in the background by a script ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_pool_broken_between_two_looks_is_replaced_and_one_that_cannot_start_is_said():
    item = Submitted("ex1", "alice", Path("alice"))
    workers = FakeWorkers(broken=1)
    dispatcher = Dispatcher(workers, None, lambda i, r: None, lambda i, why, env: None)
    dispatcher.add(item, "alice")
    assert workers.generation == 1 and [f.args for f in workers.futures] == [("alice",)]
    dispatcher = Dispatcher(FakeWorkers(broken=5), None, None, None)
    with pytest.raises(EnvironmentFailure, match="worker processes cannot be started"):
        dispatcher.add(item, "alice")


def test_a_stop_waits_for_the_submission_being_recorded(sigint_default):
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stops:
        with pytest.raises(Stopped) as stop:
            with stops.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                recorded = True  # the block runs to its end
        assert recorded and stop.value.signum == signal.SIGTERM and stop.value.name == "SIGTERM"
    with StopSignals(), pytest.raises(Stopped):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # interrupted at once
    assert signal.getsignal(signal.SIGTERM) == before, "the handlers are given back"


def test_a_signal_the_batch_was_started_ignoring_stays_ignored(sigint_default):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # `nohup attn-grade autograde &` in a script
    with StopSignals():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_temp_folders_of_killed_batches_are_removed_and_only_theirs(tmp_path, monkeypatch):
    import multiprocessing.util
    import subprocess
    import sys
    import tempfile

    from autograder.batch import pool, recorder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / "pymp-mine"
    mine.mkdir()
    monkeypatch.setattr(multiprocessing.util, "get_temp_dir", lambda: str(mine))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    folders = {name: tmp_path / f"pymp-{name}" for name in ("killed", "reused", "live", "other")}
    for folder in folders.values():
        folder.mkdir()
        (folder / "listener-1").write_text("")
    (folders["killed"] / pool.MARK).write_text(f"{gone.stdout.strip()} 1")
    (folders["reused"] / pool.MARK).write_text(f"{os.getpid()} 1")  # its pid, now another's
    live = recorder.batch_identity()
    (folders["live"] / pool.MARK).write_text(f"{live[0]} {live[1]}")
    assert pool.claim_temp_dir() == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pymp-live", "pymp-mine", "pymp-other"]
    assert (mine / pool.MARK).read_text() == f"{live[0]} {live[1]}"


def test_fault_points_count_each_variable_and_may_persist(monkeypatch):
    monkeypatch.setattr(faults, "_reached", faults.Counter())
    monkeypatch.setenv(faults.FAIL_VARIABLE, "place:2,audit:2+")
    outcomes = []
    for point in ("place", "place", "place", "audit", "audit", "audit"):
        try:
            faults.reach(point)
            outcomes.append("ok")
        except OSError as error:
            assert error.errno == errno.EIO
            outcomes.append("fail")
    assert outcomes == ["ok", "fail", "ok", "ok", "fail", "fail"]


POOLS_THEN_EXIT = """
import multiprocessing, os, sys
from concurrent.futures import ProcessPoolExecutor
from autograder.batch.pool import end_fork_server_at_exit

context = multiprocessing.get_context("forkserver")
context.set_forkserver_preload(["slow_exit"])
end_fork_server_at_exit()
end_fork_server_at_exit()  # a second batch in the same process: one hook
first = ProcessPoolExecutor(1, mp_context=context)
second = ProcessPoolExecutor(1, mp_context=context)
first.submit(os.getpid).result()
first.shutdown(wait=True)  # one pool ends; the other starts its worker after that
print(second.submit(os.getpid).result() != os.getpid())
second.shutdown(wait=True)
print(multiprocessing.forkserver._forkserver._forkserver_pid)
"""


def test_the_fork_server_ends_with_the_batch_and_serves_its_pools_until_then(tmp_path):
    """A fork server outlives its batch until it has torn down what it loaded (about 1.3 s
    with torch, holding the batch's stderr); it is killed when the batch exits, never as one
    pool of the process ends (another pool may still need it)."""
    import subprocess
    import sys

    from autograder.sandbox.inside.supervisor import stat_fields

    (tmp_path / "slow_exit.py").write_text("import atexit, time\natexit.register(time.sleep, 60)\n")
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root])}
    done = subprocess.run(
        [sys.executable, "-c", POOLS_THEN_EXIT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    started, server = done.stdout.split()
    assert started == "True", "the second pool started its worker after the first ended"
    try:
        state = stat_fields(f"/proc/{server}/stat")[0]
    except FileNotFoundError:
        state = b"gone"
    try:
        assert state in (b"gone", b"Z"), "the fork server outlived its batch"
    finally:
        if state not in (b"gone", b"Z"):
            os.kill(int(server), signal.SIGKILL)
