"""The Gradescope bundle, unpacked into a temporary root laid out like Gradescope's
(issue 10, item 3). ATTN_GRADE_AUTOGRADER_ROOT moves /autograder; the bundled wheel is
installed the cheap way (tests/support/wheel_venv.py) before the bundle's own setup.sh runs, which
then only locks the hidden parts away."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import pytest

from autograder.ci.gradescope import ROOT_VARIABLE, md_literal
from autograder.core.versions import CHECKS_VERSION
from autograder.grading.notebook import program_of, read_json
from autograder.grading.runner import submission_seed
from tests.conftest import source_notebook, write_notebook
from tests.support.nbgrader_helpers import attn_grade
from tests.support.wheel_venv import install_wheel

pytestmark = [pytest.mark.ex1, pytest.mark.slow]
EXERCISE = "ex1_numpy_attention"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """/autograder after Gradescope's image build: source/ unpacked, setup.sh run."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    bundle = root.parent / "autograder.zip"
    done = attn_grade("gradescope", "ex1", "--out", str(bundle), "--visibility", "after_due_date")
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        archive.extractall(root / "source")
    assert {"setup.sh", "run_autograder", "attn-grade.json"} <= names
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # as Gradescope
    (wheel,) = (root / "source").glob("attn_grade-*.whl")
    install_wheel(wheel, root / "venv")
    env = {**os.environ, ROOT_VARIABLE: str(root)}
    done = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, text=True)
    assert done.returncode == 0
    return root


def run_autograder(root: Path, submission: Path | None) -> dict:
    folder = root / "submission"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    if submission is not None:
        shutil.copy(submission, folder / submission.name)
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"id": 4242}]}))
    env = {**os.environ, ROOT_VARIABLE: str(root)}
    done = subprocess.run(
        [str(root / "run_autograder")], cwd=root.parent, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def test_setup_locks_the_hidden_parts_to_root(root):
    site = Path(sysconfig.get_paths(vars={"base": str(root / "venv")})["purelib"])
    exercises = site / "autograder" / "exercises"
    reference = site / "autograder" / "_reference"
    for path in (exercises, reference, reference / "ex1_numpy_attention.py", root / "source"):
        mode = path.stat().st_mode
        assert not mode & (stat.S_IRWXG | stat.S_IRWXO), f"{path} is readable by others"


def checks_of(results: dict) -> list[dict]:
    """The tests that carry points (not the visible line that says the notebook was graded)."""
    return [test for test in results["tests"] if "max_score" in test]


def test_reference_scores_full_marks_in_gradescope_format(root, tmp_path):
    notebook = write_notebook(source_notebook(EXERCISE), tmp_path / "my work.ipynb")
    results = run_autograder(root, notebook)
    assert results["score"] == 8 and len(checks_of(results)) >= 8
    # hidden until the due date: the checks and the total they make
    assert results["output_format"] == "md" and results["visibility"] == "after_due_date"
    assert sum(test["max_score"] for test in checks_of(results)) == 8
    for test in results["tests"]:
        assert test["status"] == "passed" and test["output_format"] == "md"
        assert test["visibility"] == ("after_due_date" if "max_score" in test else "visible")
    extra = results["extra_data"]
    assert extra["exercise"] == EXERCISE and extra["checks_version"] == CHECKS_VERSION
    assert extra["status"] == "ok"


def test_blank_and_missing_submissions_score_zero(root, release_of):
    blank = run_autograder(root, release_of(EXERCISE))
    assert blank["score"] == 0 and all(t["status"] == "failed" for t in checks_of(blank))
    missing = run_autograder(root, None)
    assert missing["score"] == 0 and "no .ipynb file was submitted" in missing["output"]
    assert missing["extra_data"]["status"] == "invalid_notebook"
    loaded = program_of(read_json(release_of(EXERCISE)), EXERCISE)
    expected = submission_seed(EXERCISE, "4242", loaded.program)
    assert blank["extra_data"]["seed"] == expected, "seeded by user id (and the code)"


def test_the_run_leaves_only_the_venv_open_to_others(root, release_of):
    """Whatever Gradescope puts in /autograder (here also a file of its own) is locked away
    from the child before it starts: the venv is the only entry other users may read."""
    (root / "harness_notes.txt").write_text("{}")
    (root / "harness_notes.txt").chmod(0o644)
    run_autograder(root, release_of(EXERCISE))
    for entry in root.iterdir():
        open_to_others = entry.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        assert bool(open_to_others) == (entry.name == "venv"), entry.name


def test_markdown_output_cannot_be_escaped_by_backticks():
    text = "got ```</code><img src=x>``` back"
    block = md_literal(text)
    fence = block.split("\n")[0]
    assert set(fence) == {"`"} and len(fence) == 4 and block.endswith("\n" + fence)
    assert md_literal("") == ""
