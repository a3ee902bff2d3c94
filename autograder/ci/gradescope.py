"""Gradescope: the autograder bundle and the results.json it writes.

`build_bundle` zips `setup.sh` (installs the bundled wheel into a venv, then makes the
installed grader, its hidden checks and the reference readable by root only), `run_autograder`
(calls `attn-grade gradescope-run`; writes a results.json itself where that cannot run) and
`attn-grade.json` (exercise, test visibility, the PyTorch index setup.sh uses).
`run` grades `<root>/submission/*.ipynb` into `<root>/results/results.json`; the root is
`/autograder` unless `ATTN_GRADE_AUTOGRADER_ROOT` moves it (tests). Before anything runs, every
entry of the root but the venv is made unreadable to other users (`lock_away`): at the `uid`
level without Landlock, file permissions are all that keep the child out. The submission
folder is read without following links (`pick_notebook`): what was not read is named.
Where grading does not happen (refused, failed) `not_graded` is the results.json.

Messages quote students' values and file names, so in Markdown output they are code blocks.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from pathlib import Path

from autograder.core.errors import UsageError
from autograder.core.registry import resolve
from autograder.core.results import GradeReport
from autograder.core.status import Status, student_words
from autograder.core.student_tree import walk
from autograder.core.text import clean_text

ROOT_VARIABLE = "ATTN_GRADE_AUTOGRADER_ROOT"
CONFIG_NAME = "attn-grade.json"
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
BUNDLE = Path(__file__).with_name("gradescope_bundle")
# setup.sh installs CPU PyTorch from this index (PyPI's Linux wheels are CUDA builds of several
# GB); "none" drops it (a mirror or pip.conf that serves CPU wheels, an offline grader)
DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
PUBLIC_ENTRIES = ("venv",)  # the child's Python: the only part of the root it may read
# statuses where no check ran: said at once, whatever the checks' visibility
NOTHING_RAN = (Status.INVALID_NOTEBOOK, Status.GRADER_ERROR, Status.NOT_GRADED)


def md_literal(text: str) -> str:
    """`text` as a fenced Markdown code block that no backtick run inside it can close."""
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def results_json(report: GradeReport, visibility: str = "visible") -> dict:
    """Gradescope's results.json: Markdown output, per-test visibility, our extra_data.

    Checks hidden until some time (`after_due_date`, `after_published`, `hidden`) hide the
    total too: the top-level `visibility` is theirs (Gradescope hides a result's score while
    its tests are hidden), and one visible test without points says at once whether the
    notebook was graded, or why not (the one thing a student must know before the due date)."""
    if visibility not in VISIBILITIES:
        raise UsageError(f"unknown visibility {visibility!r}; choose from {VISIBILITIES}")
    results = report.to_gradescope()
    for test in results["tests"]:
        test["output"] = md_literal(test["output"])
        test["output_format"] = "md"
        test["visibility"] = visibility
    if visibility != "visible":
        results["tests"].insert(0, _received(report, visibility))
    results["output"] = md_literal(results["output"])
    results["output_format"] = "md"
    results["test_output_format"] = "md"
    results["visibility"] = visibility
    results["stdout_visibility"] = "hidden"
    return results


def _received(report: GradeReport, visibility: str) -> dict:
    when = {
        "after_due_date": "after the due date",
        "after_published": "when the grades are published",
        "hidden": "by your instructor",
    }[visibility]
    if report.status in NOTHING_RAN:
        text = "\n".join(report.messages) or student_words(report.status)
        output = f"Your notebook was not graded:\n\n{md_literal(text)}"
    elif report.status != Status.OK:
        output = f"Your notebook was graded, but {student_words(report.status)}. "
        output += f"The results are shown {when}."
    else:
        output = f"Your notebook was received and graded. The results are shown {when}."
    return {
        "name": "Submission received",
        "status": "failed" if report.status in NOTHING_RAN else "passed",
        "output": output,
        "output_format": "md",
        "visibility": "visible",
    }


def not_graded(status: str, message: str, detail: str, exit_code: int) -> dict:
    """results.json where nothing was graded: score 0, no tests, `message` for everyone (it
    says what happened; never a grader's file or traceback), `detail` in extra_data (not shown
    to students) and on the instructor-only autograder output."""
    from autograder.core.versions import CHECKS_VERSION, grader_version

    return {
        "score": 0.0,
        "execution_time": 0.0,
        "output": message,
        "output_format": "md",
        "test_output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {
            "status": status,
            "exit_code": exit_code,
            "error": detail,
            "grader_version": grader_version(),
            "checks_version": CHECKS_VERSION,
        },
    }


def write_results(root: Path, results: dict) -> Path:
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return out


def build_bundle(
    exercise: str,
    out: Path,
    wheel: Path,
    visibility: str = "visible",
    torch_index: str = DEFAULT_TORCH_INDEX,
) -> Path:
    """Write the Gradescope autograder zip for `exercise` with `wheel` inside; setup.sh installs
    with `torch_index` as an extra index ("none": without one)."""
    exercise = resolve(exercise)
    if visibility not in VISIBILITIES:
        raise UsageError(f"unknown visibility {visibility!r}; choose from {VISIBILITIES}")
    if not re.fullmatch(r"none|(https?|file)://\S+", torch_index):
        raise UsageError(f"--torch-index: an http(s):// or file:// URL, or none: {torch_index!r}")
    config = {"exercise": exercise, "visibility": visibility, "torch_index": torch_index}
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


def lock_away(root: Path) -> list[Path]:
    """Make every entry of `root` but the venv unreadable to other users (the sandbox uid):
    submission_metadata.json (on Gradescope: the submitters' names and emails, and every
    earlier submission's results, tests hidden until the due date included), the submission,
    the results, the bundle's source and whatever else is there. A jail or Landlock hides
    them anyway; at `uid` without Landlock only these permissions do. Returns the entries."""
    entries = sorted(path for path in root.iterdir() if path.name not in PUBLIC_ENTRIES)
    for entry in entries:
        if not entry.is_symlink():
            entry.chmod(stat.S_IMODE(entry.stat().st_mode) & ~(stat.S_IRWXG | stat.S_IRWXO))
    return entries


def read_config(root: Path) -> tuple[str, str]:
    """(exercise, visibility) from the bundle's attn-grade.json."""
    config = json.loads((root / "source" / CONFIG_NAME).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{CONFIG_NAME} is not a JSON object")
    return resolve(config["exercise"]), config.get("visibility", "visible")


def run(root: Path | None = None) -> dict:
    """Grade the submission under `root` and write results/results.json; returns it.
    IsolationError when the level cannot keep the child out of the root's private entries."""
    from autograder.grading.runner import grade_loaded, grade_notebook, load_notebook
    from autograder.i18n.reports import in_language, notebook_language
    from autograder.sandbox import isolation

    root = root or autograder_root()
    student = student_id(root)  # read before the lock, as root: the child never needs it
    entries = lock_away(root)
    exercise, visibility = read_config(root)
    isolation.require_private(isolation.choose(), entries)
    notebook, reason = pick_notebook(root / "submission", exercise)
    if notebook is None:
        loaded, reason = load_notebook(None, exercise, reason)
        report = grade_loaded(loaded, reason=reason, student=student)
    else:
        report = grade_notebook(notebook, exercise=exercise, student=student)
        if reason:  # what was left out beside the graded notebook
            report.messages.append(reason)
    report = in_language(report, notebook_language(notebook))
    results = results_json(report, visibility)
    write_results(root, results)
    return results
