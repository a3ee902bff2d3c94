"""Fault injection for the crash and fault tests of the batch. Each variable holds POINT:N and
acts the N-th time this process reaches POINT (several POINT:N, comma-separated, act at
each):

- ATTN_GRADE_KILL_AT: the process SIGKILLs itself (a crash at that very step);
- ATTN_GRADE_STOP_AT: the process SIGSTOPs itself, so that a test can inject a fault (kill a
  worker, stop the database, send a signal) at a known step and then SIGCONT it;
- ATTN_GRADE_FAIL_AT: OSError(EIO) is raised there (a transient write failure); `POINT:N+`
  fails from the N-th time on (a failure that persists).

Unset (always, outside tests), `reach` does nothing. Points: `merge` (a result is about to be
merged), `place` (its autograded folder is about to be put in place), `commit` (merged and
flushed, not committed), `audit` (committed, no audit record yet), `audit-write` (half of the
audit line written), `autograde` (a worker is about to run nbgrader's autograde).
"""

from __future__ import annotations

import errno
import os
import signal
from collections import Counter
from collections.abc import Callable

VARIABLE = "ATTN_GRADE_KILL_AT"
STOP_VARIABLE = "ATTN_GRADE_STOP_AT"
FAIL_VARIABLE = "ATTN_GRADE_FAIL_AT"
_reached: Counter[tuple[str, str]] = Counter()


def _due(variable: str, point: str) -> bool:
    """Whether the fault of `variable` is due at this reach of `point` (counted per variable;
    the variable may list several POINT:N, comma-separated)."""
    specs = (spec.partition(":") for spec in os.environ.get(variable, "").split(","))
    counts = [count for name, _, count in specs if name == point]
    if not counts:
        return False
    _reached[(variable, point)] += 1
    reached = _reached[(variable, point)]
    for count in counts:
        if count.endswith("+") and reached >= int(count[:-1] or 1):
            return True
        if not count.endswith("+") and reached == int(count or 1):
            return True
    return False


def reach(point: str, before_kill: Callable[[], object] | None = None) -> None:
    if _due(VARIABLE, point):
        if before_kill is not None:
            before_kill()
        os.kill(os.getpid(), signal.SIGKILL)
    if _due(STOP_VARIABLE, point):
        os.kill(os.getpid(), signal.SIGSTOP)
    if _due(FAIL_VARIABLE, point):
        raise OSError(errno.EIO, f"injected fault at {point}")
