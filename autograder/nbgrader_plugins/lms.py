"""`nbgrader zip_collect` of an LMS download without a hand-written pattern.

The course config makes LmsFileNameCollector zip_collect's collector plugin. It knows the file
names of the common "download all submissions" archives (ids below are what becomes the
nbgrader student id):
- Canvas: `doejane_12345_6789012_ex1_numpy_attention.ipynb` (`_LATE_` after the name when
  late; a re-submission may end in `-1`): the Canvas user id, 12345.
- Moodle: `Jane Doe_123456_assignsubmission_file_/ex1_numpy_attention.ipynb` (one folder per
  participant; older versions put it in the file name): the participant id, 123456.
- Blackboard: `Exercise 1_jdoe_attempt_2026-11-20-14-05-09_ex1_numpy_attention.ipynb`: the
  username, jdoe; the attempt time becomes the submission's timestamp (the last attempt wins).
A `named_regexp` set in nbgrader_config.py still wins over these.

Every collected submission gets a submission time (nbgrader writes it as `timestamp.txt`:
autograde applies the course's late penalty from it, release_feedback needs it), the first of:
1. the instructor's `downloaded/<assignment>/submission_times.csv` (columns `student_id`,
   `timestamp`, e.g. `12345,2026-11-20 14:05:09`, UTC): a time the download does not give, or
   a correction;
2. the time the LMS writes in the file name (Blackboard's attempt time);
3. the time the LMS wrote for the file inside its download (the zip member's date, read as UTC,
   which the extractor keeps as the file's modification time), else the time of extraction.
Canvas's `_LATE_` flag is Canvas's own judgement (it knows each student's due date and
extension), so it decides lateness against the assignment's nbgrader due date: a flagged file
timed at or before the due date is recorded one second after it, an unflagged file timed after
it is recorded at the due date, each with a warning naming the file.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import re
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import FileNameCollectorPlugin
from nbgrader.utils import parse_utc

from autograder.nbgrader_plugins.intake import valid_student_id

# Each pattern reads the LMS's own fields from where the LMS writes them, never from the part
# of the name the student chose: Canvas's and Blackboard's fields lead the file name (the first
# `_attempt_<time>_` group, whatever the student's own file name repeats after it), Moodle's
# end its participant folder (a student's display name may hold anything before them).
_BLACKBOARD = re.compile(
    r"^.+?_(?P<student_id>[^_/]+)_attempt_"
    r"(?P<timestamp>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})_(?P<file_id>.+)$"
)
_CANVAS = re.compile(
    r"^[a-z0-9]+(?P<late>_LATE)?_(?P<student_id>\d+)_\d+_(?P<file_id>.+)$", re.IGNORECASE
)
_MOODLE_FILE = re.compile(r"^.+?_(?P<student_id>\d+)_assignsubmission_file_(?P<file_id>.+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<student_id>\d+)_assignsubmission_file_?$")
# a display name we keep: printable, no markup or quotes, at most 100 characters
_SAFE_NAME = re.compile(r"[^\x00-\x1f\x7f<>&\"'`=+@]{1,100}")
TIMES_FILE = "submission_times.csv"
# what LMSs and browsers append to a re-submitted or re-downloaded file: "-1", " (1)"
_COPY_SUFFIX = re.compile(r"(?:-\d+| \(\d+\))$")


def lms_fields(path: Path) -> dict[str, str] | None:
    """student_id, file_id (and timestamp) from an LMS download's file path; None if unknown.
    A participant folder (Moodle) decides before any file name does; otherwise the LMS whose
    fields end first in the name wins (the student's own file name only ever comes after
    them, so a name that imitates another LMS's fields cannot be read as them)."""
    name = path.name
    folder = _MOODLE_FOLDER.match(path.parent.name)
    if folder:
        fields = {"student_id": folder["student_id"], "file_id": name}
    else:
        matches = [m for m in (p.match(name) for p in (_CANVAS, _BLACKBOARD, _MOODLE_FILE)) if m]
        if not matches:
            return None
        found = min(matches, key=lambda match: match.start("file_id"))
        fields = {k: v for k, v in found.groupdict().items() if k != "late"}
        if found.groupdict().get("late"):
            fields["late"] = "late"
        if "timestamp" in fields:
            day, time = fields["timestamp"][:10], fields["timestamp"][11:].replace("-", ":")
            fields["timestamp"] = f"{day} {time}"
    file_id = Path(fields["file_id"])
    fields["file_id"] = _COPY_SUFFIX.sub("", file_id.stem) + file_id.suffix
    return fields


NAMES_FILE = "lms_students.json"  # beside the download: {lms: {student id: prefix}}


def download_name(path: Path) -> tuple[str, str, str] | None:
    """(lms, student id, the name the LMS gave the student's files without the notebook's
    name) of a file of a download: Canvas's file-name prefix (`doejane_12345_6789012_`),
    Moodle's participant folder (`Jane Doe_123456_assignsubmission_file_/`); None for a file
    that is neither (Blackboard has no bulk feedback upload of this kind)."""
    fields = lms_fields(path)
    if fields is None:
        return None
    if _MOODLE_FOLDER.match(path.parent.name):
        return "moodle", fields["student_id"], path.parent.name + "/"
    canvas = _CANVAS.match(path.name)
    if canvas:  # Canvas's fields, up to the student's own file name
        return "canvas", fields["student_id"], path.name[: canvas.start("file_id")]
    return None


def recorded_names(download: Path) -> dict[str, dict[str, str]]:
    """What every zip_collect of this download folder recorded (NAMES_FILE)."""
    try:
        found = json.loads((download / NAMES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {
        lms: {str(s): str(p) for s, p in names.items()}
        for lms, names in found.items()
        if isinstance(names, dict)
    }


class LmsFileNameCollector(FileNameCollectorPlugin):
    """zip_collect's collector for Canvas, Moodle and Blackboard downloads (see module doc).

    Student ids that are not `intake.SAFE_ID` are refused (the file is named in a warning);
    two files for the same student and notebook without LMS times to choose between are both
    refused with a warning naming them (nbgrader would stop the whole collect)."""

    def _match(self, filename: str):
        if self.named_regexp:  # the instructor's own pattern
            fields = super()._match(filename)
        else:
            fields = lms_fields(Path(filename))
            if fields is None:
                self.log.warning("not a Canvas, Moodle or Blackboard file name: %s", filename)
                return None
        if fields is None:
            return None
        if not valid_student_id(fields.get("student_id")):
            self.log.warning(
                "refused %s: the student id %s is not letters, digits and . _ @ - (at most 64)",
                filename,
                ascii(fields.get("student_id")),
            )
            return None
        clash = self._ambiguous().get(filename)
        if clash:
            self.log.warning("refused %s: the same student and notebook as %s, and no "
                             "submission time to choose the latest", filename, clash)  # fmt: skip
            return None
        self._record_name(filename, fields["student_id"])
        self._remember_download_name(filename)
        return {**fields, "timestamp": self._submission_time(filename, fields)}

    def _remember_download_name(self, filename: str) -> None:
        """Keep the LMS's name for the student's files beside the download (NAMES_FILE), so
        that feedback and grades go back under it after later downloads too."""
        named = download_name(Path(filename)) if not self.named_regexp else None
        download = self._download_folder()
        if named is None or download is None:
            return
        names = recorded_names(download)
        lms, student, prefix = named
        names.setdefault(lms, {})[student] = prefix
        (download / NAMES_FILE).write_text(json.dumps(names, indent=1, sort_keys=True) + "\n")

    def _record_name(self, filename: str, student: str) -> None:
        """The name Moodle's participant folder shows ("Jane Doe": first names, then the last
        word as the last name) goes into the gradebook, so nbgrader export and formgrader show
        it; a student who already has a name there (a roster) keeps it. Canvas and Blackboard
        names in downloads are logins, not names: not recorded."""
        folder = _MOODLE_FOLDER.match(Path(filename).parent.name)
        coursedir = getattr(self.parent, "coursedir", None)
        if folder is None or coursedir is None or self.named_regexp:
            return
        name = " ".join(folder["name"].split())
        if not _SAFE_NAME.fullmatch(name):
            self.log.warning("%s: the name %s is not kept (markup or control characters)",
                             filename, ascii(name))  # fmt: skip
            return
        first, _, last = name.rpartition(" ")
        with Gradebook(coursedir.db_url, course_id=coursedir.course_id) as gradebook:
            try:
                known = gradebook.find_student(student)
            except MissingEntry:
                known = None
            if known is None or not (known.first_name or known.last_name):
                gradebook.update_or_create_student(student, first_name=first, last_name=last)

    def _submission_time(self, filename: str, fields: dict[str, str]) -> str:
        """The submission's time, as the module doc says where it comes from (UTC, nbgrader's
        timestamp format)."""
        given = self._instructor_times().get(fields["student_id"])
        if given is not None:
            return given.isoformat(" ")
        if fields.get("timestamp"):
            return fields["timestamp"]
        try:
            seconds = os.stat(filename).st_mtime
        except OSError:
            seconds = datetime.datetime.now(datetime.UTC).timestamp()
        when = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(tzinfo=None)
        if not self.named_regexp:
            when = self._as_canvas_says(filename, when, bool(fields.get("late")))
        return when.isoformat(" ")

    def _as_canvas_says(self, filename: str, when: datetime.datetime, late: bool):
        due = self._due_date()
        is_canvas = _CANVAS.match(Path(filename).name) is not None
        if due is None or not is_canvas or late == (when > due):
            return when
        moved = due + datetime.timedelta(seconds=1) if late else due
        self.log.warning("%s: Canvas says %s, the download's time %s says otherwise; "
                         "recorded as %s", filename, "late" if late else "on time", when,
                         moved)  # fmt: skip
        return moved

    def _due_date(self) -> datetime.datetime | None:
        """The assignment's due date in the gradebook (naive UTC), or None."""
        if not hasattr(self, "_due"):
            self._due = None
            coursedir = getattr(self.parent, "coursedir", None)
            if coursedir is not None:
                with Gradebook(coursedir.db_url, course_id=coursedir.course_id) as gradebook:
                    try:
                        self._due = gradebook.find_assignment(coursedir.assignment_id).duedate
                    except MissingEntry:
                        pass
        return self._due

    def _download_folder(self) -> Path | None:
        """downloaded/<assignment>/ (the archive's folder's parent), or None when not run by
        zip_collect."""
        app = self.parent
        try:
            return Path(app._format_collect_path(app.archive_directory)).parent
        except AttributeError:
            return None

    def _instructor_times(self) -> dict[str, datetime.datetime]:
        """student id -> time, from submission_times.csv beside the download (module doc);
        a row that is not a valid student id and a time is named in an error and left out."""
        if getattr(self, "_times", None) is None:
            self._times: dict[str, datetime.datetime] = {}
            folder = self._download_folder()
            path = folder / TIMES_FILE if folder is not None else None
            if path is not None and path.is_file():
                self._times = self._read_times(path)
        return self._times

    def _read_times(self, path: Path) -> dict[str, datetime.datetime]:
        times = {}
        with open(path, newline="", encoding="utf-8") as handle:
            for number, row in enumerate(csv.DictReader(handle), start=2):
                student, stamp = row.get("student_id"), row.get("timestamp") or ""
                try:
                    when = parse_utc(stamp).replace(tzinfo=None)
                except (ValueError, OverflowError):
                    when = None
                if not valid_student_id(student) or when is None:
                    self.log.error("%s line %d: not a student id and a time: %s", path, number,
                                   ascii(row))  # fmt: skip
                    continue
                times[str(student)] = when
        return times

    def _ambiguous(self) -> dict[str, str]:
        """file -> the other files of its (student, notebook) group, for groups of several
        files of which one has no timestamp (read once from the extracted directory)."""
        if getattr(self, "_clashes", None) is None:
            self._clashes = {}
            groups: dict[tuple, list[tuple[str, object]]] = {}
            for path in self._extracted_files():
                fields = lms_fields(path) if not self.named_regexp else super()._match(str(path))
                if fields and valid_student_id(fields.get("student_id")):
                    key = (fields["student_id"], Path(fields["file_id"]).stem)
                    groups.setdefault(key, []).append((str(path), fields.get("timestamp")))
            for members in groups.values():
                if len(members) > 1 and any(stamp is None for _, stamp in members):
                    for member, _ in members:
                        others = ", ".join(p for p, _ in members if p != member)
                        self._clashes[member] = others
        return self._clashes

    def _extracted_files(self) -> list[Path]:
        app = self.parent  # the ZipCollectApp
        try:
            top = app._format_collect_path(app.extracted_directory)
        except AttributeError:  # not run by zip_collect
            return []
        return [Path(root) / name for root, _, names in os.walk(top) for name in names]
