"""Gradescope: the autograder bundle and the results.json it writes.

`build_bundle` zips `setup.sh` (installs the bundled wheel into a venv, then makes the
installed grader, its hidden checks and the reference readable by root only), `run_autograder`
(calls `attn-grade gradescope-run`) and `attn-grade.json` (exercise, test visibility).
`run` grades `<root>/submission/*.ipynb` into `<root>/results/results.json`; the root is
`/autograder` unless `ATTN_GRADE_AUTOGRADER_ROOT` moves it (tests). The submission folder is
read without following links (`pick_notebook`): what was not read is named in the output.

Messages quote students' values and file names, so in Markdown output they are code blocks.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.results import GradeReport
from autograder.core.student_tree import walk
from autograder.core.text import clean_text
from autograder.exercises import resolve

ROOT_VARIABLE = "ATTN_GRADE_AUTOGRADER_ROOT"
CONFIG_NAME = "attn-grade.json"
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
BUNDLE = Path(__file__).with_name("gradescope_bundle")


def md_literal(text: str) -> str:
    """`text` as a fenced Markdown code block that no backtick run inside it can close."""
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def results_json(report: GradeReport, visibility: str = "visible") -> dict:
    """Gradescope's results.json: Markdown output, per-test visibility, our extra_data."""
    if visibility not in VISIBILITIES:
        raise UsageError(f"unknown visibility {visibility!r}; choose from {VISIBILITIES}")
    results = report.to_gradescope()
    for test in results["tests"]:
        test["output"] = md_literal(test["output"])
        test["output_format"] = "md"
        test["visibility"] = visibility
    results["output"] = md_literal(results["output"])
    results["output_format"] = "md"
    results["test_output_format"] = "md"
    results["visibility"] = "visible"
    results["stdout_visibility"] = "hidden"
    return results


def build_bundle(exercise: str, out: Path, wheel: Path, visibility: str = "visible") -> Path:
    """Write the Gradescope autograder zip for `exercise` with `wheel` inside."""
    exercise = resolve(exercise)
    if visibility not in VISIBILITIES:
        raise UsageError(f"unknown visibility {visibility!r}; choose from {VISIBILITIES}")
    config = {"exercise": exercise, "visibility": visibility}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, (BUNDLE / name).read_bytes())
        bundle.writestr(CONFIG_NAME, json.dumps(config, indent=2) + "\n")
        bundle.write(wheel, wheel.name)
    return out


def autograder_root() -> Path:
    return Path(os.environ.get(ROOT_VARIABLE, "/autograder"))


def student_id(root: Path) -> str:
    """The submitter's Gradescope user id (seeds the hidden inputs), or `anonymous`."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text())["users"]
        return str(users[0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return "anonymous"


def pick_notebook(submission: Path, exercise: str) -> tuple[Path | None, str | None]:
    """The notebook to grade and a note naming what was not read, or None and why (names are
    the student's: never trusted). The submission folder is read without following links
    (`student_tree.walk`): a folder that is a link (to /autograder/source, say), a link, hard
    link or special file inside it is refused and named."""
    try:
        tree = walk(submission)
    except FileNotFoundError:
        return None, "no .ipynb file was submitted"
    refused = "; ".join(str(refusal) for refusal in tree.refused)
    note = f"not read (only plain files and folders are): {refused}" if refused else None
    found = sorted(
        submission / path
        for path in tree.files
        if path.suffix == ".ipynb" and ".ipynb_checkpoints" not in path.parts
    )
    named = [path for path in found if path.name == f"{exercise}.ipynb"]
    if named or len(found) == 1:
        return (named or found)[0], note
    if not found:
        return None, "; ".join(filter(None, ["no .ipynb file was submitted", note]))
    names = ", ".join(clean_text(path.name, 200) for path in found)
    return None, f"several notebooks and none named {exercise}.ipynb: {names}"


def run(root: Path | None = None) -> dict:
    """Grade the submission under `root` and write results/results.json; returns it."""
    from autograder.grading.runner import grade_loaded, grade_notebook, load_notebook

    root = root or autograder_root()
    config = json.loads((root / "source" / CONFIG_NAME).read_text())
    exercise, visibility = resolve(config["exercise"]), config["visibility"]
    student = student_id(root)
    notebook, reason = pick_notebook(root / "submission", exercise)
    if notebook is None:
        loaded, reason = load_notebook(None, exercise, reason)
        report = grade_loaded(loaded, reason=reason, student=student)
    else:
        report = grade_notebook(notebook, exercise=exercise, student=student)
        if reason:  # what was left out beside the graded notebook
            report.messages.append(reason)
    results = results_json(report, visibility)
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return results
