"""What zip_collect leaves out is named at the end; a notebook left out makes it exit 1.

nbgrader's zip_collect only counts what it skips ("5 files collected, 1 files skipped") and
exits 0, so a notebook could vanish unnoticed. Here the extractor (`intake.BoundedExtractor`)
and the collector (`lms.LmsFileNameCollector`) record each file they leave out, and why, on
the running zip_collect; once the collected files are in `submitted/`, zip_collect prints one
summary that names each of them (relative to `downloaded/<assignment>/`) and exits 1 when any
of them was refused or is a notebook: a link or special file, an archive inside the download,
a name without an LMS's fields where the LMS writes them, an unsafe id, two files for one
student and notebook. Files that are not notebooks (a Blackboard .txt, a PDF) are listed too,
without changing the exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autograder.core.text import clean_text

_RECORDS = "_attn_grade_left_out"
_WRAPPED = "_attn_grade_summary"
_FIRST = "_attn_grade_before_summary"


@dataclass(frozen=True)
class LeftOut:
    path: str  # relative to downloaded/<assignment>/
    reason: str
    fails: bool = True  # False: a file that is not a notebook, listed only

    def __str__(self) -> str:
        return f"{clean_text(self.path, 300)}: {clean_text(self.reason, 600)}"


def record(app: object, path: str, reason: str, *, fails: bool = True) -> None:
    """Remember that zip_collect (`app`, None outside one) left `path` out."""
    if app is None:
        return
    found = app.__dict__.setdefault(_RECORDS, [])
    item = LeftOut(path, reason, fails)
    if item not in found:
        found.append(item)


def recorded(app: object) -> list[LeftOut]:
    return list(getattr(app, "__dict__", {}).get(_RECORDS, []))


def end_with_summary(app: object, first: Callable[[], object] | None = None) -> None:
    """Make the ZipCollectApp `app` end with the summary: its `process_extracted_files`
    (called once, after the extraction) is followed by `first` (of each plugin that gives one),
    then by `summarise`."""
    if first is not None:
        app.__dict__.setdefault(_FIRST, []).append(first)
    process = getattr(app, "process_extracted_files", None)
    if process is None or getattr(process, _WRAPPED, False):
        return

    def process_then_summarise() -> None:
        process()
        for hook in app.__dict__.get(_FIRST, []):
            hook()
        summarise(app)

    setattr(process_then_summarise, _WRAPPED, True)
    app.process_extracted_files = process_then_summarise  # type: ignore[attr-defined]


def summarise(app) -> None:
    """Log the summary; exit 1 (nbgrader's `fail`) when a refused file or notebook is in it."""
    items = recorded(app)
    failing = [item for item in items if item.fails]
    listed = [item for item in items if not item.fails]
    if listed:
        app.log.warning(
            "zip_collect left out %d file(s) that are not notebooks (not collected):\n%s",
            len(listed),
            "\n".join(f"  {item}" for item in listed),
        )
    if failing:
        app.log.error(
            "zip_collect left out %d file(s) of the download; nothing of them is in "
            "submitted/ (the other files were collected):\n%s",
            len(failing),
            "\n".join(f"  {item}" for item in failing),
        )
        app.fail(
            "zip_collect left out the file(s) above: look at them, then collect again "
            "(nbgrader zip_collect --force) or put the notebook in submitted/ yourself"
        )
