"""Who a file of an LMS download belongs to: the fields Canvas, Moodle and Blackboard write in
the names of their "download all submissions" archives, read at the one place each writes
them (the formats are described in lms.py, the collector that uses them), and the LMS's names
for each student's files that a zip_collect keeps beside the download for lms_return.py."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePath, PurePosixPath

# Each LMS writes its fields at one fixed place of its download, and only there are they read:
# Moodle's at the end of the participant folder at the top of the download (a student's display
# name may hold anything before them; the folders she makes inside it are hers and never
# decide), Canvas's and Blackboard's at the start of a file name at the top of the download
# (the first `_attempt_<time>_` group; the student's own file name only ever comes after them).
_BLACKBOARD = re.compile(
    r"^.+?_(?P<student_id>[^_/]+)_attempt_"
    r"(?P<timestamp>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})_(?P<file_id>.+)$"
)
# Canvas: `<login>_[LATE_]<user id>_<attachment id>_<file>`. The login is what Canvas keeps of
# the sortable name (its word characters, in any script, or nothing); the two numbers identify
# the file. Both ends are the student's (a display name "Mallory__10002__7" gives the login
# "mallory_10002_7"; the file name is whatever was uploaded), so every place the two numbers
# could be is a candidate (`canvas_candidates`), and a name with more than one is refused.
_CANVAS_FIELDS = re.compile(r"(?=(?P<late>_LATE)?_(?P<student_id>\d+)_(?P<attachment>\d+)_)")
_MOODLE_FILE = re.compile(r"^.+?_(?P<student_id>\d+)_assignsubmission_file_(?P<file_id>.+)$")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<student_id>\d+)_assignsubmission_file_?$")
_FILE_NAMES = (("blackboard", _BLACKBOARD), ("moodle", _MOODLE_FILE))
TIMES_FILE = "submission_times.csv"
# what LMSs and browsers append to a re-submitted or re-downloaded file: "-1", " (1)"
_COPY_SUFFIX = re.compile(r"(?:-\d+| \(\d+\))$")


def download_path(extracted: Path, path: Path) -> PurePosixPath:
    """The path of an extracted file inside its download: below `extracted/<name>/` for a zip
    the instructor placed (or a download folder placed unpacked), below `extracted/` itself for
    a file or a Moodle participant folder placed as it is."""
    parts = Path(path).relative_to(extracted).parts
    if len(parts) > 1 and not MOODLE_FOLDER.match(parts[0]):
        parts = parts[1:]
    return PurePosixPath(*parts)


def canvas_candidates(name: str) -> list[dict[str, str]]:
    """Every reading of `name` as Canvas's `<login>_[LATE_]<user id>_<attachment id>_<file>`:
    login, student_id, file_id, late, and `prefix` (the name up to the student's file)."""
    found: dict[int, dict[str, str]] = {}  # by where the file's name starts: one reading each
    for match in _CANVAS_FIELDS.finditer(name):
        start = match.start()
        late = match["late"] or ""
        if start == 0 and not late and not name.startswith("_"):
            continue  # no room for a login, and no "_" to end it
        prefix_end = start + len(late) + len(match["student_id"]) + len(match["attachment"]) + 3
        file_id = name[prefix_end:]
        if not file_id:
            continue
        found.setdefault(  # "_LATE_<id>_..." is read once, as late
            prefix_end,
            {
                "student_id": match["student_id"],
                "file_id": file_id,
                "late": "late" if late else "",
                "prefix": name[:prefix_end],
            },
        )
    return list(found.values())


def _canvas(name: str) -> dict[str, str] | None:
    """The one reading of a Canvas file name (`canvas_candidates`); a name with several is
    {"ambiguous": ...}: the real fields are always one reading, so any other one was written by
    the student (in the login or the uploaded file's name), and no rule can tell them apart."""
    candidates = canvas_candidates(name)
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    ids = ", ".join(sorted({c["student_id"] for c in candidates}))
    return {"ambiguous": f"the name reads as Canvas's fields of more than one student ({ids})"}


def _without_copy_suffix(file_id: str) -> str:
    path = PurePosixPath(file_id)
    return _COPY_SUFFIX.sub("", path.stem) + path.suffix


def lms_fields(relative: PurePath) -> dict[str, str] | None:
    """lms, student_id, file_id (and timestamp, late) of the file at `relative`, its path inside
    its download (`download_path`); None when no LMS's fields are where that LMS writes them;
    {"ambiguous": why} for a Canvas name that reads as more than one student's. A file below
    the top is
    Moodle's participant folder's or no one's; a file at the top is read by the LMS whose fields
    end first in its name (the student's own file name only ever comes after them, so a name
    that imitates another LMS's fields cannot be read as them)."""
    parts = relative.parts
    if len(parts) > 1:
        folder = MOODLE_FOLDER.match(parts[0])
        if folder is None:
            return None
        fields = {"lms": "moodle", "student_id": folder["student_id"], "file_id": parts[-1]}
    elif len(parts) == 1:
        found: list[tuple[str, int, dict[str, str]]] = []
        for lms, pattern in _FILE_NAMES:
            if matched := pattern.match(parts[0]):
                found.append((lms, matched.start("file_id"), dict(matched.groupdict())))
        canvas = _canvas(parts[0])
        if canvas is not None and "ambiguous" in canvas:
            return canvas
        if canvas is not None:
            found.append(("canvas", len(canvas["prefix"]), canvas))
        if not found:
            return None
        lms, _, chosen = min(found, key=lambda item: item[1])
        fields = {"lms": lms, "student_id": chosen["student_id"], "file_id": chosen["file_id"]}
        if chosen.get("late"):
            fields["late"] = "late"
        if chosen.get("timestamp"):
            day, time = chosen["timestamp"][:10], chosen["timestamp"][11:].replace("-", ":")
            fields["timestamp"] = f"{day} {time}"
    else:
        return None
    fields["file_id"] = _without_copy_suffix(fields["file_id"])
    return fields


NAMES_FILE = "lms_students.json"  # beside the download: {lms: {student id: prefix}}


def download_name(relative: PurePath) -> tuple[str, str, str] | None:
    """(lms, student id, the name the LMS gave the student's files without the notebook's
    name) of the file at `relative` inside its download: Canvas's file-name prefix
    (`doejane_12345_6789012_`), Moodle's participant folder (`Jane Doe_123456_assignsubmission
    _file_/`); None for a file that is neither (Blackboard has no bulk feedback upload of this
    kind)."""
    fields = lms_fields(relative)
    if fields is None or "ambiguous" in fields:
        return None
    if fields["lms"] == "moodle" and len(relative.parts) > 1:
        return "moodle", fields["student_id"], relative.parts[0] + "/"
    canvas = _canvas(relative.name) if fields["lms"] == "canvas" else None
    if canvas and "prefix" in canvas:  # Canvas's fields, up to the student's own file name
        return "canvas", fields["student_id"], canvas["prefix"]
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
