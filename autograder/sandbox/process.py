"""The parent's side of one sandbox: start it, send requests with deadlines, tear it down."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, NoReturn

from autograder.core.errors import GradedOutcome
from autograder.core.status import Status
from autograder.sandbox import cgroups, identity, isolation, places, sweep, warm
from autograder.sandbox.inside import wire
from autograder.sandbox.inside.supervisor import descendants
from autograder.sandbox.limits import Limits
from autograder.sandbox.plumbing import (
    RUNNING,
    RUNNING_LOCK,
    DeadlineReader,
    DeadlineWriter,
    _my_children,
    adopt_orphans,
    child_environment,
    cpu_for,
    kill_adopted,
    remove_tree,
    spawn,
)


class SandboxDied(GradedOutcome):
    """The child is gone. `status` is one of: timeout, memory, crashed, output_limit, file_size."""

    def __init__(self, status: Status, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Sandbox:
    """One child process running under limits; `request` sends one wire frame and waits."""

    def __init__(self, limits: Limits | None = None, level: isolation.Isolation | None = None):
        self.limits = limits or Limits()
        self.isolation = level or isolation.choose()
        self._uid: identity.SandboxUid | None = None
        self._group: cgroups.Group | None = None
        self._pending_event: dict | None = None
        self.warm = False  # forked from a template (sandbox/warm.py) rather than started cold
        self.workdir: Path | None = None
        self.process: subprocess.Popen | warm.WarmSupervisor | None = None
        self.pid: int | None = None
        self._output = bytearray()
        self.output_bytes_used = 0  # what the child printed (its limit: limits.output_bytes)
        self._output_thread: threading.Thread | None = None
        self._dead: SandboxDied | None = None
        self._known_children: set[int] | None = None
        self.landlock_abi = 0
        self._deadlines: list[float] = []  # of the requests in progress, outermost first
        # answers the child's callbacks (stand-ins run by the grader): frame -> reply frame
        self.on_callback: Callable[[dict, list[bytes]], tuple[dict, list[bytes]]] | None = None

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the supervisor and the child: warm (forked from this process's template,
        sandbox/warm.py) where the level allows it, else, or when the template fails, cold."""
        template = warm.template_for(self.isolation)
        if template is not None:
            try:
                self._start(template)
                return
            except warm.TemplateFailed:
                self.close()  # nothing was started: the uid, pipes and work dir go
        self._start(None)

    def _start(self, template: warm.Template | None) -> None:
        iso = self.isolation
        self.warm = template is not None
        self._uid = identity.acquire(sweep.clean) if iso.separate_uid else None
        if self._uid is not None and not iso.jail:  # its child may write outside its work dir
            self._uid.mark_dirty()
        child_uid = self._uid.uid if self._uid else None
        request_read, self._request_write = os.pipe()
        self._response_read, response_write = os.pipe()
        self._output_read, output_write = os.pipe()
        where = places.prepare(iso, self.limits, template is not None, child_uid)
        self.workdir = where.workdir
        work, script_dir, file_fds = where.work, where.script_dir, where.file_fds
        config = {
            "argv": [
                sys.executable,
                "-s",
                f"{script_dir}/child.py",
                str(request_read),
                str(response_write),
            ],
            "cwd": str(work),
            "env": child_environment(work, "/tmp" if iso.jail else f"{work}/tmp"),
            "pass_fds": [request_read, response_write],
            "output_fd": output_write,
            "rlimits": self.limits.rlimits(),
            "uid": child_uid,
            "own": [str(work)] if child_uid is not None else [],
            "cpu": None if iso.cgroup else cpu_for(child_uid),
            # a root supervisor outside the jail gives the child an empty network namespace
            "unshare_net": not iso.jail and os.geteuid() == 0,
            # ... and a /proc in which the processes of other users are invisible
            "private_proc": not iso.jail and child_uid is not None,
            "landlock": (
                {"read": where.readable, "write": where.writable, "list": where.listable}
                if iso.landlock_abi
                else None
            ),
            "fresh": where.fresh,
        }
        adopt_orphans()
        RUNNING_LOCK.acquire()  # spawned and registered before any neighbour's close() looks
        self._known_children = _my_children()
        try:
            if template is not None:
                self.process = warm.start_supervisor(
                    template, output_write, [request_read, response_write, output_write]
                )
            else:
                self.process = spawn(
                    where.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=output_write,
                    pass_fds=(request_read, response_write, output_write, *file_fds),
                    start_new_session=True,
                    cwd=self.workdir or "/",
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
                )
            RUNNING.add(self.process.pid)
        finally:
            RUNNING_LOCK.release()
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
        self._reader = DeadlineReader(self._response_read)
        self._writer = DeadlineWriter(self._request_write)
        started = self._supervisor_event(self.limits.start_timeout)
        if not started or started.get("event") != "started":
            self._dead = SandboxDied(
                Status.CRASHED, "the sandbox did not start: " + self.output_tail()
            )
            self.close()
            raise self._dead
        self.pid = started["pid"]
        self.landlock_abi = started.get("landlock", 0)
        self.request({"op": "ping"}, timeout=self.limits.start_timeout)

    def describe(self) -> str:
        """The isolation level as the results record it, with whether this child was warm."""
        return self.isolation.describe(warm=self.warm)

    def _stdin(self) -> IO[bytes]:
        if self.process is None or self.process.stdin is None:
            raise SandboxDied(Status.CRASHED, "the sandbox's supervisor is not running")
        return self.process.stdin

    def _stdout(self) -> IO[bytes]:
        if self.process is None or self.process.stdout is None:
            raise SandboxDied(Status.CRASHED, "the sandbox's supervisor is not running")
        return self.process.stdout

    def _join_group(self, group: cgroups.Group) -> None:
        """Move the supervisor's whole tree (bubblewrap forks before it reads its config) into
        the sandbox's cgroup; the child is started only after this, so all it starts inherits."""
        if self.process is None:
            raise SandboxDied(Status.CRASHED, "the sandbox's supervisor is not running")
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
        raise SandboxDied(Status.CRASHED, "could not move the sandbox into its cgroup")

    def _collect_output(self) -> None:
        keep = 64 << 10
        while True:
            try:
                chunk = os.read(self._output_read, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output_bytes_used += len(chunk)
            self._output += chunk
            if len(self._output) > keep:
                del self._output[: len(self._output) - keep]
            if self.output_bytes_used > self.limits.output_bytes and self._dead is None:
                self._dead = SandboxDied(
                    Status.OUTPUT_LIMIT,
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
        if self._uid is not None:  # all at once first, where the loops below race a fork bomb
            identity.kill_processes_of(self._uid.uid)
        if self.process is not None:
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
            kill_adopted(self._known_children)
            self._known_children = None
        if self.process is not None:
            with RUNNING_LOCK:
                RUNNING.discard(self.process.pid)
            if isinstance(self.process, warm.WarmSupervisor):
                self.process.release()
        if self._group is not None:
            self._group.remove()
            self._group = None
        if self._uid is not None:
            identity.kill_processes_of(self._uid.uid)
        if self.workdir is not None:  # before the uid is freed (and marked clean)
            remove_tree(self.workdir)
            self.workdir = None
        if self._uid is not None:
            # the jail's /tmp was its own; a sweep that did not finish leaves the slot marked,
            # and the next grader to take it sweeps again or passes it over
            if not self.isolation.jail and sweep.clean(self._uid.uid):
                self._uid.mark_clean()
            self._uid.release()
            self._uid = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def request(
        self, header: dict, blobs: Sequence[bytes] = (), *, timeout: float
    ) -> tuple[dict, list[bytes]]:
        """Send one frame and return the child's response; SandboxDied when the child is gone.

        While the child serves it, it may ask the grader to run a stand-in (a frame with a
        `callback` key): `on_callback` answers each, and may send requests of its own, nested
        in this one and within its deadline."""
        if self._dead is not None:
            raise self._dead
        outer = self._deadlines[-1] if self._deadlines else None
        deadline = time.monotonic() + timeout
        deadline = deadline if outer is None else min(deadline, outer)
        self._deadlines.append(deadline)
        self._writer.deadline = self._reader.deadline = deadline
        try:
            wire.write_frame(self._writer, header, list(blobs))
            response, out_blobs = self._read_answer()
            if outer is None:
                self._reap()
        except TimeoutError:
            self._die(Status.TIMEOUT, f"no answer within {timeout:g} s")
        except (EOFError, BrokenPipeError, OSError):
            self._die(*self._cause_of_death())
        except (wire.ProtocolError, RecursionError) as error:
            self._die(Status.CRASHED, f"the notebook broke the grading channel ({error})")
        finally:
            self._deadlines.pop()
            if self._deadlines:
                self._writer.deadline = self._reader.deadline = self._deadlines[-1]
        return response, out_blobs

    def _read_answer(self) -> tuple[dict, list[bytes]]:
        """The child's answer to the request just sent, serving its callbacks meanwhile."""
        while True:
            frame, blobs = wire.read_frame(
                self._reader, self.limits.message_bytes, self.limits.header_bytes
            )
            if "callback" not in frame:
                return frame, blobs
            refused: tuple[dict, list[bytes]] = ({"reply": True, "ok": False, "error": {}}, [])
            reply = refused if self.on_callback is None else self.on_callback(frame, blobs)
            self._writer.deadline = self._deadlines[-1]
            wire.write_frame(self._writer, *reply)
            self._reader.deadline = self._deadlines[-1]

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

    def _die(self, status: Status, detail: str) -> NoReturn:
        if self._dead is None:
            self._dead = SandboxDied(status, detail)
        self._kill()
        raise self._dead

    def _cause_of_death(self) -> tuple[Status, str]:
        event = self._pending_event or self._supervisor_event(5.0) or {}
        if self._output_thread is not None:
            self._output_thread.join(timeout=2)
        if self._dead is not None:
            return self._dead.status, self._dead.detail
        code = event.get("exit_code")
        tail = self.output_tail()
        if self._group is not None and self._group.oom_killed():
            limit = self.limits.group_memory_bytes >> 20
            return (
                Status.MEMORY,
                f"out of memory (the submission's processes used over {limit} MiB)",
            )
        if code is None:
            return Status.CRASHED, "the sandbox stopped unexpectedly"
        if code < 0:
            signame = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            if -code == signal.SIGXCPU or (-code == signal.SIGKILL and "CPU" in tail):
                return (
                    Status.TIMEOUT,
                    f"the CPU time limit ({self.limits.cpu_seconds} s) was reached",
                )
            if -code == signal.SIGXFSZ:
                return Status.FILE_SIZE, "a file larger than the file size limit was written"
            if any(word in tail for word in ("MemoryError", "bad_alloc", "allocate memory")):
                return Status.MEMORY, f"out of memory (killed by {signame})"
            return Status.CRASHED, f"the process was killed by {signame}"
        return Status.CRASHED, f"the notebook ended the grading process (exit code {code})"
