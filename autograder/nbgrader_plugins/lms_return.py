"""Feedback back to students who handed in through an LMS download (`nbgrader zip_collect`).

- `LmsAwareReleaseFeedback` (`nbgrader release_feedback`): nbgrader releases feedback into the
  exchange under a hash of the secret that `nbgrader submit` wrote; a submission that came from
  an LMS download has no such secret (its student never used the exchange), and nbgrader stopped
  the whole release at the first one. Such students are left out with one warning that names
  them and says how their feedback goes back (below); everyone else is released as before.
- `feedback_zip` (`attn-grade feedback-zip EX --lms canvas|moodle`): one zip of the generated
  feedback pages laid out for the LMS's bulk feedback upload, each page named after the file
  the student handed in, as the download named it:
  - Canvas ("Re-Upload Submissions" of the download): `<login>_<user id>_<submission id>_
    <notebook>_feedback.html`, the download's own prefix, which Canvas matches to the student
    and attaches as a comment file.
  - Moodle ("Upload multiple feedback files in a zip"): `<Full name>_<participant id>_
    assignsubmission_file_/<notebook>_feedback.html`, the download's own participant folder.
  Students whose feedback has no matching file in the download (they handed in through the
  exchange, or the download is gone) are listed, not guessed.
- `lms_gradebook` (`attn-grade lms-grades EX --lms canvas|moodle`): a CSV the LMS gradebook
  imports, one row per student of the download, with the score after nbgrader's late penalty:
  - Canvas (Grades > Import): `Student, ID, SIS User ID, SIS Login ID, Section, <assignment>`;
    Canvas matches rows on `ID`, the Canvas user id the download gave (our student id), and
    the assignment column on the id in a header `Name (id)` (as Canvas's own export writes
    it), else on the assignment's exact name; a header it does not know becomes a new
    assignment on import. `column` is that header (default: the exercise id).
  - Moodle (the assignment's "Upload grading worksheet"): `Identifier, Full name, Email address,
    Status, Grade, Maximum Grade, Grade can be changed, Last modified (submission), Last
    modified (grade), Feedback comments`; Moodle matches rows on `Identifier`
    (`Participant <id>`), and skips a grade above the assignment's maximum.
  `out_of` scales the scores to the LMS assignment's maximum (e.g. 100). Names are the
  download's (Moodle's participant folder, Canvas's login in the file name); a student of the
  download without a graded submission gets an empty grade, never a zero; a student left out
  of `names` has no row, so the LMS keeps what it has for them. The file starts with a UTF-8
  byte order mark, as Canvas's own export does: it is opened in a spreadsheet first (both
  importers read it).
"""

from __future__ import annotations

import glob
import os
import re
import zipfile
from pathlib import Path

from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback

from autograder.core.student_tree import walk
from autograder.nbgrader_plugins.intake import write_csv
from autograder.nbgrader_plugins.lms_files import download_name, download_path, recorded_names

LMS_LAYOUTS = ("canvas", "moodle")


class LmsAwareReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's release_feedback, leaving out (with a warning) the students whose feedback
    cannot go through the exchange: no submission secret or no timestamp (module doc)."""

    def copy_files(self) -> None:
        unreachable = sorted(self._without_exchange_identity())
        if unreachable:
            self.log.warning(
                "Not released to the exchange (handed in through an LMS download, so no "
                "submission secret): %s. Return their feedback through the LMS: attn-grade "
                "feedback-zip %s --lms canvas|moodle",
                ", ".join(unreachable),
                self.coursedir.assignment_id,
            )
        before = self.coursedir.student_id_exclude
        excluded = {s for s in before.split(",") if s} | set(unreachable)
        self.coursedir.student_id_exclude = ",".join(sorted(excluded))
        try:
            super().copy_files()
        finally:
            self.coursedir.student_id_exclude = before

    def _without_exchange_identity(self) -> set[str]:
        pattern = re.escape(os.path.sep).join([
            self.coursedir.format_path(self.coursedir.feedback_directory, "(?P<student_id>.*)",
                                       self.coursedir.assignment_id, escape=True),
            "(?P<notebook_id>.*).html",
        ])  # fmt: skip
        found = set()
        for page in glob.glob(os.path.join(self.src_path, "*.html")):
            match = re.match(pattern, page)
            folder = Path(page).parent
            needed = (folder / "submission_secret.txt", folder / "timestamp.txt")
            if match and not all(path.is_file() for path in needed):
                found.add(match["student_id"])
        return found


def downloaded_prefixes(download: Path, extracted: Path, lms: str) -> dict[str, str]:
    """student id -> the name the LMS gave that student's files (lms_files.download_name): what
    every zip_collect of the exercise recorded (a second download holds only the students who
    handed in again), else what the extracted download shows."""
    found = dict(recorded_names(download).get(lms, {}))
    files = walk(extracted, follow_top=True).files if extracted.is_dir() else []
    for path in files:
        named = download_name(download_path(extracted, extracted / path))
        if named is not None and named[0] == lms and named[1] not in found:
            found[named[1]] = named[2]
    return found


def downloaded_names(prefixes: dict[str, str]) -> dict[str, str]:
    """student id -> the name the download shows (Moodle's full name, Canvas's login)."""
    return {
        student: prefix.split(f"_{student}_", 1)[0].split("_LATE", 1)[0]
        for student, prefix in prefixes.items()
    }


CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = [
    "Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
    "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
    "Feedback comments",
]  # fmt: skip


# What Canvas's import reads as anything but an assignment: its student columns, and a header
# holding one of its computed columns' names (dropped wherever they appear in the header)
CANVAS_RESERVED = {*CANVAS_COLUMNS, "LastName", "FirstName", "Integration ID", "Root Account"}
CANVAS_COMPUTED = (
    "Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
    "Final Grade", "Override Score", "Override Grade", "Override Status",
)  # fmt: skip
_CANVAS_ID = re.compile(r"^(.*)\s\((\d+)\)$")  # "Name (id)", as Canvas's import reads it


def canvas_column(header: str) -> str:
    """How Canvas's import will match the assignment column `header`; ValueError when it
    would not read it as an assignment at all."""
    if not header.strip() or header in CANVAS_RESERVED:
        raise ValueError(f"{header!r} is not an assignment column for Canvas's import")
    computed = [name for name in CANVAS_COMPUTED if name in header]
    if computed:
        raise ValueError(f"Canvas's import drops a column whose header holds {computed[0]!r}")
    found = _CANVAS_ID.match(header)
    if found:
        return f"Canvas matches the assignment with id {found[2]}"
    return "Canvas matches an assignment of exactly this name, or offers to create one"


def lms_gradebook(
    lms: str,
    assignment: str,
    names: dict[str, str],
    scores: dict[str, tuple[float, str]],
    max_score: float,
    out: Path,
    *,
    column: str | None = None,
    out_of: float | None = None,
) -> None:
    """Write the LMS's gradebook import (module doc) for the download's students `names`;
    `scores`: student id -> (score after the late penalty, submission time)."""
    scale = out_of / max_score if out_of and max_score else 1.0

    def grade(student: str) -> str:
        return points(scores[student][0] * scale) if student in scores else ""

    if lms == "canvas":
        header = [*CANVAS_COLUMNS, column or assignment]
        rows = [[names[s], s, "", "", "", grade(s)] for s in sorted(names)]
    elif lms == "moodle":
        header = MOODLE_COLUMNS
        rows = [
            [f"Participant {s}", names[s], "", "Submitted for grading" if s in scores else
             "No submission", grade(s), points(out_of or max_score), "Yes",
             scores[s][1] if s in scores else "", "", ""]
            for s in sorted(names)
        ]  # fmt: skip
    else:
        raise ValueError(f"--lms is one of {', '.join(LMS_LAYOUTS)}, not {lms!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, header, rows, bom=True)


def points(value: float) -> str:
    """A score as the LMS files write it: at most two decimals, no trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def feedback_zip(
    pages: list[tuple[str, Path]], prefixes: dict[str, str], out: Path
) -> tuple[list[str], list[str]]:
    """Write the LMS's bulk-feedback zip (module doc) of `pages` ((student id, page) pairs) to
    `out`, naming each after the student's files in the download (`prefixes`, from
    downloaded_prefixes); (students in it, students left out because no download of the LMS
    had a file of theirs)."""
    included, missing = set(), set()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for student, page in pages:
            prefix = prefixes.get(student)
            if prefix is None:
                missing.add(student)
                continue
            bundle.write(page, f"{prefix}{page.stem}_feedback.html")
            included.add(student)
    return sorted(included), sorted(missing)
