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
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from nbgrader.plugins import FileNameCollectorPlugin

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
_MOODLE_FOLDER = re.compile(r"^.+_(?P<student_id>\d+)_assignsubmission_file_?$")
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
        if "timestamp" in fields:
            day, time = fields["timestamp"][:10], fields["timestamp"][11:].replace("-", ":")
            fields["timestamp"] = f"{day} {time}"
    file_id = Path(fields["file_id"])
    fields["file_id"] = _COPY_SUFFIX.sub("", file_id.stem) + file_id.suffix
    return fields


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
        return fields

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
