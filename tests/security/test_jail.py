"""The jail and the per-submission accounting, probed from inside a sandbox as a hostile
notebook would: what it can see, read, connect to and signal, and what is left after it."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from autograder.core.errors import IsolationError
from autograder.grading.submission import ProgramCell, StudentError, Submission
from autograder.sandbox import cgroups, isolation, jail, plumbing
from autograder.sandbox.limits import Limits

DETECTED = isolation.detect()
needs_jail = pytest.mark.skipif(not DETECTED.jail, reason="bubblewrap cannot run here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs a root grader")
needs_cgroups = pytest.mark.skipif(not cgroups.detect(), reason="no writable cgroups here")

TRY = """
import os, socket
def attempt(kind, target):
    try:
        if kind == "read":
            return "read " + open(target, "rb").read(64).decode("latin-1")
        if kind == "list":
            return "listed " + ",".join(sorted(os.listdir(target)))
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX)
            s.connect(target)
            return "connected"
        if kind == "abstract":
            s = socket.socket(socket.AF_UNIX)
            s.connect("\\0" + target)
            return "connected"
        if kind == "tcp":
            socket.create_connection(("127.0.0.1", int(target)), timeout=2)
            return "connected"
        if kind == "udp":
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("192.0.2.1", 9))
            return "sent"
        if kind == "import":
            __import__(target)
            return "imported"
        if kind == "kill":
            os.kill(int(target), 0)
            return "signalled"
    except Exception as error:
        return "refused " + type(error).__name__
def whoami():
    return [os.getuid(), os.getgid(), os.getcwd()]
"""


@pytest.fixture(scope="module")
def hostile():
    with Submission([ProgramCell("cell 1", TRY)]) as submission:
        yield submission


def refused(submission, kind, target) -> bool:
    return submission.call("attempt", kind, str(target)).startswith("refused")


@needs_jail
def test_the_jail_shows_no_host_filesystem(hostile, tmp_path):
    (tmp_path / "notes.txt").write_text("another student's work")
    for path in ["/home", "/root", "/run", "/var", "/srv", "/etc/hostname", "/etc/passwd-"]:
        assert refused(hostile, "list" if not path.startswith("/etc/") else "read", path), path
    assert refused(hostile, "read", tmp_path / "notes.txt")
    # the project checkout (and its course): at most the directories leading to a bound venv
    listed = hostile.call("attempt", "list", str(Path.cwd()))
    assert not {"autograder", "reference", "assignments", "tests"} & set(listed[7:].split(","))
    assert refused(hostile, "read", Path.cwd() / "pyproject.toml")
    for hidden in isolation.hidden_paths():
        assert refused(hostile, "list", hidden)
        assert refused(hostile, "read", hidden / "__init__.py")
    assert refused(hostile, "import", "autograder")
    assert refused(hostile, "import", "autograder._reference.ex1_numpy_attention")
    assert hostile.call("attempt", "import", "torch") == "imported"
    assert hostile.call("attempt", "import", "matplotlib.pyplot") == "imported"


def test_root_only_files_cannot_be_read(hostile, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only")
    secret.chmod(0o600)
    assert refused(hostile, "read", secret)
    if os.path.exists("/etc/shadow"):
        assert refused(hostile, "read", "/etc/shadow")


def test_host_unix_sockets_cannot_be_reached(hostile, tmp_path):
    path = tmp_path / "host.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0attn-grade-test-{os.getpid()}")
    abstract.listen()
    listener.setblocking(False)
    abstract.setblocking(False)
    try:
        assert refused(hostile, "unix", path)
        assert refused(hostile, "abstract", f"attn-grade-test-{os.getpid()}")
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()  # nothing ever connected
    finally:
        listener.close()
        abstract.close()


def test_no_network(hostile):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        assert refused(hostile, "tcp", server.getsockname()[1])
        assert refused(hostile, "udp", "")
    finally:
        server.close()


def test_the_grader_cannot_be_signalled(hostile):
    assert refused(hostile, "kill", os.getpid())


@needs_root
def test_a_root_grader_runs_the_child_under_a_uid_of_its_own(hostile):
    uid, gid, _ = hostile.call("whoami")
    assert uid not in (0, os.getuid()) and gid != 0


@needs_jail
def test_hidden_packages_inside_a_bound_root_are_masked(tmp_path):
    """A wheel install puts `autograder` and `reference` in site-packages, which the jail
    binds: they are covered by empty read-only directories."""
    prefix = tmp_path / "site-packages"
    (prefix / "reference").mkdir(parents=True)
    (prefix / "reference" / "answers.py").write_text("SECRET = 1\n")
    (prefix / "numpyish").mkdir()
    (prefix / "numpyish" / "ok.py").write_text("fine\n")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    argv = jail.command(
        roots=[str(prefix)],
        hidden=[prefix / "reference"],
        runtime_dir=runtime,
        files={},
        work_bytes=1 << 20,
        unprivileged=os.geteuid() != 0,
        argv=["/bin/sh", "-c", f"cat {prefix}/numpyish/ok.py; ls -A {prefix}/reference | wc -l"],
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fine", "0"]


def test_background_processes_do_not_outlive_their_request():
    spawn = (
        "import subprocess, sys\n"
        "def spawn():\n"
        "    for _ in range(4):\n"
        "        subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
        "def alive():\n"
        "    import os\n"
        "    found = 0\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            stat = open(f'/proc/{pid}/stat').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        if 'while True' in open(f'/proc/{pid}/cmdline').read() and ') Z ' not in stat:\n"
        "            found += 1\n"
        "    return found\n"
    )
    with Submission([ProgramCell("cell 1", spawn)]) as submission:
        submission.call("spawn")
        assert submission.call("alive") == 0


HEADLESS = """
import os, platform, subprocess, sys, time
EXIT_THREAD = {"x86_64": 60, "aarch64": 93}[platform.machine()]  # SYS_exit: this thread only
CODE = (
    "import ctypes, threading, time\\n"
    "threading.Thread(target=time.sleep, args=(600,)).start()\\n"
    f"ctypes.CDLL(None).syscall({EXIT_THREAD}, 0)\\n"
)
def states(pid):
    found = []
    for task in sorted(os.listdir(f"/proc/{pid}/task")) if os.path.exists(f"/proc/{pid}") else ():
        try:
            found.append(open(f"/proc/{pid}/task/{task}/stat").read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return found
def zombies_and_headless():
    done = subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for: a zombie
    headless = subprocess.Popen([sys.executable, "-c", CODE])
    for _ in range(100):
        time.sleep(0.1)
        if states(done.pid) == ["Z"] and states(headless.pid)[:1] == ["Z"]:
            break
    return done.pid, headless.pid, states(done.pid), states(headless.pid)
def live_tasks(pid):
    return [state for state in states(pid) if state not in ("Z", "X")]
"""


def live_tasks_of(states: list[str]) -> list[str]:
    return [state for state in states if state not in ("Z", "X")]


def test_a_zombie_leader_with_running_threads_is_killed_with_its_request():
    """The reap passes over zombies (they are dead already), but not over a process whose
    main thread exited while its other threads run: /proc shows its leader as a zombie."""
    with Submission([ProgramCell("cell 1", HEADLESS)]) as submission:
        zombie, headless, zombie_states, headless_states = submission.call("zombies_and_headless")
        assert zombie_states == ["Z"]
        assert headless_states[0] == "Z" and live_tasks_of(headless_states), headless_states
        assert submission.call("live_tasks", headless) == []
        assert submission.call("live_tasks", zombie) == []


@needs_cgroups
def test_one_cgroup_limits_all_processes_of_a_submission():
    # The child holds torch from its start (the trusted probe references): ~250 MiB of its own
    # (a warm child maps it from its template, whose pages are charged to the template: less).
    # Two 400 MiB hogs fit beside it under 768 MiB only one at a time; the group's OOM killer
    # picks the largest process, a hog.
    limits = Limits(group_memory_bytes=768 << 20, group_processes=32)
    hog = (
        "import subprocess, sys\n"
        "def hog():\n"
        "    code = 'x = bytearray(400 << 20); import time; time.sleep(10)'\n"
        "    procs = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(3)]\n"
        "    return [p.wait() for p in procs]\n"
        "def forks():\n"
        "    import os\n"
        "    made = 0\n"
        "    try:\n"
        "        for _ in range(200):\n"
        "            if os.fork() == 0:\n"
        "                import time; time.sleep(30); os._exit(0)\n"
        "            made += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "    return made\n"
    )
    with Submission([ProgramCell("cell 1", hog)], limits=limits) as submission:
        group = submission.start() or submission.sandbox._group
        assert group is not None
        quota = group.paths[-1] / ("cpu.max" if group.version == "v2" else "cpu.cfs_quota_us")
        assert quota.read_text().split()[0] == str(cgroups.PERIOD_US)  # one core
        codes = submission.call("hog", timeout=60)
        assert any(code == -9 for code in codes)  # the group's OOM killer, not the rlimit
        assert submission.call("forks") < 32


def test_requesting_an_unavailable_level_is_an_error(monkeypatch):
    monkeypatch.setattr(isolation, "_probe_level", lambda level: None)
    isolation._choose.cache_clear()  # a level an earlier test in this process chose
    try:
        with pytest.raises(IsolationError, match="not available"):
            isolation.choose("jail")
    finally:
        isolation._choose.cache_clear()


def test_refuses_by_default_when_hidden_files_would_be_readable(monkeypatch):
    weak = isolation.Isolation("rlimits", 0, "")
    monkeypatch.setattr(isolation, "detect", lambda: weak)
    monkeypatch.setattr(isolation, "_probe_level", lambda level: weak)
    monkeypatch.delenv(isolation.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.delenv(isolation.TRUSTED_CODE_VARIABLE, raising=False)
    isolation._choose.cache_clear()
    try:
        with pytest.raises(IsolationError, match=isolation.TRUSTED_CODE_VARIABLE):
            isolation.choose()
        isolation._choose.cache_clear()
        with pytest.raises(IsolationError, match="hidden checks"):  # explicit: still refused
            isolation.choose("rlimits")
        isolation._choose.cache_clear()
        monkeypatch.setenv(isolation.TRUSTED_CODE_VARIABLE, "1")  # not a student's code
        assert isolation.choose("rlimits").explicit
    finally:
        isolation._choose.cache_clear()


def test_the_level_is_named_in_the_refusal_and_recorded():
    assert isolation.choose().describe()
    assert DETECTED.level in isolation.LEVELS


def test_student_error_text_is_bounded():
    flood = "def boom():\n    raise ValueError('x' * 100000)\n"
    with Submission([ProgramCell("cell 1", flood)]) as submission:
        with pytest.raises(StudentError) as raised:
            submission.call("boom")
        assert len(str(raised.value)) < 2500


def test_runtime_copies_of_killed_graders_are_swept(tmp_path, monkeypatch):
    """A grader killed with SIGKILL leaves its runtime copy; the next grader removes it, and
    never a live grader's copy or a stranger's file."""
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = tmp_path / f"{plumbing.RUNTIME_PREFIX}{dead.stdout.strip()}-abc"
    live = tmp_path / f"{plumbing.RUNTIME_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{plumbing.RUNTIME_PREFIX}notapid-ghi"
    for folder in (gone, live, other):
        folder.mkdir()
        (folder / "child.py").write_text("x")
    plumbing.sweep_runtime_roots(tmp_path)
    assert not gone.exists()
    assert live.exists() and other.exists()
