"""A uid of its own for each running sandbox (when the grader is root).

Each sandbox's processes run under a uid that no user of the host has and no other sandbox
uses at the same time: they cannot signal or trace the grader or another submission, read
files that are not world-readable, and RLIMIT_NPROC counts one submission only. A slot is held
with an flock on a file in a root-only directory for the sandbox's lifetime, so concurrent
graders (batch workers are separate processes) never share a uid.

The slots live in one fixed, root-owned directory (never under $TMPDIR: two graders with
different temporary directories would otherwise hand out the same uid, and one's teardown
would kill the other's sandbox). A uid is swept when it is taken: a process left running
under it (a grader killed with SIGKILL frees its slot at once) is killed before the uid is
handed to the next submission, so it can never signal or trace that submission.

Where a child could write outside its work dir (the `uid` level without Landlock), what its uid
left in the world-writable folders is removed when its sandbox closes (`sandbox/sweep.py`). A
slot whose sweep did not run (its grader was killed) or did not finish is marked in its lock
file; the next grader that takes the slot sweeps first, and passes the slot over while the
sweep cannot finish, so no submission meets files an earlier one left under its uid.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from autograder.sandbox.killing import kill_until_gone

FIRST_UID = 1_900_000_000
SLOTS = 4096
# /run is root's tmpfs on every systemd (and most other) Linux hosts; /tmp is the fallback
LOCK_PARENTS = (Path("/run"), Path("/tmp"))
LOCK_NAME = "attn-grade-uids"


class SandboxUid:
    """A held uid (also used as the gid); `release()` frees it."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = uid
        self._lock_fd = lock_fd

    @property
    def slot(self) -> int:
        return self.uid - FIRST_UID

    def mark_dirty(self) -> None:
        """Say in the slot's lock file that files of this uid may be left outside the work dir
        (until `mark_clean`): a grader killed before its sweep leaves the mark for the next."""
        _write_mark(self._lock_fd, DIRTY)

    def mark_clean(self) -> None:
        _write_mark(self._lock_fd, b"")

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


DIRTY = b"files may be left\n"


def _write_mark(fd: int, mark: bytes) -> None:
    if fd >= 0:
        os.ftruncate(fd, 0)
        if mark:
            os.pwrite(fd, mark, 0)


def _is_dirty(fd: int) -> bool:
    return bool(os.pread(fd, len(DIRTY), 0))


def _unused(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def lock_directory() -> Path:
    """The directory of the slot locks: root's own, mode 0700, not a symlink (a directory
    someone else made there could hand out a uid twice); RuntimeError if none can be had."""
    problems = []
    for parent in LOCK_PARENTS:
        folder = parent / LOCK_NAME
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            problems.append(f"{folder}: {error.strerror}")
            continue
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            problems.append(f"{folder} is not a directory of uid {os.geteuid()}")
            continue
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(folder, 0o700)
        return folder
    raise RuntimeError("no directory for the sandbox uid locks: " + "; ".join(problems))


def processes_of(uid: int) -> list[int]:
    """The pids of the processes running as `uid` (by their /proc entry's owner)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except OSError:
                continue
    return found


# Run as the sandbox uid: kill(-1) signals every process that uid may signal (its own), all at
# once: the kernel walks the task list under the lock fork() needs, so a fork bomb cannot
# outrun it, where killing pid by pid races it for minutes on a busy host.
KILL_ALL = "import os, signal; os.kill(-1, signal.SIGKILL)"


def kill_processes_of(uid: int) -> None:
    """SIGKILL every process running as `uid` (a sandbox uid: no one else has it): all at once
    from a helper running as that uid, then one by one whatever is left."""
    if processes_of(uid):
        try:
            subprocess.run(
                [sys.executable, "-S", "-I", "-c", KILL_ALL],
                user=uid,
                group=uid,
                extra_groups=[],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            pass  # the loop below still kills them one by one
    kill_until_gone(lambda: processes_of(uid), rounds=50, pause=0.01)


def acquire(clean: Callable[[int], bool]) -> SandboxUid:
    """Hold a free sandbox uid, with no process left running under it and, where its slot is
    marked (files may be left), `clean(uid)` true first (the sweep: `sweep.remove_files_of`);
    a slot it cannot clean is passed over. Needs root; RuntimeError when no slot is left."""
    locks = lock_directory()
    start = os.getpid() % SLOTS
    skipped = 0
    for offset in range(SLOTS):
        slot = (start + offset) % SLOTS
        uid = FIRST_UID + slot
        if not _unused(uid):
            continue
        fd = os.open(
            locks / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        kill_processes_of(uid)  # left by a grader that died with its sandbox running
        if _is_dirty(fd):  # its grader died before its sweep, or the sweep did not finish
            if not clean(uid):
                os.close(fd)
                skipped += 1
                continue  # never handed out with files of an earlier submission left
            _write_mark(fd, b"")
        return SandboxUid(uid, fd)
    raise RuntimeError(
        "no free sandbox uid"
        + (
            f" ({skipped} slots hold files of earlier sandboxes that could not be removed; "
            "see docs/security.md, 'Files left outside the work dir')"
            if skipped
            else ""
        )
    )
