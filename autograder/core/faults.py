"""Fault injection for the crash tests of the batch: with ATTN_GRADE_KILL_AT=POINT:N in the
grader's environment, the process SIGKILLs itself the N-th time it reaches POINT. Unset (always,
outside tests), `reach` does nothing. Points: `merge` (a result is about to be merged),
`commit` (merged and flushed, not committed), `audit` (committed, no audit record yet),
`audit-write` (half of the audit line written).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

VARIABLE = "ATTN_GRADE_KILL_AT"
_reached: Counter[str] = Counter()


def reach(point: str, before_kill: Callable[[], object] | None = None) -> None:
    spec = os.environ.get(VARIABLE)
    if not spec:
        return
    name, _, count = spec.partition(":")
    if name != point:
        return
    _reached[point] += 1
    if _reached[point] == int(count or 1):
        if before_kill is not None:
            before_kill()
        os.kill(os.getpid(), signal.SIGKILL)
