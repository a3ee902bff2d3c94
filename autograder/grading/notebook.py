"""Read a submitted notebook without trusting it: size, JSON, structure, exercise, program.

Only the code of setup, solution and student-added cells becomes the program; our own visible
check and demo cells (identified by grade id from the exercise's template) are not run: the
hidden checks replace the former, and the latter only show results: `demos` keeps them for the
outputs of the autograded notebook (autograder.grading.displays).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.errors import GradedOutcome
from autograder.core.registry import EXERCISES
from autograder.notebooks.render import cell_roles

MAX_NOTEBOOK_BYTES = 16 << 20
RUN_ROLES = ("setup", "solution", "student")


@dataclass(frozen=True)
class ProgramCell:
    """One cell of the program a submission runs (grading.submission). It lives here, with
    the reading that makes programs, so that reading a notebook (a batch's planning and its
    course report) does not import the sandbox and PyTorch with the submission."""

    label: str  # shown in messages: "cell 7 (softmax)"
    source: str


class InvalidNotebook(GradedOutcome):
    """The file cannot be graded as a notebook of the exercise; the message says why."""


@dataclass
class LoadedNotebook:
    exercise: str
    program: list[ProgramCell] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # tolerated irregularities, for feedback
    demos: dict[str, ProgramCell] = field(default_factory=dict)  # grade id -> demo cell, in order


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise InvalidNotebook("a cell's source is neither text nor a list of lines")


def _grade_id(cell: dict) -> str | None:
    metadata = cell.get("metadata")
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    if isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id"), str):
        return nbgrader["grade_id"]
    return None


def exercise_from_name(path: Path) -> str | None:
    stem = path.stem
    return next((exercise for exercise in EXERCISES if exercise in stem), None)


def declared_exercise(notebook: dict) -> str | None:
    metadata = notebook.get("metadata")
    declared = (metadata or {}).get("attn_grade") if isinstance(metadata, dict) else None
    if isinstance(declared, dict) and declared.get("exercise") in EXERCISES:
        return declared["exercise"]
    return None


def read_json(path: Path) -> dict:
    if not path.is_file():
        raise InvalidNotebook("not a regular file")
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise InvalidNotebook(
            f"the file is {size} bytes; notebooks over {MAX_NOTEBOOK_BYTES} bytes are not graded"
        )
    try:
        notebook = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidNotebook(f"the file is not valid JSON ({str(error)[:200]})") from None
    except OSError as error:
        raise InvalidNotebook(f"the file cannot be read ({error.strerror})") from None
    except RecursionError:
        raise InvalidNotebook("the file's JSON is nested too deeply to be a notebook") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise InvalidNotebook("the file is JSON but not a Jupyter notebook (no list of cells)")
    if notebook.get("nbformat") != 4:
        raise InvalidNotebook(
            f"only nbformat 4 notebooks are graded (got {notebook.get('nbformat')!r})"
        )
    return notebook


def program_of(notebook: dict, exercise: str) -> LoadedNotebook:
    """The cells to run, with labels for messages: setup cells first, then the others in
    notebook order. InvalidNotebook for any structure that cannot be read as a notebook."""
    try:
        return _program_of(notebook, exercise)
    except InvalidNotebook:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as error:
        raise InvalidNotebook(
            f"the notebook's structure is malformed ({type(error).__name__})"
        ) from None


def _program_of(notebook: dict, exercise: str) -> LoadedNotebook:
    roles = cell_roles(exercise)
    loaded = LoadedNotebook(exercise)
    seen: dict[str, int] = {}
    setup: list[ProgramCell] = []
    for index, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict):
            raise InvalidNotebook(f"cell {index} is not an object")
        if cell.get("cell_type") != "code":
            continue
        grade_id = _grade_id(cell)
        role = roles.get(grade_id, "student") if grade_id else "student"
        if grade_id:
            seen[grade_id] = seen.get(grade_id, 0) + 1
        label = f"cell {index}" + (f" ({grade_id})" if grade_id else "")
        if role == "demo" and grade_id and grade_id not in loaded.demos:
            loaded.demos[grade_id] = ProgramCell(label, _source(cell))
        if role not in RUN_ROLES:
            continue
        program = setup if role == "setup" else loaded.program
        program.append(ProgramCell(label, _source(cell)))
    # Our setup cells (the imports) run first wherever they ended up, so a notebook whose cells
    # were moved around still gets its imports before its definitions.
    loaded.program[:0] = setup
    for grade_id, count in seen.items():
        if count > 1:
            loaded.problems.append(f"grade id {grade_id!r} appears in {count} cells")
    for grade_id, role in roles.items():
        if role == "solution" and grade_id not in seen:
            loaded.problems.append(f"the solution cell {grade_id!r} is missing")
    return loaded
