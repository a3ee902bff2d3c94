"""Everything students hand in is hostile data: the rules of intake, in one place.

- A student id is `SAFE_ID` (letters, digits, then also `.`, `_`, `@`, `-`; at most 64) before it
  reaches a path, a table, a CSV or a terminal; anything else is refused with the file named.
- `BoundedExtractor` (zip_collect's extractor): only the archives the instructor placed are
  opened, never an archive inside one (a nested zip submitted for a student who submitted
  nothing, and a 2 MB nested zip took 4.3 GB of memory); members, sizes (counted while reading,
  never trusted from the header) and names (no absolute path, `..` or link) are bounded.
- `SafeExchangeCollect` (`nbgrader collect`): only regular files with one link are copied from
  a student's inbound submission; a symlink (to the course's `source/` notebook, say) or a hard
  link is refused with a warning naming it.
- `SafeCsvExport` (`nbgrader export`): a real CSV (quoted fields) whose cells cannot start a
  formula in a spreadsheet (OWASP's list: = + - @ tab, carriage return get a leading `'`).
"""

from __future__ import annotations

import calendar
import csv
import os
import re
import shutil
import stat
import zipfile
from collections.abc import Sequence
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.plugins import ExportPlugin
from nbgrader.plugins.zipcollect import ExtractorPlugin
from nbgrader.utils import ignore_patterns
from traitlets import Int

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ARCHIVE_SUFFIXES = (".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".rar")


def valid_student_id(student_id: object) -> bool:
    return isinstance(student_id, str) and SAFE_ID.fullmatch(student_id) is not None


def csv_cell(value: object) -> str:
    """`value` as a CSV cell a spreadsheet shows as text, never evaluates."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_csv(path: str | Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Every CSV file of ours: quoted where needed, formulas neutralised."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(cell) for cell in header])
        writer.writerows([[csv_cell(cell) for cell in row] for row in rows])


class BoundedExtractor(ExtractorPlugin):
    """zip_collect's extractor: each .zip the instructor placed in the archive directory is
    extracted one level deep, within bounds; nested archives are left out with a warning."""

    max_members = Int(20_000, help="Most members one archive may hold.").tag(config=True)
    max_member_bytes = Int(64 << 20, help="Largest member, uncompressed.").tag(config=True)
    max_total_bytes = Int(2 << 30, help="Most bytes one archive may expand to.").tag(config=True)

    def extract(self, archive_path: str, extracted_path: str) -> None:
        for root, _, names in os.walk(archive_path):
            target = Path(extracted_path) / os.path.relpath(root, archive_path)
            target.mkdir(parents=True, exist_ok=True)
            for name in names:
                source = Path(root) / name
                if source.is_symlink() or not source.is_file():
                    self.log.warning("Skipped (not a regular file): %s", source)
                elif name.lower().endswith(".zip"):
                    self._extract_zip(source, target / source.stem)
                elif name.lower().endswith(ARCHIVE_SUFFIXES):
                    self.log.warning("Skipped (only .zip archives are opened): %s", source)
                else:
                    shutil.copy(source, target / name)

    def _extract_zip(self, archive: Path, target: Path) -> None:
        try:
            with zipfile.ZipFile(archive) as bundle:
                members = bundle.infolist()
                if len(members) > self.max_members:
                    self.log.error("Refused %s: %d members (at most %d)", archive, len(members),
                                   self.max_members)  # fmt: skip
                    return
                budget = [self.max_total_bytes]
                for member in members:
                    self._extract_member(bundle, member, target, budget)
        except (zipfile.BadZipFile, OSError, RuntimeError) as error:
            self.log.error("Refused %s: %s", archive, error)

    def _extract_member(self, bundle, member: zipfile.ZipInfo, target: Path, budget) -> None:
        name = member.filename
        parts = Path(name).parts
        is_link = stat.S_ISLNK(member.external_attr >> 16)
        unsafe = name.startswith(("/", "\\")) or ".." in parts or ":" in name
        if unsafe or is_link or not name.isprintable():
            self.log.warning("Skipped unsafe member %s of %s", ascii(name), bundle.filename)
            return
        destination = target.joinpath(*parts)
        if member.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            return
        if name.lower().endswith(ARCHIVE_SUFFIXES):
            self.log.warning("Skipped nested archive %r of %s (not opened)", name, bundle.filename)
            return
        destination.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with bundle.open(member) as source, open(destination, "wb") as sink:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                budget[0] -= len(chunk)
                if written > self.max_member_bytes or budget[0] < 0:
                    break
                sink.write(chunk)
        if written > self.max_member_bytes or budget[0] < 0:
            destination.unlink()
            self.log.error("Skipped %r of %s: over the size bounds", name, bundle.filename)
            return
        keep_member_time(destination, member)


def keep_member_time(path: Path, member: zipfile.ZipInfo) -> None:
    """The time the LMS wrote for a member of its download (read as UTC) becomes the extracted
    file's modification time, where the submission time is read from (lms.py); a member without
    one (the zip format's 1980-01-01) keeps the time of extraction."""
    if member.date_time[0] > 1980:
        seconds = calendar.timegm((*member.date_time, 0, 0, 0))
        os.utime(path, (seconds, seconds))


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, copying only regular, singly linked files of a submission (and
    keeping nbgrader's size limits and include/ignore patterns)."""

    def do_copy(self, src, dest, log=None):
        refused = set(not_regular_files(src))
        for path in sorted(refused):
            self.log.warning("Refused %s: not a regular file (a link or a special file)", path)
        limit = 1000 * self.coursedir.max_dir_size
        if self.get_size(src) > limit:
            raise RuntimeError(f"Directory size is too big: the maximum is {limit} bytes")
        patterns = ignore_patterns(
            exclude=self.coursedir.ignore,
            include=self.coursedir.include,
            max_file_size=self.coursedir.max_file_size,
            log=self.log,
        )

        def ignore(directory: str, names: list[str]) -> set[str]:
            inside = {name for name in names if os.path.join(directory, name) in refused}
            return set(patterns(directory, names)) | inside

        shutil.copytree(src, dest, ignore=ignore, symlinks=True)


def not_regular_files(top: str) -> list[str]:
    """Paths below `top` that are neither directories nor regular files with one link."""
    found = []
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            info = os.lstat(path)
            regular = stat.S_ISREG(info.st_mode) and info.st_nlink == 1
            if not (regular or stat.S_ISDIR(info.st_mode)):
                found.append(path)
    return found


class SafeCsvExport(ExportPlugin):
    """`nbgrader export` to grades.csv, with nbgrader's columns, as a real CSV without
    formulas."""

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
