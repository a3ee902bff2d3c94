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

import re
from pathlib import Path

from nbgrader.plugins import FileNameCollectorPlugin

_BLACKBOARD = re.compile(
    r"^.+_(?P<student_id>[^_/]+)_attempt_"
    r"(?P<timestamp>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})_(?P<file_id>.+)$"
)
_CANVAS = re.compile(
    r"^[a-z0-9]+(?:_LATE)?_(?P<student_id>\d+)_\d+_(?P<file_id>.+)$", re.IGNORECASE
)
_MOODLE_FILE = re.compile(r"^.+_(?P<student_id>\d+)_assignsubmission_file_(?P<file_id>.+)$")
_MOODLE_FOLDER = re.compile(r"^.+_(?P<student_id>\d+)_assignsubmission_file_?$")
# what LMSs and browsers append to a re-submitted or re-downloaded file: "-1", " (1)"
_COPY_SUFFIX = re.compile(r"(?:-\d+| \(\d+\))$")


def lms_fields(path: Path) -> dict[str, str] | None:
    """student_id, file_id (and timestamp) from an LMS download's file path; None if unknown."""
    name = path.name
    found = _BLACKBOARD.match(name)
    if found:
        fields = found.groupdict()
        day, time = fields["timestamp"][:10], fields["timestamp"][11:].replace("-", ":")
        fields["timestamp"] = f"{day} {time}"
    else:
        found = _MOODLE_FILE.match(name) or _CANVAS.match(name)
        folder = _MOODLE_FOLDER.match(path.parent.name)
        if found:
            fields = found.groupdict()
        elif folder:
            fields = {"student_id": folder["student_id"], "file_id": name}
        else:
            return None
    file_id = Path(fields["file_id"])
    fields["file_id"] = _COPY_SUFFIX.sub("", file_id.stem) + file_id.suffix
    return fields


class LmsFileNameCollector(FileNameCollectorPlugin):
    """zip_collect's collector for Canvas, Moodle and Blackboard downloads (see module doc)."""

    def _match(self, filename: str):
        if self.named_regexp:  # the instructor's own pattern
            return super()._match(filename)
        fields = lms_fields(Path(filename))
        if fields is None:
            self.log.warning("not a Canvas, Moodle or Blackboard file name: %s", filename)
        return fields
