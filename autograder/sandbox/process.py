"""The parent's side of one sandbox: start it, send requests with deadlines, tear it down."""

from __future__ import annotations

import atexit
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from autograder.sandbox import cgroups, identity, isolation, jail
from autograder.sandbox.inside import wire
from autograder.sandbox.inside.supervisor import children_by_parent, descendants
from autograder.sandbox.limits import Limits

RUNTIME_DIR = Path(__file__).with_name("inside")  # everything that runs in the child's process
SUPERVISOR = RUNTIME_DIR / "supervisor.py"
SECCOMP = RUNTIME_DIR / "seccomp.py"  # loaded by the supervisor from beside it
RUNTIME_FILES = ("child.py", "wire.py", "probes.py")


PR_SET_CHILD_SUBREAPER = 36


def _my_children() -> set[int]:
    """Pids whose parent is this process, read from /proc."""
    return set(children_by_parent().get(os.getpid(), []))


@functools.cache
def _adopt_orphans() -> None:
    """Make this process a child subreaper: processes of a sandbox whose supervisor was killed
    (possible only without namespaces and Landlock's signal scoping) are re-parented here
    instead of to init, so that close() can still find and kill them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


# The supervisors of every sandbox this process has running: a sandbox's close() kills the
# children it adopted, never a neighbour's supervisor (two sandboxes in one process: a Dask
# worker with several threads, a test).
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def _kill_adopted(known: set[int]) -> None:
    """Kill and reap this process's children that it did not start (adopted orphans)."""
    for _ in range(50):
        with _RUNNING_LOCK:
            strays = _my_children() - known - _RUNNING
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


class SandboxDied(Exception):
    """The child is gone. `status` is one of: timeout, memory, crashed, output_limit, file_size."""

    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


class _DeadlineReader:
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


class _DeadlineWriter:
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


def _mpl_font_cache() -> Path | None:
    """A matplotlib font cache built once by the parent and copied into each sandbox, so the
    child does not spend seconds (and stderr warnings) building its own."""
    cache = Path(tempfile.gettempdir()) / f"attn-grade-mplcache-{os.getuid()}"
    if not list(cache.glob("fontlist-*.json")):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-s", "-c", "import matplotlib.font_manager"],
            env={**os.environ, "MPLCONFIGDIR": str(cache)},
            capture_output=True,
            timeout=120,
        )
    found = list(cache.glob("fontlist-*.json"))
    return cache if found else None


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attn-grade-spawner")


def _spawn(command: list[str], **kwargs) -> subprocess.Popen:
    """Popen from one long-lived thread. bubblewrap's --die-with-parent (PR_SET_PDEATHSIG)
    fires when the *thread* that forked it ends, and sandboxes are started from short-lived
    threads (the background start); this thread lives as long as the process."""
    return _SPAWNER.submit(lambda: subprocess.Popen(command, **kwargs)).result()


RUNTIME_PREFIX = "attn-grade-runtime-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_runtime_roots(folder: Path) -> None:
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
def _jail_runtime_root() -> Path:
    folder = Path(tempfile.gettempdir())
    _sweep_runtime_roots(folder)
    root = Path(tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-", dir=folder))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _jail_runtime() -> Path:
    """A read-only copy of the runtime (and the files bubblewrap copies into the jail), made
    once per grading process and bound at /opt/attn-grade: the jail never sees the package."""
    root = _jail_runtime_root()
    if not (root / "supervisor.py").exists():
        for name in RUNTIME_FILES:
            shutil.copy(RUNTIME_DIR / name, root / name)
        shutil.copy(SUPERVISOR, root / "supervisor.py")
        shutil.copy(SECCOMP, root / "seccomp.py")
        fonts = _mpl_font_cache()
        for cached in fonts.glob("fontlist-*.json") if fonts else ():
            shutil.copy(cached, root / cached.name)
        for path in root.iterdir():
            path.chmod(0o644)
        root.chmod(0o755)
    return root


def _jail_files(uid: int) -> dict[str, str]:
    """Jail path -> file name in the jail runtime dir, for bubblewrap's --file copies."""
    root = _jail_runtime()
    files = {}
    for dest, content in jail.passwd_files(uid).items():
        name = f"{Path(dest).name}-{uid}"
        if not (root / name).exists():
            (root / name).write_bytes(content)
        files[dest] = name
    for cached in root.glob("fontlist-*.json"):
        files[f"{jail.WORK_MOUNT}/mpl/{cached.name}"] = cached.name
    return files


def _cpu_for(uid: int | None) -> int:
    """The CPU a sandbox without a cgroup is pinned to: spread over the allowed CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    key = uid if uid is not None else os.getpid()
    return cpus[key % len(cpus)]


class Sandbox:
    """One child process running under limits; `request` sends one wire frame and waits."""

    def __init__(self, limits: Limits | None = None, level: isolation.Isolation | None = None):
        self.limits = limits or Limits()
        self.isolation = level or isolation.choose()
        self._uid: identity.SandboxUid | None = None
        self._group: cgroups.Group | None = None
        self._pending_event: dict | None = None
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None
        self._output = bytearray()
        self._output_total = 0
        self._output_thread: threading.Thread | None = None
        self._dead: SandboxDied | None = None
        self._known_children: set[int] | None = None
        self.landlock_abi = 0

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        iso = self.isolation
        self._uid = identity.acquire() if iso.separate_uid else None
        child_uid = self._uid.uid if self._uid else None
        request_read, self._request_write = os.pipe()
        self._response_read, response_write = os.pipe()
        self._output_read, output_write = os.pipe()
        file_fds: list[int] = []
        if iso.jail:
            runtime = _jail_runtime()
            inside_uid = child_uid if child_uid is not None else jail.SANDBOX_USER_ID
            files = {dest: runtime / name for dest, name in _jail_files(inside_uid).items()}
            file_fds = [os.open(path, os.O_RDONLY | os.O_CLOEXEC) for path in files.values()]
            work, script_dir = Path(jail.WORK_MOUNT), jail.RUNTIME_MOUNT
            command = jail.command(
                roots=isolation.python_roots(),
                hidden=isolation.hidden_paths(),
                runtime_dir=runtime,
                files=dict(zip(files, file_fds, strict=True)),
                work_bytes=self.limits.work_bytes,
                unprivileged=os.geteuid() != 0,
                argv=[sys.executable, "-s", "-I", f"{script_dir}/supervisor.py"],
            )
            # the jail's /proc is its own (pid and network namespaces): all of it is the child's
            readable = [*isolation.python_roots(), *isolation.SYSTEM_READ, "/proc", script_dir]
            readable += jail.ETC_FILES + tuple(jail.passwd_files(inside_uid))
            writable = [str(work), "/tmp", os.devnull]
            listable = []  # hidden packages are masked by empty directories
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="attn-grade-sandbox-"))
            work = self.workdir
            runtime = self.workdir / ".runtime"
            runtime.mkdir()
            for name in RUNTIME_FILES:
                shutil.copy(RUNTIME_DIR / name, runtime / name)
            for sub in jail.WORK_SUBDIRS:
                (self.workdir / sub).mkdir()
            fonts = _mpl_font_cache()
            if fonts:
                for cached in fonts.glob("fontlist-*.json"):
                    shutil.copy(cached, self.workdir / "mpl" / cached.name)
            script_dir = str(runtime)
            command = [sys.executable, "-s", "-I", str(SUPERVISOR)]
            readable, writable = isolation.readable_paths(), [str(work), os.devnull]
            listable = isolation.listable_paths()
        config = {
            "argv": [
                sys.executable,
                "-s",
                f"{script_dir}/child.py",
                str(request_read),
                str(response_write),
            ],
            "cwd": str(work),
            "env": self._environment(work, "/tmp" if iso.jail else f"{work}/tmp"),
            "pass_fds": [request_read, response_write],
            "output_fd": output_write,
            "rlimits": self.limits.rlimits(),
            "uid": child_uid,
            "own": [str(work)] if child_uid is not None else [],
            "cpu": None if iso.cgroup else _cpu_for(child_uid),
            # a root supervisor outside the jail gives the child an empty network namespace
            "unshare_net": not iso.jail and os.geteuid() == 0,
            "landlock": (
                {"read": readable, "write": writable, "list": listable}
                if iso.landlock_abi
                else None
            ),
        }
        _adopt_orphans()
        _RUNNING_LOCK.acquire()  # spawned and registered before any neighbour's close() looks
        self._known_children = _my_children()
        try:
            self.process = _spawn(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=output_write,
                pass_fds=(request_read, response_write, output_write, *file_fds),
                start_new_session=True,
                cwd=self.workdir or "/",
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            )
            _RUNNING.add(self.process.pid)
        finally:
            _RUNNING_LOCK.release()
            for fd in (request_read, response_write, output_write, *file_fds):
                os.close(fd)
        self._known_children.add(self.process.pid)
        self._output_thread = threading.Thread(target=self._collect_output, daemon=True)
        self._output_thread.start()
        if iso.cgroup:
            self._group = cgroups.Group.create(
                iso.cgroup,
                memory_bytes=self.limits.group_memory_bytes,
                processes=self.limits.group_processes,
                cpus=self.limits.cpus,
            )
            self._join_group(self._group)
        stdin = self._stdin()
        stdin.write((json.dumps(config) + "\n").encode())
        stdin.flush()
        self._reader = _DeadlineReader(self._response_read)
        self._writer = _DeadlineWriter(self._request_write)
        started = self._supervisor_event(self.limits.start_timeout)
        if not started or started.get("event") != "started":
            self._dead = SandboxDied("crashed", "the sandbox did not start: " + self.output_tail())
            self.close()
            raise self._dead
        self.pid = started["pid"]
        self.landlock_abi = started.get("landlock", 0)
        self.request({"op": "ping"}, timeout=self.limits.start_timeout)

    def _stdin(self) -> IO[bytes]:
        if self.process is None or self.process.stdin is None:
            raise SandboxDied("crashed", "the sandbox's supervisor is not running")
        return self.process.stdin

    def _stdout(self) -> IO[bytes]:
        if self.process is None or self.process.stdout is None:
            raise SandboxDied("crashed", "the sandbox's supervisor is not running")
        return self.process.stdout

    def _join_group(self, group: cgroups.Group) -> None:
        """Move the supervisor's whole tree (bubblewrap forks before it reads its config) into
        the sandbox's cgroup; the child is started only after this, so all it starts inherits."""
        if self.process is None:
            raise SandboxDied("crashed", "the sandbox's supervisor is not running")
        for _ in range(100):
            tree = [self.process.pid, *descendants(self.process.pid)]
            outside = [pid for pid in tree if not group.contains(pid)]
            if not outside:
                return
            for pid in outside:
                try:
                    group.add(pid)
                except OSError:
                    pass  # exited meanwhile
        raise SandboxDied("crashed", "could not move the sandbox into its cgroup")

    def _environment(self, work: Path, tmp: str) -> dict[str, str]:
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

    def _collect_output(self) -> None:
        keep = 64 << 10
        while True:
            try:
                chunk = os.read(self._output_read, 65536)
            except OSError:
                return
            if not chunk:
                return
            self._output_total += len(chunk)
            self._output += chunk
            if len(self._output) > keep:
                del self._output[: len(self._output) - keep]
            if self._output_total > self.limits.output_bytes and self._dead is None:
                self._dead = SandboxDied(
                    "output_limit",
                    f"the notebook printed more than {self.limits.output_bytes} bytes",
                )
                self._kill()

    def output_tail(self, size: int = 2000) -> str:
        return bytes(self._output[-size:]).decode("utf-8", "replace")

    def _supervisor_event(self, timeout: float) -> dict | None:
        stdout = self._stdout()
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            return None
        line = stdout.readline()
        try:
            return json.loads(line) if line else None
        except ValueError:
            return None

    def _kill(self) -> None:
        """Ask the supervisor to kill the tree; if it does not exit, kill its process group."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            stdin = self._stdin()
            stdin.write(b"kill\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError, SandboxDied):
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    @property
    def alive(self) -> bool:
        return self._dead is None and self.process is not None and self.process.poll() is None

    def close(self) -> None:
        """Kill every process of the sandbox and remove its working directory."""
        if self.process is not None:
            self._kill()
            for stream in (self.process.stdin, self.process.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self._output_thread is not None:
            self._output_thread.join(timeout=5)
        for fd in ("_request_write", "_response_read", "_output_read"):
            number = getattr(self, fd, None)
            if number is not None:
                try:
                    os.close(number)
                except OSError:
                    pass
                setattr(self, fd, None)
        if self._known_children is not None:
            _kill_adopted(self._known_children)
            self._known_children = None
        if self.process is not None:
            with _RUNNING_LOCK:
                _RUNNING.discard(self.process.pid)
        if self._group is not None:
            self._group.remove()
            self._group = None
        if self._uid is not None:
            identity.kill_processes_of(self._uid.uid)
            self._uid.release()
            self._uid = None
        if self.workdir is not None:
            remove_tree(self.workdir)
            self.workdir = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def request(
        self, header: dict, blobs: Sequence[bytes] = (), *, timeout: float
    ) -> tuple[dict, list[bytes]]:
        """Send one frame and return the child's response; SandboxDied when the child is gone."""
        if self._dead is not None:
            raise self._dead
        deadline = time.monotonic() + timeout
        self._writer.deadline = self._reader.deadline = deadline
        try:
            wire.write_frame(self._writer, header, list(blobs))
            response, out_blobs = wire.read_frame(
                self._reader, self.limits.message_bytes, self.limits.header_bytes
            )
            self._reap()
        except TimeoutError:
            self._die("timeout", f"no answer within {timeout:g} s")
        except (EOFError, BrokenPipeError, OSError):
            self._die(*self._cause_of_death())
        except (wire.ProtocolError, RecursionError) as error:
            self._die("crashed", f"the notebook broke the grading channel ({error})")
        return response, out_blobs

    def _reap(self) -> None:
        """Kill whatever the request left running beside the child (background processes):
        nothing a request started outlives it. The supervisor answers `reaped`."""
        try:
            stdin = self._stdin()
            stdin.write(b"reap\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError, SandboxDied):
            raise EOFError from None
        event = self._supervisor_event(10.0)
        if not event or event.get("event") != "reaped":
            self._pending_event = event
            raise EOFError

    def _die(self, status: str, detail: str):
        if self._dead is None:
            self._dead = SandboxDied(status, detail)
        self._kill()
        raise self._dead

    def _cause_of_death(self) -> tuple[str, str]:
        event = self._pending_event or self._supervisor_event(5.0) or {}
        if self._output_thread is not None:
            self._output_thread.join(timeout=2)
        if self._dead is not None:
            return self._dead.status, self._dead.detail
        code = event.get("exit_code")
        tail = self.output_tail()
        if self._group is not None and self._group.oom_killed():
            limit = self.limits.group_memory_bytes >> 20
            return "memory", f"out of memory (the submission's processes used over {limit} MiB)"
        if code is None:
            return "crashed", "the sandbox stopped unexpectedly"
        if code < 0:
            signame = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            if -code == signal.SIGXCPU or (-code == signal.SIGKILL and "CPU" in tail):
                return "timeout", f"the CPU time limit ({self.limits.cpu_seconds} s) was reached"
            if -code == signal.SIGXFSZ:
                return "file_size", "a file larger than the file size limit was written"
            if any(word in tail for word in ("MemoryError", "bad_alloc", "allocate memory")):
                return "memory", f"out of memory (killed by {signame})"
            return "crashed", f"the process was killed by {signame}"
        return "crashed", f"the notebook ended the grading process (exit code {code})"
