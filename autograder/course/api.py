"""In-process access to nbgrader for a course directory (one import, no subprocess per step)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from autograder.course.build import tool_env
from autograder.nbgrader_plugins.speedups import (
    skip_slow_optional_imports,
    stamp_new_gradebooks_in_process,
)


class CourseError(RuntimeError):
    """The course directory cannot be used (no nbgrader_config.py, ...)."""


def nbgrader_api(course: Path, db_url: str | None = None):
    """An NbGraderAPI configured from the course's own nbgrader_config.py; `db_url` (any
    SQLAlchemy URL, e.g. postgresql+psycopg://grader@/course?host=/run/pg) overrides its
    gradebook."""
    skip_slow_optional_imports()
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    # nbgrader's Gradebook.add_submission trips SQLAlchemy 2.0's autoflush warnings; they are
    # about nbgrader's session handling, not our data, and only clutter the instructor's output.
    from sqlalchemy.exc import SAWarning
    from traitlets.config.loader import PyFileConfigLoader

    warnings.filterwarnings("ignore", category=SAWarning, module="nbgrader")
    stamp_new_gradebooks_in_process()
    course = Path(course).resolve()
    if not (course / "nbgrader_config.py").is_file():
        raise CourseError(f"{course} has no nbgrader_config.py; run `attn-grade build` first")
    # nbgrader's Gradebook runs `alembic` from PATH when it creates a database.
    os.environ["PATH"] = tool_env()["PATH"]
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    if db_url:
        config.CourseDirectory.db_url = db_url
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def require_success(result: dict, what: str) -> None:
    if not result.get("success"):
        raise CourseError(f"{what} failed:\n{result.get('error') or result.get('log')}")
