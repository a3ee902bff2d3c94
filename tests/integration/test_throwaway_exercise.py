"""Adding an exercise is three files and a declaration (CONTRIBUTING, "Add an exercise").

A throwaway exercise, `ex9_scaled_scores` (tests/support/throwaway/), is put into a copy of
the checkout beside the eight: its template in `student_templates/`, its reference in
`reference/`, and `checks.py`, `mistakes.py` and its declaration `__init__.py` in
`autograder/exercises/ex9_scaled_scores/`. Nothing else is edited. The copy's `attn-grade`,
run in a new process, lists it, builds it (source and release), and grades it in the sandbox:
the reference earns 8, the blank release 0, the catalogued mistake 0 with its description.
Without its reference the copy refuses to start and names the file; without its declaration
it is a draft, neither listed nor built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.core.registry import PROJECT_ROOT

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent.parent / "support" / "throwaway"
EXERCISE = "ex9_scaled_scores"
SOLUTION_LINE = "return Q @ K.T / np.sqrt(Q.shape[-1])"


def copy_of_the_checkout(root: Path) -> Path:
    """The package's three top-level folders, links kept (autograder/_reference ->
    ../reference), without caches."""
    for name in ("autograder", "reference", "student_templates"):
        shutil.copytree(
            PROJECT_ROOT / name,
            root / name,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    return root


def add_exercise(root: Path, *, declared: bool = True) -> dict[str, Path]:
    """The three parts and the declaration, where CONTRIBUTING says they go."""
    folder = root / "autograder" / "exercises" / EXERCISE
    folder.mkdir()
    parts = {
        "template": root / "student_templates" / f"{EXERCISE}.ipynb.j2",
        "reference": root / "reference" / f"{EXERCISE}.py",
        "checks": folder / "checks.py",
        "mistakes": folder / "mistakes.py",
    }
    sources = {
        "template": "template.ipynb.j2",
        "reference": "reference.py.in",
        "checks": "checks.py.in",
        "mistakes": "mistakes.py.in",
    }
    if declared:
        parts["declaration"] = folder / "__init__.py"
        sources["declaration"] = "declaration.py.in"
    for part, path in parts.items():
        shutil.copyfile(HERE / sources[part], path)
    return parts


def in_the_copy(root: Path, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -c code args` in a new interpreter with the copy's folder first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def attn_grade(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The copy's command line (that `autograder` is the copy's: which_autograder)."""
    code = "import sys; from autograder.cli.app import main; sys.exit(main())"
    return in_the_copy(root, code, *args, cwd=cwd)


def which_autograder(root: Path, cwd: Path) -> str:
    found = in_the_copy(root, "import autograder; print(autograder.__file__)", cwd=cwd)
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


def auto_score(result: subprocess.CompletedProcess[str]) -> tuple[float, str]:
    report = json.loads(result.stdout)
    return float(report["score"]), json.dumps(report, ensure_ascii=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("throwaway")
    root = copy_of_the_checkout(work / "src")
    add_exercise(root)
    assert which_autograder(root, work).startswith(str(root)), "the copy is the one imported"
    listed = attn_grade(root, "build", "--help", cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert "ex9" in listed.stdout, "the new exercise is listed from its declaration alone"
    course = work / "course"
    result = attn_grade(root, "build", EXERCISE, "--course", str(course), cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    return root, course


def test_a_new_exercise_is_built_into_source_and_release(built):
    _, course = built
    for stage in ("source", "release"):
        notebook = course / stage / EXERCISE / f"{EXERCISE}.ipynb"
        assert notebook.is_file(), f"no {stage} notebook"
    release = (course / "release" / EXERCISE / f"{EXERCISE}.ipynb").read_text()
    assert SOLUTION_LINE not in release, "the release holds no solution body"
    assert "def scaled_scores(Q: np.ndarray, K: np.ndarray) -> np.ndarray:" in release


@pytest.mark.parametrize(
    ("stage", "edit", "points", "named"),
    [
        ("source", None, 8.0, None),
        ("release", None, 0.0, None),
        ("source", ("", "return Q @ K.T"), 0.0, "the scores are not divided by sqrt(d_k)"),
    ],
    ids=["reference", "blank", "mistake"],
)
def test_a_new_exercise_is_graded_by_its_own_checks(built, tmp_path, stage, edit, points, named):
    root, course = built
    text = (course / stage / EXERCISE / f"{EXERCISE}.ipynb").read_text()
    if edit is not None:
        assert text.count(SOLUTION_LINE) == 1
        text = text.replace(SOLUTION_LINE, edit[1])
    notebook = tmp_path / f"{EXERCISE}.ipynb"
    notebook.write_text(text)
    result = attn_grade(root, "grade", str(notebook), "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    score, report = auto_score(result)
    assert score == points, report
    if named is not None:
        assert named in report, report


def test_a_declared_exercise_without_its_reference_is_refused(tmp_path):
    root = copy_of_the_checkout(tmp_path / "src")
    parts = add_exercise(root)
    parts["reference"].unlink()
    result = attn_grade(root, "build", "--help", cwd=tmp_path)
    assert result.returncode != 0
    assert "IncompleteExercise" in result.stderr
    assert f"_reference/{EXERCISE}.py" in result.stderr


def test_an_undeclared_folder_is_a_draft(tmp_path):
    root = copy_of_the_checkout(tmp_path / "src")
    add_exercise(root, declared=False)
    listed = attn_grade(root, "build", "--help", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "ex9" not in listed.stdout
    refused = attn_grade(root, "build", EXERCISE, "--course", str(tmp_path / "c"), cwd=tmp_path)
    assert refused.returncode != 0
    assert "unknown exercise" in refused.stderr
