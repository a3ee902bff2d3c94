"""The words of the pages a student reads (the report cell, the feedback page's chrome) and of
what formgrader shows the instructor around the student's text, in the notebook's language: one
home for them.

The language is the notebook's `attn_grade.lang` metadata (written by `attn-grade build`); a
value that is not a language of ours reads as English (a student who edits it can only switch
the page between our two languages). Check messages are translated from the same catalogues
(`message`).
"""

from __future__ import annotations

from autograder.i18n import catalogues
from autograder.i18n.reports import language_of as language  # noqa: F401 (the pages' API)

# Every word of the pages, in English: their translations are in the language catalogues
# (autograder/i18n), which extract.py fills from this list.
PAGE_WORDS = (
    "Autograder report",
    "%s of %s points from automatic checks; the written answer (%s points) is graded by your "
    "instructor.",
    "%s of %s points from automatic checks; the written answer, graded by your instructor: %s "
    "of %s points.",
    "%s of %s points from automatic checks; the written answer (%s points) was left blank: 0 "
    "points.",
    "%s of %s points from automatic checks; the written answer changed after it was graded "
    "(earlier grade %s of %s points): your instructor will look at it again.",
    "Note",
    "Notes",
    "check",
    "result",
    "points",
    "message",
    "passed",
    "failed",
    "FAILED",
    "no automatic checks belong to this cell",
    "note",
    "points for this cell: %s of %s",
    "Score",
    "Your code",
    "Your written answer",
    "Your answer",
    "Your text",
    "Written by the student",
    "Checks of",
    "Checks",
    "Written answer",
    "Comments",
    "Top",
    "not graded yet (%s points)",
    "the written answer is not graded yet",
    "the written answer is under review and not counted",
    "under review: changed since it was graded (earlier grade %s / %s)",
    "Late submission penalty",
    "cell",
    "a figure drawn by cell %s",
    "No response.",
)


def words(text: str, lang: str) -> str:
    """`text` in `lang` (English, the key, when there is no translation)."""
    return catalogues.words(text, lang)


def message(text: str, lang: str) -> str:
    """A check message or note of the grader in `lang` (autograder/i18n/catalogues.py)."""
    return catalogues.message(text, lang)
