"""A uid of its own for each running sandbox (when the grader is root).

Each sandbox's processes run under a uid that no user of the host has and no other sandbox
uses at the same time: they cannot signal or trace the grader or another submission, read
files that are not world-readable, and RLIMIT_NPROC counts one submission only. A slot is held
with an flock on a file in a root-only directory for the sandbox's lifetime, so concurrent
graders (batch workers are separate processes) never share a uid.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import tempfile
from pathlib import Path

FIRST_UID = 1_900_000_000
SLOTS = 4096
LOCKS = Path(tempfile.gettempdir()) / "attn-grade-uids"


class SandboxUid:
    """A held uid (also used as the gid); `release()` frees it."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = uid
        self._lock_fd = lock_fd

    @property
    def slot(self) -> int:
        return self.uid - FIRST_UID

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def _unused(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def acquire() -> SandboxUid:
    """Hold a free sandbox uid. Needs root; RuntimeError when every slot is taken."""
    LOCKS.mkdir(mode=0o700, exist_ok=True)
    os.chmod(LOCKS, 0o700)
    start = os.getpid() % SLOTS
    for offset in range(SLOTS):
        slot = (start + offset) % SLOTS
        uid = FIRST_UID + slot
        if not _unused(uid):
            continue
        fd = os.open(LOCKS / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return SandboxUid(uid, fd)
    raise RuntimeError("no free sandbox uid")
