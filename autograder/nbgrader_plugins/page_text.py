"""The words of the pages a student reads (the report cell, the feedback page's chrome) and of
what formgrader shows the instructor around the student's text, in the notebook's language: one
home for them.

The language is the notebook's `attn_grade.lang` metadata (written by `attn-grade build`); a
value that is not a language of ours reads as English (a student who edits it can only switch
the page between our two languages). Check messages are not translated here.
"""

from __future__ import annotations

from collections.abc import Mapping

LANGUAGES = ("en", "ko")

KO: Mapping[str, str] = {
    # the report cell
    "Autograder report": "자동 채점 결과",
    "%s of %s points from automatic checks; the written answer (%s points) is graded by your "
    "instructor.": "자동 검사에서 %s / %s점. 서술형 답안(%s점)은 담당 교수자가 채점합니다.",
    "%s of %s points from automatic checks; the written answer, graded by your instructor: %s "
    "of %s points.": (
        "자동 검사에서 %s / %s점. 서술형 답안은 담당 교수자가 채점했습니다: %s / %s점."
    ),
    "%s of %s points from automatic checks; the written answer (%s points) was left blank: 0 "
    "points.": "자동 검사에서 %s / %s점. 서술형 답안(%s점)은 비어 있어 0점입니다.",
    "%s of %s points from automatic checks; the written answer changed after it was graded "
    "(earlier grade %s of %s points): your instructor will look at it again.": (
        "자동 검사에서 %s / %s점. 서술형 답안이 채점 후 바뀌어(이전 점수 %s / %s점) 담당 "
        "교수자가 다시 채점합니다."
    ),
    "Note": "참고",
    "Notes": "알림",
    "check": "검사",
    "result": "결과",
    "points": "점수",
    "message": "메시지",
    "passed": "통과",
    "failed": "실패",
    "FAILED": "실패",
    # a test cell's output
    "no automatic checks belong to this cell": "이 셀에 속한 자동 검사가 없습니다",
    "note": "참고",
    "points for this cell: %s of %s": "이 셀의 점수: %s / %s",
    # the feedback page
    "Score": "점수",
    "Your code": "작성한 코드",
    "Your written answer": "작성한 서술형 답안",
    # the region of the student's own text: on the feedback page, and in formgrader
    "Your answer": "작성한 답안",
    "Your text": "직접 작성한 내용",
    "Written by the student": "학생이 작성한 내용",
    "Checks of": "검사 대상:",
    "Checks": "검사",
    "Written answer": "서술형 답안",
    "Comments": "코멘트",
    "Top": "맨 위로",
    "not graded yet (%s points)": "아직 채점되지 않음 (%s점)",
    "the written answer is not graded yet": "서술형 답안은 아직 채점되지 않았습니다",
    "the written answer is under review and not counted": "서술형 답안은 재검토 중이라 점수에 "
    "포함되지 않았습니다",
    "under review: changed since it was graded (earlier grade %s / %s)": (
        "재검토 중: 채점 후 답안이 바뀌었습니다 (이전 점수 %s / %s)"
    ),
    "Late submission penalty": "지각 제출 감점",
    "cell": "셀",
    "a figure drawn by cell %s": "셀 %s에서 그린 그림",
    # nbgrader's own words
    "No response.": "답안이 없습니다.",
}


def language(metadata: Mapping) -> str:
    """The notebook's language from its metadata (module doc)."""
    ours = metadata.get("attn_grade") if isinstance(metadata, Mapping) else None
    found = ours.get("lang") if isinstance(ours, Mapping) else None
    return found if isinstance(found, str) and found in LANGUAGES else "en"


def words(text: str, lang: str) -> str:
    """`text` in `lang` (English, the key, when there is no translation)."""
    return KO.get(text, text) if lang == "ko" else text
