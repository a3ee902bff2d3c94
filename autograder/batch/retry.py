"""Failures of the batch's environment, retried with a bounded backoff.

A write that fails (an OSError, a database that is unreachable, locked or full) is the
environment's, never the student's: it is tried again after 0.5, 1, 2, 4 and 8 s (15.5 s in
all, enough for a database server to restart or fail over), and if it still fails the batch
raises EnvironmentFailure naming what failed, on which file or database, and what to do. A
gradebook that is not a database at all (cut short, overwritten) is not retried.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from autograder.audit.gradebook import UNREADABLE
from autograder.core.errors import (
    EnvironmentFailure,
    describe_failure,
    environment_cause,
)

T = TypeVar("T")
DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)  # seconds before each new attempt (the database)
FILE_DELAYS = (0.5, 1.0, 2.0)  # a file: one student's folder, nbgrader's step in a worker
AGAIN = "run the same command again once it is fixed"


def lasting(cause: BaseException) -> bool:
    """A failure no retry can mend: the file is not a database (sqlite's `file is not a
    database`, `database disk image is malformed`)."""
    return type(cause).__name__ == "DatabaseError"


def retrying(
    action: Callable[[], T],
    what: str,
    *,
    delays: Sequence[float] = DELAYS,
    hint: str = AGAIN,
    say: Callable[[str], object] | None = None,
) -> T:
    """`action()`, tried again after each of `delays` while it fails for the environment
    (`what` says what it does: "writing the gradebook /c/gradebook.db"); then
    EnvironmentFailure. Any other error is raised at once."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    for attempt in range(len(delays) + 1):
        try:
            return action()
        except Exception as error:
            cause = environment_cause(error)
            if cause is None:
                raise
            if lasting(cause) or attempt == len(delays):
                tries = f" ({attempt + 1} attempts over {sum(delays[:attempt]):g} s)"
                advice = UNREADABLE if lasting(cause) else hint
                raise EnvironmentFailure(
                    f"{what} failed{tries if attempt else ''}: {describe_failure(cause)}; {advice}"
                ) from error
            delay = delays[attempt]
            say(
                f"attn-grade autograde: {what} failed ({describe_failure(cause)}); "
                f"retrying in {delay:g} s (attempt {attempt + 2} of {len(delays) + 1})"
            )
            time.sleep(delay)
    raise AssertionError("unreachable")


def quiet_database_tracebacks() -> None:
    """nbgrader logs each database error it rolls back with a full traceback (to tornado's
    application logger, about 290 lines for a full disk) before raising it; the batch says each
    failure in one line instead."""
    import logging

    logger = logging.getLogger("tornado.application")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
