"""The gradebook as the audit log is checked against it: each submission's auto score.

`attn-grade autograde` regrades a submission whose gradebook score is not its newest audit
record's (an older backup restored, an edit), and `attn-grade verify` says so; `regrade --diff`
shows the gradebook's score where there is no record. Read only: nothing here writes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from autograder.core.errors import EnvironmentFailure, describe_failure, environment_cause

UNREADABLE = (
    "restore it from a backup, then run `attn-grade autograde` (it regrades every submission "
    "the backup holds otherwise than the audit log)"
)


def gradebook_name(url: str) -> str:
    """The gradebook as a person names it: the sqlite file, else the URL without its password
    (query values such as a socket folder unencoded)."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    try:
        from sqlalchemy.engine import make_url

        parts = make_url(url)
    except Exception:  # noqa: BLE001 - an unparsable URL is still shown, without its password
        return url.split("@")[-1]
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    query = "&".join(f"{key}={value}" for key, value in parts.query.items())
    text = f"{parts.drivername}://{user}{parts.host or ''}{port}/{parts.database or ''}"
    return text + (f"?{query}" if query else "")


def auto_score(submission) -> float:
    """The gradebook's auto score of a submission (nbgrader's SubmittedAssignment): what the
    checks gave, the sum of its audit record's `checks` (hand grades are apart)."""
    return sum(g.auto_score or 0.0 for n in submission.notebooks for g in n.grades)


def auto_scores(course: Path, db_url: str | None, keys: list[tuple[str, str]]) -> dict | None:
    """(exercise, student) -> the gradebook's auto score, for each of `keys` it holds; None
    when the folder is not an nbgrader course (no gradebook to read). An sqlite gradebook is
    opened read-only (nbgrader's Gradebook creates what is missing), and one that does not
    exist holds nothing. One that cannot be read is an EnvironmentFailure naming it."""
    from autograder.course.api import CourseError, nbgrader_api

    try:
        api = nbgrader_api(course, db_url)
    except CourseError:
        return None
    url = api.coursedir.db_url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            return {}
        url = f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&uri=true"
    from nbgrader.api import Gradebook, MissingEntry

    found = {}
    try:
        with Gradebook(url, course_id=api.coursedir.course_id) as gradebook:
            for exercise, student in keys:
                try:
                    submission = gradebook.find_submission(exercise, student)
                except MissingEntry:
                    continue
                found[(exercise, student)] = auto_score(submission)
    except Exception as error:
        cause = environment_cause(error)
        if cause is None:
            raise
        raise EnvironmentFailure(
            f"the gradebook {gradebook_name(api.coursedir.db_url)} cannot be read: "
            f"{describe_failure(cause)}; {UNREADABLE}"
        ) from error
    return found
