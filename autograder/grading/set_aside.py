"""Verdicts a check set aside because the student's answer was right for their own upstream
code (`autograder.authoring.upstream`): the plugin settles them once every check has run."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from autograder.core.errors import CheckFailed


@dataclass
class SetAside:
    """The reference's verdicts one check set aside because the student's answer was right for
    their own upstream code. The grading plugin pays such a pass only when one of the check's
    `upstream` checks fails (a fault charged there); otherwise the first verdict stands."""

    verdicts: list[CheckFailed] = field(default_factory=list)


CURRENT: ContextVar[SetAside | None] = ContextVar("attn_grade_set_aside", default=None)
