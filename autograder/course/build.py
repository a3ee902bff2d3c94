"""Build an nbgrader course: config, source notebooks, and the release via nbgrader itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import nbformat

from autograder.core.errors import UsageError
from autograder.core.registry import core_exercises, resolve
from autograder.notebooks.notebook import to_notebook
from autograder.notebooks.render import LANGUAGES, render_cells

COURSE_ID = "attention-transformers"
_TEMPLATES = Path(__file__).with_name("templates")  # the course configs nbgrader reads
INSTRUCTOR_CONFIG = "nbgrader_config.py"  # the instructor's: written once, never rewritten
GENERATED_CONFIG = "attn_grade_config.py"  # ours: rewritten by every build
SETTINGS = "attn_grade_course.json"  # course settings given to `build`, kept between builds
_OLD_HEADER = "# nbgrader configuration of this course, written by `attn-grade build`"


class BuildError(RuntimeError):
    """nbgrader could not generate a release; carries nbgrader's own output."""


def tool_env() -> dict[str, str]:
    """Environment for nbgrader subprocesses: this interpreter's bin first on PATH, because
    nbgrader's Gradebook runs `alembic` from PATH when it creates a database."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_nbgrader(course_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the nbgrader CLI in `course_dir` (which holds nbgrader_config.py)."""
    result = subprocess.run(
        [sys.executable, "-m", "autograder.nbgrader_plugins.nbgrader_main", *args],
        cwd=course_dir,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        raise BuildError(
            f"`nbgrader {' '.join(args)}` failed ({result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
    return result


def _render(name: str, **values) -> str:
    template = (_TEMPLATES / name).read_text()
    return jinja2.Template(template, trim_blocks=True, keep_trailing_newline=True).render(**values)


def course_settings(course_dir: Path, **given: str | None) -> dict[str, str | None]:
    """The course's settings: those of earlier builds, updated with the ones given now."""
    path = course_dir / SETTINGS
    settings: dict[str, str | None] = {
        "course_id": COURSE_ID,
        "db_url": None,
        "exchange_root": None,
    }
    saved = _saved_settings(path)
    settings.update({k: v for k, v in saved.items() if k in settings and isinstance(v, str)})
    settings.update({k: v for k, v in given.items() if v is not None})
    _save_settings(path, {**saved, **settings})
    return settings


def _saved_settings(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save_settings(path: Path, settings: dict) -> None:
    path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")


def exercise_languages(course_dir: Path, exercises: list[str], lang: str | None) -> dict[str, str]:
    """Each exercise's notebook language: `lang` when given (and remembered in the course's
    settings, like --course-id), else the one it was last built in, else English."""
    path = course_dir / SETTINGS
    saved = _saved_settings(path)
    found = saved.get("languages")
    known: dict[str, str] = {
        e: v for e, v in (found.items() if isinstance(found, dict) else ()) if v in LANGUAGES
    }
    chosen = {e: lang or known.get(e, "en") for e in exercises}
    if lang is None:
        for exercise, kept in chosen.items():
            if kept != "en":
                print(f"attn-grade build: {exercise} stays in {kept} as built before "
                      "(--lang en to change it)")  # fmt: skip
    _save_settings(path, {**saved, "languages": {**known, **chosen}})
    return chosen


# nbgrader's placeholder for a written answer, in the notebook's language
TEXT_STUBS = {"en": "YOUR ANSWER HERE", "ko": "여기에 답을 쓰세요"}


def write_config(
    course_dir: Path,
    *,
    db_url: str | None = None,
    exchange_root: str | None = None,
    course_id: str | None = None,
) -> Path:
    """Regenerate attn_grade_config.py; write nbgrader_config.py (which loads it) only when
    there is none. A config written by an older attn-grade is kept as nbgrader_config.py.old."""
    settings = course_settings(
        course_dir, db_url=db_url, exchange_root=exchange_root, course_id=course_id
    )
    (course_dir / GENERATED_CONFIG).write_text(_render(f"{GENERATED_CONFIG}.j2", **settings))
    if settings["exchange_root"]:
        ensure_exchange(Path(settings["exchange_root"]))
    path = course_dir / INSTRUCTOR_CONFIG
    if path.is_file() and path.read_text().startswith(_OLD_HEADER):
        path.replace(path.with_name(f"{INSTRUCTOR_CONFIG}.old"))
        print(
            f"attn-grade build: {path} was written by an older attn-grade; it is now "
            f"{INSTRUCTOR_CONFIG}.old. Copy any settings you added into the new {path.name}.",
            file=sys.stderr,
        )
    if not path.exists():
        path.write_text(_render(f"{INSTRUCTOR_CONFIG}.j2"))
    return path


def ensure_exchange(root: Path) -> None:
    """nbgrader's exchange, as its docs set it up: a folder every user can write to (1777, as
    /tmp: no one removes another's entries), made when missing. nbgrader creates the course's
    folders inside it, but not the exchange itself: `release_feedback` (and students'
    `fetch_assignment`) stopped with "Unwritable directory" where it was missing, an
    LMS-only course included. A folder that exists is left as it is, with a warning when
    nbgrader cannot use it."""
    if not root.exists():
        root.mkdir(parents=True)
        root.chmod(0o1777)
        print(f"attn-grade build: made the exchange {root} (mode 1777)")
    elif not (root.is_dir() and os.access(root, os.W_OK | os.X_OK)):
        print(f"attn-grade build: the exchange {root} is not a folder you can write to; "
              "nbgrader's release and collect will stop there", file=sys.stderr)  # fmt: skip


def source_notebook_path(course_dir: Path, exercise: str) -> Path:
    return course_dir / "source" / exercise / f"{exercise}.ipynb"


def release_notebook_path(course_dir: Path, exercise: str) -> Path:
    return course_dir / "release" / exercise / f"{exercise}.ipynb"


def refuse_rebuilding_handed_in(course_dir: Path, exercises: list[str]) -> None:
    """A rebuild changes the notebook that students have: an exercise already released with
    submissions is only rebuilt with --force (the submissions stay as they are)."""
    handed_in = {
        exercise: len(list(course_dir.glob(f"submitted/*/{exercise}")))
        for exercise in exercises
        if release_notebook_path(course_dir, exercise).is_file()
    }
    named = [f"{exercise} ({count} submitted)" for exercise, count in handed_in.items() if count]
    if named:
        raise UsageError(
            f"{', '.join(named)}: released, with submissions; rebuilding changes the notebook "
            "students have (their submissions stay). Add --force to rebuild anyway."
        )


def write_source(course_dir: Path, exercise: str, lang: str, small_demo: bool = False) -> Path:
    path = source_notebook_path(course_dir, exercise)
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = to_notebook(render_cells(exercise, lang, small_demo), exercise, lang)
    nbformat.write(notebook, path)
    return path


def build_course(
    course_dir: Path,
    exercises: list[str] | None = None,
    *,
    lang: str | None = None,
    release: bool = True,
    db_url: str | None = None,
    exchange_root: str | None = None,
    course_id: str | None = None,
    force: bool = False,
    small_demo: bool = False,
) -> list[Path]:
    """Write config and source notebooks; with `release`, run `nbgrader generate_assignment`.
    `small_demo`: demo cells on less data and for fewer epochs (each exercise's `small_demo`),
    a course for trying the cycle quickly, not for students.

    Returns the release notebooks (or the source notebooks without `release`)."""
    course_dir = Path(course_dir).resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    # No access for other users: the course holds the reference (source/), every student's
    # submission and the gradebook, and a sandbox uid without a jail or Landlock reads by
    # permissions alone (autograder.sandbox.isolation.require_private). Students reach the
    # course through nbgrader's exchange, which lives elsewhere.
    course_dir.chmod(course_dir.stat().st_mode & 0o770)
    write_config(course_dir, db_url=db_url, exchange_root=exchange_root, course_id=course_id)
    chosen = [resolve(name) for name in exercises] if exercises else list(core_exercises())
    if not force:
        refuse_rebuilding_handed_in(course_dir, chosen)
    languages = exercise_languages(course_dir, chosen, lang)
    built = []
    for exercise in chosen:
        source = write_source(course_dir, exercise, languages[exercise], small_demo)
        if release:
            stub = f"--ClearSolutions.text_stub={TEXT_STUBS[languages[exercise]]}"
            run_nbgrader(course_dir, "generate_assignment", exercise, "--force", stub)
            built.append(release_notebook_path(course_dir, exercise))
        else:
            built.append(source)
    return built
