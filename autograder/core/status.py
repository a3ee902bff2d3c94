"""The one status type of a graded submission (and of a sandbox that died).

Every result carries exactly one of these in `extra_data.status`; the list is fixed and
documented in docs/security.md. A status is a `str` subclass, so it serialises as its value.
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
    NOT_GRADED = "not_graded"  # report only: nbgrader stored no report for this submission

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
    Status.NOT_GRADED: 9,
}

# What a status means, in the student's words (feedback pages, the report cell).
_STUDENT_WORDS = {
    Status.OK: "",
    Status.CRASHED: "the notebook's process stopped while it was being graded",
    Status.FILE_SIZE: "the notebook wrote a file larger than allowed",
    Status.MEMORY: "the notebook used more memory than allowed",
    Status.TIMEOUT: "the notebook ran out of time while it was being graded",
    Status.OUTPUT_LIMIT: "the notebook printed more output than allowed",
    Status.INVALID_NOTEBOOK: "the file could not be graded as this exercise's notebook",
    Status.TAMPERED: "the notebook changed the grader's own code",
    Status.GRADER_ERROR: "the grader failed on this notebook; your instructor has been told",
    Status.NOT_GRADED: "the notebook was not graded; your instructor has been told",
}


def student_words(status: str) -> str:
    """What `status` means, for the student (a value that is no status is shown as it is)."""
    try:
        return _STUDENT_WORDS[Status(status)]
    except ValueError:
        return str(status)


def worse(current: str, new: str) -> Status:
    """The more severe of two statuses (unknown values count as `crashed`)."""
    a, b = _coerce(current), _coerce(new)
    return b if b.severity > a.severity else a


def _coerce(value: str) -> Status:
    try:
        return Status(value)
    except ValueError:
        return Status.CRASHED
