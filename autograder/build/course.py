"""Build an nbgrader course: config, source notebooks, and the release via nbgrader itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jinja2
import nbformat

from autograder.build.notebook import to_notebook
from autograder.build.render import render_cells
from autograder.exercises import EXERCISES, resolve

COURSE_ID = "attention-transformers"
_CONFIG_TEMPLATE = Path(__file__).with_name("nbgrader_config.py.j2")


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
        [sys.executable, "-m", "autograder.nbgrader_bridge.nbgrader_main", *args],
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


def write_config(
    course_dir: Path, *, db_url: str | None = None, exchange_root: str | None = None
) -> Path:
    text = jinja2.Template(
        _CONFIG_TEMPLATE.read_text(), trim_blocks=True, keep_trailing_newline=True
    ).render(course_id=COURSE_ID, db_url=db_url, exchange_root=exchange_root)
    path = course_dir / "nbgrader_config.py"
    path.write_text(text)
    return path


def source_notebook_path(course_dir: Path, exercise: str) -> Path:
    return course_dir / "source" / exercise / f"{exercise}.ipynb"


def release_notebook_path(course_dir: Path, exercise: str) -> Path:
    return course_dir / "release" / exercise / f"{exercise}.ipynb"


def write_source(course_dir: Path, exercise: str, lang: str) -> Path:
    path = source_notebook_path(course_dir, exercise)
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = to_notebook(render_cells(exercise, lang), exercise, lang)
    nbformat.write(notebook, path)
    return path


def build_course(
    course_dir: Path,
    exercises: list[str] | None = None,
    *,
    lang: str = "en",
    release: bool = True,
    db_url: str | None = None,
    exchange_root: str | None = None,
) -> list[Path]:
    """Write config and source notebooks; with `release`, run `nbgrader generate_assignment`.

    Returns the release notebooks (or the source notebooks without `release`)."""
    course_dir = Path(course_dir).resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    write_config(course_dir, db_url=db_url, exchange_root=exchange_root)
    chosen = [resolve(name) for name in exercises] if exercises else list(EXERCISES)
    built = []
    for exercise in chosen:
        source = write_source(course_dir, exercise, lang)
        if release:
            run_nbgrader(course_dir, "generate_assignment", exercise, "--force")
            built.append(release_notebook_path(course_dir, exercise))
        else:
            built.append(source)
    return built
