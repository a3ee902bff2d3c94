"""Warm starts: each sandbox's supervisor forked from a template that has the child's runtime,
NumPy, PyTorch and matplotlib imported (sandbox/inside/template.py), so that no submission
pays about 1.4 s of CPU to import them, with the isolation of a cold start.

One template per grading process and kind of sandbox (in the jail, or not), started with the
first sandbox that needs it, kept while the process lives and replaced when it dies. It runs as
the grader (root: `Isolation.warm`), in the jail exactly as a cold supervisor is started there.
It never runs student code and is sent nothing but file descriptors: each sandbox's
configuration goes from here to that sandbox's supervisor, on its own stdin, as for a cold one.
docs/security.md "Warm starts" has the security argument.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from autograder.sandbox import isolation, jail
from autograder.sandbox.inside.supervisor import stat_fields
from autograder.sandbox.plumbing import (
    RUNNING,
    RUNNING_LOCK,
    child_environment,
    jail_files,
    jail_runtime,
    mpl_font_files,
    spawn,
)

READY_TIMEOUT = 120.0  # seconds for a template to import torch (more on a loaded machine)
FORK_TIMEOUT = 30.0  # seconds for a template to fork a supervisor
MAX_FAILURES = 3  # templates that failed in one process before it starts every sandbox cold
UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


class TemplateFailed(RuntimeError):
    """The template could not start or fork a supervisor: the sandbox starts cold."""


class WarmSupervisor:
    """A supervisor forked by a template, for `Sandbox` as a subprocess.Popen would be: its
    stdin and stdout pipes, its pid (as this process sees it), poll() and wait()."""

    def __init__(self, pid: int, stdin: int, stdout: int):
        self.pid = pid
        self.stdin: IO[bytes] | None = os.fdopen(stdin, "wb")
        self.stdout: IO[bytes] | None = os.fdopen(stdout, "rb")
        self.returncode: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # gone already, or a kernel without pidfds (before 5.3): /proc then
            self._pidfd = None

    def _exited(self, timeout: float) -> bool:
        if self._pidfd is not None:
            return bool(select.select([self._pidfd], [], [], timeout)[0])
        deadline = time.monotonic() + timeout
        while True:
            try:
                if stat_fields(f"/proc/{self.pid}/stat")[0] in (b"Z", b"X"):
                    return True
            except (OSError, IndexError):
                return True
            if time.monotonic() >= deadline:
                return False
            select.select([], [], [], 0.01)

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0):
            self.returncode = -1  # its exit status is the template's to collect
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._exited(1e9 if timeout is None else timeout):
                raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout or 0)
            self.returncode = -1
        return self.returncode

    def release(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class Template:
    """One template process and the socket to it."""

    def __init__(self, in_jail: bool, optimizers: bool = False):
        self.in_jail = in_jail
        self.optimizers = optimizers  # it has loaded what torch.optim's first optimizer loads
        self.pid = 0  # the template's pid as this process sees it (in the jail: not bwrap's)
        self.process: subprocess.Popen | None = None
        self.home: Path | None = None  # the work dir of a template outside the jail
        self._lock = threading.Lock()  # one fork request at a time
        self._errors = bytearray()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._socket: socket.socket | None = ours
        try:
            self._start(theirs)
        except BaseException:
            self.close()
            raise
        finally:
            theirs.close()

    def _start(self, theirs: socket.socket) -> None:
        runtime = jail_runtime()
        python = [sys.executable, "-s"]
        file_fds: list[int] = []
        if self.in_jail:
            names = jail_files(jail.SANDBOX_USER_ID)
            files = {dest: runtime / name for dest, name in names.items()}
            file_fds = [os.open(path, os.O_RDONLY | os.O_CLOEXEC) for path in files.values()]
            command = jail.command(
                roots=isolation.python_roots(),
                hidden=isolation.hidden_paths(),
                runtime_dir=runtime,
                files=dict(zip(files, file_fds, strict=True)),
                work_bytes=64 << 20,
                unprivileged=False,
                argv=[*python, f"{jail.RUNTIME_MOUNT}/template.py", *self._arguments(theirs)],
                environment=child_environment(Path(jail.WORK_MOUNT), "/tmp"),
            )
            cwd, env = "/", {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        else:
            self.home = Path(tempfile.mkdtemp(prefix="attn-grade-template-"))  # 0700, root's
            for sub in jail.WORK_SUBDIRS:
                (self.home / sub).mkdir()
            for name, content in mpl_font_files().items():
                (self.home / "mpl" / name).write_bytes(content)
            command = [*python, str(runtime / "template.py"), *self._arguments(theirs)]
            cwd, env = str(self.home), child_environment(self.home, f"{self.home}/tmp")
        with RUNNING_LOCK:  # never taken for an orphan by a sandbox's close() (kill_adopted)
            try:
                self.process = spawn(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    pass_fds=(theirs.fileno(), *file_fds),
                    start_new_session=True,
                    cwd=cwd,
                    env=env,
                )
                RUNNING.add(self.process.pid)
            finally:
                for fd in file_fds:
                    os.close(fd)
                # the template has its end now: with ours the only one left here, a template that
                # dies while it starts is EOF at once (it used to be READY_TIMEOUT, 120 s, later)
                theirs.close()
        threading.Thread(target=self._collect_errors, daemon=True).start()
        message, pid = self._receive(READY_TIMEOUT)
        if not message.get("ready"):
            raise TemplateFailed(f"the template did not start: {self.errors()}")
        self.pid = pid

    def _arguments(self, theirs: socket.socket) -> list[str]:
        return [str(theirs.fileno()), *(["optimizers"] if self.optimizers else [])]

    def _collect_errors(self) -> None:
        stream = self.process.stderr if self.process is not None else None
        while stream is not None:
            chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
            if not chunk:
                return
            self._errors += chunk
            del self._errors[:-4000]

    def errors(self) -> str:
        return bytes(self._errors).decode("utf-8", "replace").strip()[-2000:] or "(no output)"

    def _receive(self, timeout: float) -> tuple[dict, int]:
        """The next message and its sender's pid, as the kernel tells it."""
        channel = self._socket
        if channel is None or not select.select([channel], [], [], timeout)[0]:
            raise TemplateFailed(f"the template did not answer within {timeout:g} s")
        data, ancillary, _, _ = channel.recvmsg(4096, socket.CMSG_SPACE(UCRED.size))
        if not data:
            raise TemplateFailed(f"the template ended: {self.errors()}")
        sender = 0
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = UCRED.unpack(payload[: UCRED.size])[0]
        try:
            message = json.loads(data)
        except ValueError:
            raise TemplateFailed("the template answered something else than JSON") from None
        return (message if isinstance(message, dict) else {}), sender

    @property
    def alive(self) -> bool:
        return self._socket is not None and self.process is not None and self.process.poll() is None

    def fork(self, fds: list[tuple[int, int]]) -> int:
        """Have the template fork a supervisor holding `fds` ((its number, our fd) pairs) and
        no other; its pid as this process sees it. TemplateFailed when none was forked."""
        with self._lock:
            channel = self._socket
            if channel is None or not self.alive:
                raise TemplateFailed(f"the template is gone: {self.errors()}")
            header = json.dumps({"fds": [target for target, _ in fds]}).encode()
            numbers = struct.pack(f"{len(fds)}i", *[fd for _, fd in fds])
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, numbers)]
            try:
                channel.sendmsg([header], rights)
                message, pid = self._receive(FORK_TIMEOUT)
            except OSError as error:
                raise TemplateFailed(f"the template's socket failed: {error}") from None
            if "forked" not in message:
                raise TemplateFailed(f"the template could not fork: {message.get('error')}")
            if not pid or _parent_of(pid) != self.pid:
                raise TemplateFailed("the fork answer did not come from a child of the template")
            return pid

    def abandon(self) -> None:
        """No more requests: EOF, the template exits (it is no longer `alive`)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def close(self) -> None:
        self.abandon()
        process = self.process
        if process is not None:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            with RUNNING_LOCK:
                RUNNING.discard(process.pid)
            self.process = None
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


def _parent_of(pid: int) -> int:
    try:
        return int(stat_fields(f"/proc/{pid}/stat")[1])
    except (OSError, ValueError, IndexError):
        return 0


# -- one template per process and kind of sandbox ------------------------------------------
_TEMPLATES: dict[bool, Template] = {}  # in the jail or not -> its template
_REGISTRY = threading.Lock()
_FAILED: list[str] = []  # why templates failed in this process


def template_for(level: isolation.Isolation, optimizers: bool = False) -> Template | None:
    """This process's template for sandboxes at `level`, started (or replaced, if it died) now;
    None when they start cold: `level.warm` is off, or templates failed here MAX_FAILURES
    times (each failure is logged). `optimizers`: a template started now also loads what the
    first torch.optim optimizer of a process loads (a running one is used as it is; one that
    replaces it keeps its choice)."""
    if not level.warm or len(_FAILED) >= MAX_FAILURES:
        return None
    with _REGISTRY:
        template = _TEMPLATES.get(level.jail)
        if template is not None and template.alive:
            return template
        if template is not None:
            optimizers = optimizers or template.optimizers
            discard(template)
        try:
            template = Template(level.jail, optimizers)
        except (TemplateFailed, OSError) as error:
            _failed(f"a template could not start ({error}); this sandbox starts cold")
            return None
        _TEMPLATES[level.jail] = template
        return template


def start_early(level: isolation.Isolation, optimizers: bool = False) -> None:
    """Start this process's template for `level` in the background, now: a grading process
    that knows it will grade starts it before its own imports of torch, nbgrader and the checks,
    which then overlap the template's (a second or two each, on another CPU) instead of coming
    before them. The first sandbox waits for it in `template_for` (the registry's lock); a
    template that fails here is logged and the next `template_for` tries again, as ever.
    `optimizers`: the batch grades an exercise that trains (`Exercise.trains`)."""
    if not level.warm:
        return

    def start() -> None:
        try:
            template_for(level, optimizers)
        except Exception as error:  # noqa: BLE001 - the sandbox's own start tries again
            _failed(f"a template could not start early ({type(error).__name__}: {error})")

    threading.Thread(target=start, name="attn-grade-template-start", daemon=True).start()


def start_supervisor(template: Template, output: int, child_fds: list[int]) -> WarmSupervisor:
    """A supervisor forked from `template`: its stdin and stdout are pipes to this process (in
    the returned WarmSupervisor), its stderr is `output`, and `child_fds` keep their numbers.
    TemplateFailed (the template is abandoned, and replaced next time) when none was had."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        pid = template.fork(
            [(0, stdin_read), (1, stdout_write), (2, output), *[(fd, fd) for fd in child_fds]]
        )
    except TemplateFailed as error:
        for fd in (stdin_write, stdout_read):
            os.close(fd)
        _failed(f"the template failed ({error}); the sandbox starts cold")
        template.abandon()  # replaced by the next template_for() (the caller holds locks)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    return WarmSupervisor(pid, stdin_write, stdout_read)


def discard(template: Template) -> None:
    """Close `template` and forget it (the caller holds _REGISTRY)."""
    for key, held in list(_TEMPLATES.items()):
        if held is template:
            del _TEMPLATES[key]
    template.close()


def _failed(why: str) -> None:
    import logging

    _FAILED.append(why)
    logging.getLogger("attn_grade").warning("%s", why)


def close_all() -> None:
    with _REGISTRY:
        for template in list(_TEMPLATES.values()):
            discard(template)


def _forget_in_child() -> None:
    """A forked process (a batch worker from the fork server) has no template of its own yet:
    the parent's socket copies are closed here (the parent keeps its own) and forgotten."""
    global _REGISTRY
    _REGISTRY = threading.Lock()
    for template in _TEMPLATES.values():
        if template._socket is not None:
            template._socket.close()
            template._socket = None
        template.process = None
        template.home = None
    _TEMPLATES.clear()


atexit.register(close_all)
os.register_at_fork(after_in_child=_forget_in_child)
