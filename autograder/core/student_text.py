"""Text a notebook chooses, as the grader quotes it: one line, bounded, and bounded in total.

A notebook chooses the messages and type names of its exceptions, the values its functions
return and the errors of its cells; the grader quotes them in check messages and notes, which
reach results.json, the feedback page and the instructor's report. Every such text is a channel
out of the sandbox (an attacker carried hidden code out in exception messages), so each quote is
one line of at most `QUOTE` characters, and the quotes of one grading share a budget of `TOTAL`
characters (`budget()` opens it; past it a quote is a short mark). The grader's own words are
not charged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

QUOTE = 200  # characters of one quote (an exception message, a value's repr)
TYPE_NAME = 60  # characters of an exception's type name
TOTAL = 4000  # characters of all quotes of one grading
SPENT = "(not shown: the quotes of this notebook's text are spent)"

_LEFT: ContextVar[list[int] | None] = ContextVar("student_text_left", default=None)


def one_line(text: object, limit: int) -> str:
    """`text` on one line (every run of whitespace one space), at most `limit` characters."""
    value = " ".join(str(text).split())
    return value if len(value) <= limit else value[: limit - 3] + "..."


def quoted(text: object, limit: int = QUOTE) -> str:
    """`text` of the notebook's as a message may quote it: one line, bounded, charged to the
    grading's budget (unbounded in total outside a grading)."""
    value = one_line(text, limit)
    left = _LEFT.get()
    if left is None:
        return value
    if len(value) > left[0]:
        return SPENT if value else value
    left[0] -= len(value)
    return value


def shown(value: object, limit: int = QUOTE) -> str:
    """A value the notebook returned, as a message shows it (its repr, quoted)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value of any kind, never the grader's fault
        text = f"<{type(value).__name__}>"
    return quoted(text, limit)


@contextmanager
def budget(total: int = TOTAL) -> Iterator[None]:
    """The quotes made inside share `total` characters."""
    token = _LEFT.set([total])
    try:
        yield
    finally:
        _LEFT.reset(token)
