"""The grader-side plumbing of sandboxes: the runtime files copied into a jail, orphans adopted
and killed, pipes with deadlines, processes spawned from one long-lived thread."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import functools
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.sandbox import jail
from autograder.sandbox.inside.supervisor import children_by_parent, stat_fields

RUNTIME_DIR = Path(__file__).with_name("inside")  # everything that runs in the child's process
SUPERVISOR = RUNTIME_DIR / "supervisor.py"
SECCOMP = RUNTIME_DIR / "seccomp.py"  # loaded by the supervisor from beside it
TEMPLATE = RUNTIME_DIR / "template.py"  # the warm start's template (sandbox/warm.py)
RUNTIME_FILES = (
    "child.py",
    "wire.py",
    "probes.py",
    "failures.py",
    "shell.py",
    "trusted.py",
    "module_probes.py",
    "numpy_only.py",
    "remote.py",
    "display.py",
)


PR_SET_CHILD_SUBREAPER = 36


def _my_children() -> set[int]:
    """Pids whose parent is this process, read from /proc."""
    return set(children_by_parent().get(os.getpid(), []))


@functools.cache
def adopt_orphans() -> None:
    """Make this process a child subreaper: processes of a sandbox whose supervisor was killed
    (possible only without namespaces and Landlock's signal scoping) are re-parented here
    instead of to init, so that close() can still find and kill them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


# The supervisors of every sandbox this process has running: a sandbox's close() kills the
# children it adopted, never a neighbour's supervisor (two sandboxes in one process: a Dask
# worker with several threads, a test).
RUNNING: set[int] = set()
RUNNING_LOCK = threading.Lock()


def kill_adopted(known: set[int]) -> None:
    """Kill and reap this process's children that it did not start (adopted orphans)."""
    for _ in range(50):
        with RUNNING_LOCK:
            strays = _my_children() - known - RUNNING
        if not strays:
            return
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def remove_tree(path: Path) -> None:
    """Remove a sandbox's work dir whatever the notebook left there (thousands of nested
    directories, no permissions): coreutils' rm walks without recursion limits."""
    for attempt in range(2):
        subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if not os.path.lexists(path) or attempt:
            return
        subprocess.run(
            ["chmod", "-R", "u+rwX", "--", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )


class DeadlineReader:
    """File-like `read(n)` over a pipe fd that gives up at a deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.deadline = float("inf")

    def read(self, count: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([self.fd], [], [], remaining)
        if not ready:
            raise TimeoutError
        return os.read(self.fd, min(count, 1 << 20))


class DeadlineWriter:
    def __init__(self, fd: int):
        self.fd = fd
        self.deadline = float("inf")
        os.set_blocking(fd, False)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            _, ready, _ = select.select([], [self.fd], [], remaining)
            if ready:
                try:
                    view = view[os.write(self.fd, view[: 1 << 20]) :]
                except BlockingIOError:
                    continue

    def flush(self) -> None:
        pass


FONT_BUILD_SECONDS = 120  # for the interpreter that builds matplotlib's font list
FONT_LOCK_SECONDS = FONT_BUILD_SECONDS + 10  # a lock held longer than a build is not waited for


@functools.cache
def mpl_font_files() -> dict[str, bytes]:
    """matplotlib's font list (fontlist-*.json: name -> content), built once by the parent and
    written into each sandbox, so the child does not spend seconds (and stderr warnings)
    building its own. Built in a folder only this user can reach: a folder of that name that
    someone else made (or a link) is not used, and only plain files of ours are read, never
    through a link (a planted link made a root grader copy root-only files into every
    sandbox)."""
    cache = _private_dir(Path(tempfile.gettempdir()) / f"attn-grade-mplcache-{os.getuid()}")
    found = _font_lists(cache)
    if found:
        return found
    # one build per folder: processes that start together (a batch's workers, with a fresh
    # $TMPDIR) wait for the first one's instead of each building its own (1-2 CPU-s apiece)
    with _build_lock(cache):
        found = _font_lists(cache)
        if not found:
            _build_font_lists(cache)
            found = _font_lists(cache)
    return found


def _build_font_lists(cache: Path) -> None:
    """matplotlib's font list built in a fresh folder of `cache` and moved into it whole
    (os.replace): a process that reads `cache` meanwhile, or after a build was killed halfway,
    never finds a list half-written."""
    build = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    try:
        subprocess.run(
            [sys.executable, "-s", "-c", "import matplotlib.font_manager"],
            env={**os.environ, "MPLCONFIGDIR": str(build)},
            capture_output=True,
            timeout=FONT_BUILD_SECONDS,
        )
        for built in build.glob("fontlist-*.json"):
            os.replace(built, cache / built.name)
    except subprocess.TimeoutExpired:
        pass  # no list: the children build their own, as before
    finally:
        shutil.rmtree(build, ignore_errors=True)


@contextlib.contextmanager
def _build_lock(cache: Path) -> Iterator[None]:
    """An exclusive flock on `cache`/.build-lock (the folder is ours, 0700: `_private_dir`),
    released when the build ends or its process dies. Never through a link; where the lock
    cannot be had, or is held past a build's timeout, the build goes on without it."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    try:
        fd = os.open(cache / ".build-lock", flags, 0o600)
    except OSError:
        yield
        return
    info = os.fstat(fd)
    if not (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()):  # not our lock file
        os.close(fd)
        yield
        return
    try:
        deadline = time.monotonic() + FONT_LOCK_SECONDS
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.05)
            except OSError:
                break
        yield
    finally:
        os.close(fd)  # releases the lock


def _private_dir(path: Path) -> Path:
    """`path` if it is a folder of ours (not a link) that no one else could write into, made
    one that no one else may enter, else a fresh one. Graders before 0.2.9 made it with
    mkdir's default mode (0755): it is closed (0700) and used, not passed over, which made
    every grading process of such a host build a font list of its own (1-2 CPU-s each). One
    that others could write into (0775, 0777) may hold anything (a FIFO that blocks a read, a
    folder where a file should be) and is passed over as before."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # a link, or not a folder
        fd = -1
    if fd >= 0:
        try:
            info = os.fstat(fd)
            # a folder others could write into (0775, 0777) may hold anything: never used
            if (
                stat.S_ISDIR(info.st_mode)
                and info.st_uid == os.getuid()
                and not info.st_mode & 0o022
            ):
                if info.st_mode & 0o077:
                    os.fchmod(fd, 0o700)
                return path
        finally:
            os.close(fd)
    fresh = Path(tempfile.mkdtemp(prefix="attn-grade-mplcache-"))
    atexit.register(shutil.rmtree, fresh, ignore_errors=True)
    return fresh


def _font_lists(cache: Path) -> dict[str, bytes]:
    found = {}
    for entry in os.scandir(cache):
        if not (entry.name.startswith("fontlist-") and entry.name.endswith(".json")):
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
        try:
            fd = os.open(entry.path, flags)  # O_NONBLOCK: a FIFO does not block the open
        except OSError:
            continue  # a link, or gone
        try:
            info = os.fstat(fd)
            if not (
                stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and info.st_nlink == 1
            ):
                continue  # a folder, FIFO, socket, someone else's file, a hard link
            with os.fdopen(os.dup(fd), "rb") as handle:
                content = handle.read(64 << 20)
        except OSError:
            continue
        finally:
            os.close(fd)
        if _whole_json(content):  # not one cut short (an older grader's killed build)
            found[entry.name] = content
    return found


def _whole_json(content: bytes) -> bool:
    try:
        return isinstance(json.loads(content), dict)
    except ValueError:
        return False


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attn-grade-spawner")


def spawn(command: list[str], **kwargs) -> subprocess.Popen:
    """Popen from one long-lived thread. bubblewrap's --die-with-parent (PR_SET_PDEATHSIG)
    fires when the *thread* that forked it ends, and sandboxes are started from short-lived
    threads (the background start); this thread lives as long as the process."""
    return _SPAWNER.submit(lambda: subprocess.Popen(command, **kwargs)).result()


RUNTIME_PREFIX = "attn-grade-runtime-"


def _pid_alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (a killed worker its pool has not reaped yet) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return stat_fields(f"/proc/{pid}/stat")[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def sweep_runtime_roots(folder: Path) -> None:
    """Remove the runtime copies of grading processes that were killed (atexit never ran):
    ours (same owner, not a symlink) whose process is gone."""
    for path in folder.glob(f"{RUNTIME_PREFIX}*-*"):
        pid = path.name[len(RUNTIME_PREFIX) :].split("-", 1)[0]
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if not pid.isdigit() or info.st_uid != os.getuid() or path.is_symlink():
            continue
        if not _pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


@functools.cache
def jail_runtime_root() -> Path:
    folder = Path(tempfile.gettempdir())
    sweep_runtime_roots(folder)
    root = Path(tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-", dir=folder))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def jail_runtime() -> Path:
    """A read-only copy of the runtime (and the files bubblewrap copies into the jail), made
    once per grading process and bound at /opt/attn-grade: the jail never sees the package."""
    root = jail_runtime_root()
    if not (root / "supervisor.py").exists():  # written last: a copy cut short is made again
        for name in RUNTIME_FILES:
            shutil.copy(RUNTIME_DIR / name, root / name)
        shutil.copy(SECCOMP, root / "seccomp.py")
        shutil.copy(TEMPLATE, root / "template.py")
        for name, content in mpl_font_files().items():
            (root / name).write_bytes(content)
        for path in root.iterdir():
            path.chmod(0o644)
        root.chmod(0o755)
        shutil.copy(SUPERVISOR, root / ".supervisor.py")
        (root / ".supervisor.py").chmod(0o644)
        os.replace(root / ".supervisor.py", root / "supervisor.py")
    return root


def jail_files(uid: int) -> dict[str, str]:
    """Jail path -> file name in the jail runtime dir, for bubblewrap's --file copies."""
    root = jail_runtime()
    files = {}
    for dest, content in jail.passwd_files(uid).items():
        name = f"{Path(dest).name}-{uid}"
        if not (root / name).exists():
            (root / name).write_bytes(content)
        files[dest] = name
    for cached in root.glob("fontlist-*.json"):
        files[f"{jail.WORK_MOUNT}/mpl/{cached.name}"] = cached.name
    return files


def cpu_for(uid: int | None) -> int:
    """The CPU a sandbox without a cgroup is pinned to: spread over the allowed CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    key = uid if uid is not None else os.getpid()
    return cpus[key % len(cpus)]


def child_environment(work: Path, tmp: str) -> dict[str, str]:
    """The child's whole environment: nothing of the grader's, one thread for every math library."""
    single_thread = {
        name: "1"
        for name in (
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "NUMEXPR_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS",
        )
    }
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": f"{work}/home",
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUNBUFFERED": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{work}/mpl",
        **single_thread,
    }
