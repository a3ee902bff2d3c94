"""Account for every file under a course's `submitted/`: nothing is skipped without a word.

nbgrader grades `submitted/<student>/<exercise>/<exercise>.ipynb` only. A student whose folder
holds exactly one other notebook (`ex1_numpy_attention (1).ipynb`, `Copy of ...`) is graded
from it: it is copied to the expected name (the original stays) and the table says so. Two or
more candidates, notebooks outside an exercise folder or folders that are not exercises are
not guessed at: they are listed, and `attn-grade autograde` exits 1. `copy=False` (for
`attn-grade regrade --diff`, which writes nothing) finds the misnamed notebook itself instead.
Only plain folders and files are graded (`student_tree.walk`): a link, hard link or special
file anywhere below `submitted/` is listed, with what it is, and not graded.
"""

from __future__ import annotations

import filecmp
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder.core.registry import EXERCISES
from autograder.core.student_tree import walk
from autograder.nbgrader_plugins.intake import valid_student_id

# Files nbgrader itself writes into a submission, and editor leftovers.
KNOWN = {"timestamp.txt", "submission_secret.txt", ".ipynb_checkpoints", ".DS_Store", "__MACOSX"}


@dataclass
class Accounting:
    found: list[tuple[str, str, Path]] = field(default_factory=list)  # exercise, student, path
    notes: dict[tuple[str, str], str] = field(default_factory=dict)  # graded, with a note
    problems: list[str] = field(default_factory=list)  # not graded: the instructor must look
    refused: set[Path] = field(default_factory=set)  # not plain: never read

    def note(self, exercise: str, student: str, text: str) -> None:
        previous = self.notes.get((exercise, student))
        self.notes[(exercise, student)] = f"{previous}; {text}" if previous else text


def _shown(name: str) -> str:
    """A file name for a terminal: control characters escaped (names come from students)."""
    return repr(name)[1:-1]


def _visible(folder: Path, refused: set[Path]) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.name not in KNOWN and p.name[0] != "." and p not in refused
    )


def _exercise_folder(
    folder: Path, exercise: str, student: str, out: Accounting, copy: bool = True
) -> None:
    expected = folder / f"{exercise}.ipynb"
    others = [p for p in _visible(folder, out.refused) if p != expected]
    notebooks = [p for p in others if p.suffix == ".ipynb"]
    if expected.is_file() and expected not in out.refused:
        copies = [p for p in notebooks if filecmp.cmp(p, expected, shallow=False)]
        if len(copies) == 1 and len(notebooks) == 1:  # our copy of a misnamed notebook
            out.note(exercise, student, f"graded {copies[0].name!r} (misnamed)")
        elif notebooks:
            names = ", ".join(repr(p.name) for p in notebooks)
            out.note(
                exercise, student, f"graded {expected.name!r}; also submitted, not graded: {names}"
            )
        out.found.append((exercise, student, expected))
    elif len(notebooks) == 1:
        if copy:
            shutil.copyfile(notebooks[0], expected)
        out.note(exercise, student, f"graded {notebooks[0].name!r} (misnamed)")
        out.found.append((exercise, student, expected if copy else notebooks[0]))
    else:
        names = ", ".join(repr(p.name) for p in notebooks) or "none"
        out.problems.append(
            f"{_shown(student)}/{exercise}: not graded: no {expected.name}, and "
            f"{len(notebooks)} other notebooks ({names}); rename the one to grade"
        )
    extra = [p.name for p in others if p.suffix != ".ipynb"]
    if extra:
        out.note(exercise, student, f"other files: {', '.join(map(repr, extra))}")


def account(course: Path, exercises: list[str], copy: bool = True) -> Accounting:
    """Every file under `course/submitted`, for the requested exercises; `copy=False` leaves
    the course as it is (a misnamed notebook is found under its own name)."""
    out = Accounting()
    root = Path(course) / "submitted"
    if not root.is_dir():
        return out
    for refusal in walk(root, follow_top=True).refused:
        out.refused.add(root.parent.joinpath(*refusal.path.parts))
        out.problems.append(f"{refusal}: not graded (only plain files and folders are)")
    for student_dir in _visible(root, out.refused):
        student = student_dir.name
        if not valid_student_id(student):
            out.problems.append(
                f"{student!a}: not a valid student id (letters, digits and . _ @ -, at "
                "most 64), not graded"
            )
            continue
        if not student_dir.is_dir():
            out.problems.append(f"{_shown(student)}: a file directly in submitted/, not graded")
            continue
        for folder in _visible(student_dir, out.refused):
            if folder.is_dir() and folder.name in exercises:
                _exercise_folder(folder, folder.name, student, out, copy)
            elif not folder.is_dir() or folder.name not in EXERCISES:
                kind = "folder" if folder.is_dir() else "file"
                out.problems.append(
                    f"{_shown(student)}/{_shown(folder.name)}: a {kind} that is not an "
                    f"exercise folder (expected one of {', '.join(exercises)}), not graded"
                )
    out.found.sort(key=lambda item: (EXERCISES.index(item[0]), item[1]))
    return out
