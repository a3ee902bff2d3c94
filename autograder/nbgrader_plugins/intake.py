"""Everything students hand in is hostile data: the rules of intake, in one place.

- A student id is `SAFE_ID` (letters, digits, then also `.`, `_`, `@`, `-`; at most 64) before it
  reaches a path, a table, a CSV or a terminal; anything else is refused with the file named.
- Paths: every intake takes only plain folders and plain files with one name, read without
  following links (`autograder/core/student_tree.py`, the one home of that rule).
- `BoundedExtractor` (zip_collect's extractor): only the .zip files the instructor placed
  directly in the archive folder are opened, never an archive inside a download (a nested zip
  submitted for a student who submitted nothing, and a 2 MB nested zip took 4.3 GB of memory);
  members, sizes (counted while reading, never trusted from the header) and names (no absolute
  path, `..` or link) are bounded. Whatever is left out is named at the end (`left_out.py`).
- `SafeExchangeCollect` (`nbgrader collect`): a student's inbound submission is copied with
  `student_tree.copy_tree`: a submission folder that is a link (to the course's `source/`, say),
  a link, hard link, FIFO or socket inside it is refused with a warning naming it, the rest of
  the submission is collected, and collect ends with a summary and exit code 1.
- `SafeCsvExport` (`nbgrader export`): a real CSV (quoted fields) whose cells cannot start a
  formula in a spreadsheet (OWASP's list: = + - @ tab, carriage return get a leading `'`);
  its late penalty is that of the final score (`late_penalty.py`).
"""

from __future__ import annotations

import calendar
import csv
import fnmatch
import os
import re
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from nbgrader.api import MissingEntry
from nbgrader.exchange.abc.exchange import ExchangeError
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.plugins import ExportPlugin
from nbgrader.plugins.zipcollect import ExtractorPlugin
from traitlets import Int

from autograder.core.student_tree import TreeError, copy_open_file, copy_tree, walk
from autograder.core.text import clean_text
from autograder.nbgrader_plugins import left_out
from autograder.nbgrader_plugins.late_penalty import settle_late_penalties

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ARCHIVE_SUFFIXES = (".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar")


def valid_student_id(student_id: object) -> bool:
    return isinstance(student_id, str) and SAFE_ID.fullmatch(student_id) is not None


def csv_cell(value: object) -> str:
    """`value` as a CSV cell a spreadsheet shows as text, never evaluates."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_csv(
    path: str | Path, header: Sequence[str], rows: Sequence[Sequence[object]], bom: bool = False
) -> None:
    """Every CSV file of ours: quoted where needed, formulas neutralised; `bom`: starting with
    a UTF-8 byte order mark, for a file a person opens in a spreadsheet first (Excel reads a
    file without one in the system's code page: 김민준 as mojibake)."""
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(cell) for cell in header])
        writer.writerows([[csv_cell(cell) for cell in row] for row in rows])


class BoundedExtractor(ExtractorPlugin):
    """zip_collect's extractor: the archive folder is read without following links
    (`student_tree.walk`); each .zip placed directly in it is extracted, within bounds, to
    `extracted/<its name>/`; other files and folders are copied as they are; an archive
    anywhere else (a student's) is not opened. Everything left out is named (`left_out`)."""

    max_members = Int(20_000, help="Most members one archive may hold.").tag(config=True)
    max_member_bytes = Int(64 << 20, help="Largest member, uncompressed.").tag(config=True)
    max_total_bytes = Int(2 << 30, help="Most bytes one archive may expand to.").tag(config=True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        left_out.end_with_summary(self.parent)

    def extract(self, archive_path: str, extracted_path: str) -> None:
        archive, extracted = Path(archive_path), Path(extracted_path)

        def on_folder(relative: PurePosixPath) -> None:
            (extracted / relative).mkdir(parents=True, exist_ok=True)

        def on_file(relative: PurePosixPath, handle: int, info: os.stat_result) -> str | None:
            name = relative.name.lower()
            if len(relative.parts) == 1 and name.endswith(".zip"):
                shown = f"{archive.name}/{relative}"
                self._extract_zip(handle, shown, extracted / Path(relative.name).stem)
                return None
            if name.endswith(ARCHIVE_SUFFIXES):
                return "an archive: only the .zip files placed directly in the folder are opened"
            return _copy(handle, extracted / relative, info, self.max_member_bytes)

        tree = walk(archive, follow_top=True, on_file=on_file, on_folder=on_folder)
        for refusal in tree.refused:
            self._refuse(str(refusal.path), refusal.reason)

    def _refuse(self, path: str, reason: str) -> None:
        self.log.warning("Left out %s: %s", clean_text(path, 300), clean_text(reason, 600))
        left_out.record(self.parent, path, reason)

    def _extract_zip(self, handle: int, shown: str, target: Path) -> None:
        try:
            with os.fdopen(os.dup(handle), "rb") as stream, zipfile.ZipFile(stream) as bundle:
                members = bundle.infolist()
                if len(members) > self.max_members:
                    self._refuse(shown, f"{len(members)} members (at most {self.max_members})")
                    return
                target.mkdir(parents=True, exist_ok=True)
                budget = [self.max_total_bytes]
                for member in members:
                    self._extract_member(bundle, shown, member, target, budget)
        except (zipfile.BadZipFile, OSError, RuntimeError) as error:
            self._refuse(shown, f"not read: {error}")

    def _extract_member(self, bundle, shown: str, member: zipfile.ZipInfo, target: Path, budget):
        name = member.filename
        parts = Path(name).parts
        is_link = stat.S_ISLNK(member.external_attr >> 16)
        unsafe = name.startswith(("/", "\\")) or ".." in parts or ":" in name
        where = f"{shown}: {name}"
        if unsafe or not name.isprintable():
            self._refuse(f"{shown}: {name!a}", "an unsafe name (absolute, .., control characters)")
            return
        if is_link:
            self._refuse(where, "a symbolic link")
            return
        destination = target.joinpath(*parts)
        if member.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            return
        if name.lower().endswith(ARCHIVE_SUFFIXES):
            self._refuse(where, "a nested archive (not opened)")
            return
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            out = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
        except OSError as error:
            self._refuse(where, f"not written: {error.strerror}")
            return
        written = 0
        with bundle.open(member) as source, os.fdopen(out, "wb") as sink:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                budget[0] -= len(chunk)
                if written > self.max_member_bytes or budget[0] < 0:
                    break
                sink.write(chunk)
        if written > self.max_member_bytes or budget[0] < 0:
            destination.unlink()
            self._refuse(where, "over the size bounds")
            return
        keep_member_time(destination, member)


def _copy(handle: int, target: Path, info: os.stat_result, limit: int) -> str | None:
    """Copy an open plain file to the new file `target`; None, or why it was not copied."""
    try:
        copy_open_file(handle, target, info, limit)
    except TreeError as error:
        return str(error)
    except FileExistsError:
        return "a second file of this name"
    return None


def keep_member_time(path: Path, member: zipfile.ZipInfo) -> None:
    """The time the LMS wrote for a member of its download (read as UTC) becomes the extracted
    file's modification time, where the submission time is read from (lms.py); a member without
    one (the zip format's 1980-01-01) keeps the time of extraction."""
    if member.date_time[0] > 1980:
        seconds = calendar.timegm((*member.date_time, 0, 0, 0))
        os.utime(path, (seconds, seconds))


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, copying a student's inbound submission with `student_tree.copy_tree`
    (the submission folder and everything in it read without following links; nbgrader's
    size limits and include/ignore patterns kept). Each refusal is named in a warning, and
    once every student is collected, in a summary; then collect exits 1."""

    def do_copy(self, src, dest, log=None):
        ignore, include = self.coursedir.ignore, self.coursedir.include

        def exclude(relative: PurePosixPath, info: os.stat_result) -> bool:
            name = relative.name
            if any(fnmatch.fnmatch(name, glob) for glob in ignore or []):
                return True
            if not stat.S_ISREG(info.st_mode) or not include:
                return False
            return not any(fnmatch.fnmatch(name, glob) for glob in include)

        tree = copy_tree(
            src,
            dest,
            exclude=exclude,
            max_file_bytes=int(1000 * self.coursedir.max_file_size),
            max_total_bytes=int(1000 * self.coursedir.max_dir_size),
        )
        top = Path(src).parent
        for refusal in tree.refused:
            shown = clean_text(str(top / str(refusal.path)), 400)
            self.log.warning("Refused %s: %s; not collected", shown, refusal.reason)
        self.__dict__.setdefault("_refused", []).extend(tree.refused)

    def copy_files(self) -> None:
        super().copy_files()
        refused = self.__dict__.get("_refused", [])
        if refused:
            listed = "\n".join(f"  {refusal}" for refusal in refused)
            self.log.error(
                "collect left out %d path(s) of %s that are not plain files or folders (the "
                "rest was collected):\n%s",
                len(refused),
                self.inbound_path,
                listed,
            )
            raise ExchangeError(f"{len(refused)} path(s) left out")


class SafeCsvExport(ExportPlugin):
    """`nbgrader export` to grades.csv, with nbgrader's columns, as a real CSV without
    formulas; the late penalty is that of the final score, hand grades included
    (`late_penalty.py`)."""

    KEYS = (
        "assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
        "email", "raw_score", "late_submission_penalty", "score", "max_score",
    )  # fmt: skip

    def export(self, gradebook) -> None:
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        rows = []
        for assignment in gradebook.assignments:
            if assignments and assignment.name not in assignments:
                continue
            settle_late_penalties(gradebook, self.config, assignment.name, students or None)
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                rows.append(self._row(gradebook, assignment, student))
        write_csv(self.to or "grades.csv", list(self.KEYS), rows)

    def _row(self, gradebook, assignment, student) -> list[object]:
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            timestamp, raw, penalty = "", 0.0, 0.0
        else:
            timestamp = submission.timestamp
            raw, penalty = submission.score, submission.late_submission_penalty
        values = [
            assignment.name, assignment.duedate, timestamp, student.id, student.last_name,
            student.first_name, student.email, raw, penalty, max(0.0, raw - penalty),
            assignment.max_score,
        ]  # fmt: skip
        return ["" if value is None else value for value in values]
