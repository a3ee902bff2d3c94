"""SIGKILL a changing set of processes until none is left: the one loop behind a sandbox uid's
sweep and a cgroup's teardown (a fork bomb keeps starting processes while it is killed)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


def kill_until_gone(find: Callable[[], list[int]], rounds: int, pause: float) -> None:
    """SIGKILL every pid `find()` returns, again and again, until it returns none (or `rounds`
    passes, `pause` seconds apart, are spent)."""
    for _ in range(rounds):
        pids = find()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause)
