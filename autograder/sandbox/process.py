"""The parent's side of one sandbox: start it, send requests with deadlines, tear it down."""

from __future__ import annotations

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
from pathlib import Path

from autograder.sandbox import isolation
from autograder.sandbox.limits import Limits
from autograder.sandbox.runtime import wire
from autograder.sandbox.supervisor import children_by_parent

RUNTIME_DIR = Path(__file__).with_name("runtime")
SUPERVISOR = Path(__file__).with_name("supervisor.py")
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


def _kill_adopted(known: set[int]) -> None:
    """Kill and reap this process's children that it did not start (adopted orphans)."""
    for _ in range(50):
        strays = _my_children() - known
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


class Sandbox:
    """One child process running under limits; `request` sends one wire frame and waits."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.isolation = isolation.detect()
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
        self.workdir = Path(tempfile.mkdtemp(prefix="attn-grade-sandbox-"))
        runtime = self.workdir / ".runtime"
        runtime.mkdir()
        for name in RUNTIME_FILES:
            shutil.copy(RUNTIME_DIR / name, runtime / name)
        for sub in ("home", "tmp", "mpl"):
            (self.workdir / sub).mkdir()
        fonts = _mpl_font_cache()
        if fonts:
            for cached in fonts.glob("fontlist-*.json"):
                shutil.copy(cached, self.workdir / "mpl" / cached.name)
        request_read, self._request_write = os.pipe()
        self._response_read, response_write = os.pipe()
        self._output_read, output_write = os.pipe()
        config = {
            "argv": [
                sys.executable,
                "-s",
                str(runtime / "child.py"),
                str(request_read),
                str(response_write),
            ],
            "cwd": str(self.workdir),
            "env": self._environment(),
            "pass_fds": [request_read, response_write],
            "output_fd": output_write,
            "rlimits": self.limits.rlimits(),
            "landlock": (
                {"read": isolation.readable_paths(), "write": [str(self.workdir), os.devnull]}
                if self.isolation.landlock_abi
                else None
            ),
        }
        command = [*self.isolation.command_prefix(), sys.executable, "-s", str(SUPERVISOR)]
        _adopt_orphans()
        self._known_children = _my_children()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=output_write,
            pass_fds=(request_read, response_write, output_write),
            start_new_session=True,
            cwd=self.workdir,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )
        self._known_children.add(self.process.pid)
        for fd in (request_read, response_write, output_write):
            os.close(fd)
        self._output_thread = threading.Thread(target=self._collect_output, daemon=True)
        self._output_thread.start()
        self.process.stdin.write((json.dumps(config) + "\n").encode())
        self.process.stdin.flush()
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

    def _environment(self) -> dict[str, str]:
        work = str(self.workdir)
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
            "TMPDIR": f"{work}/tmp",
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
        stdout = self.process.stdout
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
            process.stdin.write(b"kill\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
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
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def request(
        self, header: dict, blobs: list[bytes] = (), *, timeout: float
    ) -> tuple[dict, list[bytes]]:
        """Send one frame and return the child's response; SandboxDied when the child is gone."""
        if self._dead is not None:
            raise self._dead
        deadline = time.monotonic() + timeout
        self._writer.deadline = self._reader.deadline = deadline
        try:
            wire.write_frame(self._writer, header, list(blobs))
            response, out_blobs = wire.read_frame(self._reader, self.limits.message_bytes)
        except TimeoutError:
            self._die("timeout", f"no answer within {timeout:g} s")
        except (EOFError, BrokenPipeError, OSError):
            self._die(*self._cause_of_death())
        except (wire.ProtocolError, RecursionError) as error:
            self._die("crashed", f"the notebook broke the grading channel ({error})")
        return response, out_blobs

    def _die(self, status: str, detail: str):
        if self._dead is None:
            self._dead = SandboxDied(status, detail)
        self._kill()
        raise self._dead

    def _cause_of_death(self) -> tuple[str, str]:
        event = self._supervisor_event(5.0) or {}
        if self._output_thread is not None:
            self._output_thread.join(timeout=2)
        if self._dead is not None:
            return self._dead.status, self._dead.detail
        code = event.get("exit_code")
        tail = self.output_tail()
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
