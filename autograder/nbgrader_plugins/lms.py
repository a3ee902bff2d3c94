"""`nbgrader zip_collect` of an LMS download without a hand-written pattern.

The course config makes LmsFileNameCollector zip_collect's collector plugin. It knows the file
names of the common "download all submissions" archives (ids below are what becomes the
nbgrader student id):
- Canvas: `doejane_12345_6789012_ex1_numpy_attention.ipynb` (`_LATE_` after the login when
  late; a re-submission may end in `-1`): the Canvas user id, 12345. The login is whatever
  Canvas kept of the name (any script: `김민준_10001_...`, or nothing: `_10001_...`); the two
  numbers identify the file.
- Moodle: `Jane Doe_123456_assignsubmission_file_/ex1_numpy_attention.ipynb` (one folder per
  participant, which may hold folders of the student's; older versions put it in the file
  name): the participant id, 123456.
- Blackboard: `Exercise 1_jdoe_attempt_2026-11-20-14-05-09_ex1_numpy_attention.ipynb`: the
  username, jdoe; the attempt time becomes the submission's timestamp (the last attempt wins).
Only the top of the download decides (`lms_fields`): a name below it, in a folder a student
made, never says whose a file is. A `named_regexp` set in nbgrader_config.py still wins over
these. Every file left out is named at the end (`left_out.py`).

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
from pathlib import Path, PurePosixPath

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import FileNameCollectorPlugin
from nbgrader.utils import parse_utc

from autograder.core.student_tree import walk
from autograder.core.text import clean_text
from autograder.nbgrader_plugins import left_out
from autograder.nbgrader_plugins.intake import valid_student_id
from autograder.nbgrader_plugins.lms_files import (
    MOODLE_FOLDER,
    NAMES_FILE,
    TIMES_FILE,
    download_name,
    download_path,
    lms_fields,
    recorded_names,
)
from autograder.nbgrader_plugins.names import recordable, split_name


class LmsFileNameCollector(FileNameCollectorPlugin):
    """zip_collect's collector for Canvas, Moodle and Blackboard downloads (see module doc).

    The extracted tree is read without following links (links and special files are refused);
    student ids that are not `intake.SAFE_ID` are refused; two notebooks of one student for
    the same notebook without LMS times to choose between are both refused (nbgrader would stop
    the whole collect). Each refused or skipped file is named in a warning and in the summary
    zip_collect ends with (`left_out.py`: exit code 1 when a notebook was left out)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # the extracted tree is read even when it has no plain file for nbgrader to offer
        left_out.end_with_summary(self.parent, first=self._plain_files)

    def collect(self, submitted_file: str):
        plain = self._plain_files()
        if plain is not None and os.path.normpath(submitted_file) not in plain:
            if os.path.normpath(submitted_file) not in self._refused:
                self._refuse(submitted_file, "not found as a plain file in the extracted tree")
            return None  # else a link or a special file: refused and named by _plain_files
        if os.path.splitext(submitted_file)[1] not in self.valid_ext:
            left_out.record(self.parent, self._shown(submitted_file), "not a notebook", fails=False)
            return None
        return super().collect(submitted_file)

    def _match(self, filename: str):
        if self.named_regexp:  # the instructor's own pattern
            fields = super()._match(filename)
            if fields is None:
                self._refuse(filename, "does not match your named_regexp")
                return None
        else:
            fields = lms_fields(self._relative(filename))
            if fields is None:
                self._refuse(filename, "no Canvas, Moodle or Blackboard fields where the LMS "
                             "writes them (a top-level file name, or Moodle's top-level "
                             "participant folder)")  # fmt: skip
                return None
            if "ambiguous" in fields:
                self._refuse(filename, fields["ambiguous"] + ": rename it to the download's "
                             "name for the right student and collect again")  # fmt: skip
                return None
        student = fields.get("student_id")
        if not valid_student_id(student):
            self._refuse(filename, f"the student id {student!a} is not letters, digits "
                         "and . _ @ - (at most 64)")  # fmt: skip
            return None
        clash = self._ambiguous().get(os.path.normpath(filename))
        if clash:
            self._refuse(filename, f"the same student ({student}) and notebook as {clash}, and "
                         "no submission time to choose the latest")  # fmt: skip
            return None
        self._record_name(filename, fields)
        self._remember_download_name(filename)
        when = self._submission_time(filename, fields)
        return {"student_id": fields["student_id"], "file_id": fields["file_id"], "timestamp": when}

    def _refuse(self, filename: str, reason: str) -> None:
        shown = self._shown(filename)
        self.log.warning("refused %s: %s", clean_text(shown, 300), clean_text(reason, 600))
        left_out.record(self.parent, shown, reason)

    def _shown(self, filename: str) -> str:
        """`filename` relative to the download folder (downloaded/<assignment>/)."""
        download = self._download_folder()
        return os.path.relpath(filename, download) if download is not None else filename

    def _relative(self, filename: str) -> PurePosixPath:
        """The file's path inside its download (`download_path`); its name alone when not run
        by zip_collect."""
        extracted = self._extracted_folder()
        if extracted is None:
            return PurePosixPath(Path(filename).name)
        return download_path(extracted, Path(filename))

    def _plain_files(self) -> set[str] | None:
        """The plain files of the extracted tree (read once, links never followed; everything
        else is refused and named); None when not run by zip_collect."""
        if not hasattr(self, "_plain"):
            self._plain: set[str] | None = None
            self._refused: set[str] = set()
            extracted = self._extracted_folder()
            if extracted is not None and extracted.is_dir():
                tree = walk(extracted, follow_top=True)
                top = os.path.normpath(extracted)
                self._plain = {os.path.join(top, *path.parts) for path in tree.files}
                for refusal in tree.refused:
                    self._refused.add(os.path.join(top, *refusal.path.parts[1:]))
                    where = os.path.join(extracted.name, *refusal.path.parts[1:])
                    self.log.warning("refused %s: %s", clean_text(where, 300), refusal.reason)
                    left_out.record(self.parent, where, refusal.reason)
        return self._plain

    def _remember_download_name(self, filename: str) -> None:
        """Keep the LMS's name for the student's files beside the download (NAMES_FILE), so
        that feedback and grades go back under it after later downloads too."""
        named = download_name(self._relative(filename)) if not self.named_regexp else None
        download = self._download_folder()
        if named is None or download is None:
            return
        names = recorded_names(download)
        lms, student, prefix = named
        names.setdefault(lms, {})[student] = prefix
        (download / NAMES_FILE).write_text(json.dumps(names, indent=1, sort_keys=True) + "\n")

    def _record_name(self, filename: str, fields: dict[str, str]) -> None:
        """The name Moodle's participant folder shows goes into the gradebook as a first and a
        last name (`names.py`), so nbgrader export and formgrader show it; a student who
        already has a name there (a roster) keeps it. Canvas and Blackboard names in downloads
        are logins, not names: not recorded."""
        coursedir = getattr(self.parent, "coursedir", None)
        if fields.get("lms") != "moodle" or coursedir is None or self.named_regexp:
            return
        folder = MOODLE_FOLDER.match(self._relative(filename).parts[0])
        student = fields["student_id"]
        if folder is None:  # Moodle's older layout: the name is in the file name
            return
        name = " ".join(folder["name"].split())
        if not recordable(name):
            self.log.warning("%s: the name %s is not recorded in the gradebook (it holds markup, "
                             "quotes or control characters); the LMS files still use it",
                             self._shown(filename), ascii(name))  # fmt: skip
            return
        first, last = split_name(name)
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
        if fields.get("lms") == "canvas" and not self.named_regexp:
            when = self._as_canvas_says(filename, when, bool(fields.get("late")))
        return when.isoformat(" ")

    def _as_canvas_says(self, filename: str, when: datetime.datetime, late: bool):
        due = self._due_date()
        if due is None or late == (when > due):
            return when
        moved = due + datetime.timedelta(seconds=1) if late else due
        self.log.warning("%s: Canvas says %s, the download's time %s says otherwise; "
                         "recorded as %s", self._shown(filename), "late" if late else "on time",
                         when, moved)  # fmt: skip
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
        """notebook -> the other notebooks of its (student, notebook name) group, for groups of
        several files of which one has no timestamp (read once from the extracted tree)."""
        if getattr(self, "_clashes", None) is None:
            self._clashes: dict[str, str] = {}
            groups: dict[tuple, list[tuple[str, object]]] = {}
            for path in sorted(self._plain_files() or ()):
                if os.path.splitext(path)[1] not in self.valid_ext:
                    continue
                if self.named_regexp:
                    fields = super()._match(path)
                else:
                    fields = lms_fields(self._relative(path))
                if fields and valid_student_id(fields.get("student_id")):
                    key = (fields["student_id"], fields["file_id"])
                    groups.setdefault(key, []).append((path, fields.get("timestamp")))
            for members in groups.values():
                if len(members) > 1 and any(stamp is None for _, stamp in members):
                    for member, _ in members:
                        others = ", ".join(self._shown(p) for p, _ in members if p != member)
                        self._clashes[member] = others
        return self._clashes

    def _extracted_folder(self) -> Path | None:
        """downloaded/<assignment>/extracted/, or None when not run by zip_collect."""
        app = self.parent  # the ZipCollectApp
        try:
            return Path(app._format_collect_path(app.extracted_directory))
        except AttributeError:
            return None
