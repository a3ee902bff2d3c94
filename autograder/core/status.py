"""The one status type of a graded submission (and of a sandbox that died).

Every result carries exactly one of these in `extra_data.status`; the list is fixed and
documented in the README. A status is a `str` subclass, so it serialises as its value.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    OK = "ok"
    CRASHED = "crashed"  # the notebook's process died (a signal, an exit)
    FILE_SIZE = "file_size"  # a file over the file-size limit was written
    MEMORY = "memory"  # over the submission's memory limit
    TIMEOUT = "timeout"  # a request or the whole grading budget ran out
    OUTPUT_LIMIT = "output_limit"  # printed more than the output limit
    INVALID_NOTEBOOK = "invalid_notebook"  # not a notebook of this exercise; nothing ran
    TAMPERED = "tampered"  # the submission replaced or patched the grader's runtime
    GRADER_ERROR = "grader_error"  # the grader itself failed on this notebook (not the student)

    @property
    def severity(self) -> int:
        """How bad, for the overall status of a submission (the worst event wins)."""
        return _SEVERITY[self]


_SEVERITY = {
    Status.OK: 0,
    Status.CRASHED: 1,
    Status.FILE_SIZE: 2,
    Status.MEMORY: 3,
    Status.TIMEOUT: 4,
    Status.OUTPUT_LIMIT: 5,
    Status.TAMPERED: 6,
    Status.INVALID_NOTEBOOK: 7,
    Status.GRADER_ERROR: 8,
}


def worse(current: str, new: str) -> Status:
    """The more severe of two statuses (unknown values count as `crashed`)."""
    a, b = _coerce(current), _coerce(new)
    return b if b.severity > a.severity else a


def _coerce(value: str) -> Status:
    try:
        return Status(value)
    except ValueError:
        return Status.CRASHED
