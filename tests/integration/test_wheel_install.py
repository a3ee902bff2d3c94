"""A wheel install (no checkout) runs every command from any directory (issue 10, item 1).

The session's wheel venv grades ex1 and ex4 here (reference 8/8, blank 0); all five are
measured by benchmarks/wheel_install.py (docs/numbers.md), which takes 2 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from autograder.core.registry import EXERCISES, PACKAGE_DIR, parts_of
from autograder.core.versions import CHECKS_VERSION

pytestmark = pytest.mark.slow
GRADED = ("ex1_numpy_attention", "ex4_gqa_analysis")


def run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(bin_dir / "attn-grade"), *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_the_wheel_carries_its_data_and_no_checkout_is_used(wheel_bin, tmp_path):
    """Every non-Python file of the package is package data (pyproject.toml)."""
    python = wheel_bin / "python"
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import autograder, autograder._reference.ex1_numpy_attention\n"
            "print(autograder.__file__)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(wheel_bin.parent)), where
    installed = Path(where).parent
    data = [
        path.relative_to(PACKAGE_DIR)
        for path in PACKAGE_DIR.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    ]
    assert data and [path for path in data if not (installed / path).is_file()] == []
    # the top level reference/ and student_templates/ travel under the package, never beside it
    parts = [path.relative_to(PACKAGE_DIR) for exercise in EXERCISES for path in parts_of(exercise)]
    assert [path for path in parts if not (installed / path).is_file()] == []
    assert {p.name for p in installed.parent.iterdir()}.isdisjoint(
        {"reference", "student_templates"}
    )
    done = run(wheel_bin, tmp_path, "--version")
    assert done.returncode == 0 and done.stdout.strip().endswith(f"(checks {CHECKS_VERSION})")


def test_wheel_install_builds_and_grades_from_another_directory(wheel_bin, tmp_path):
    done = run(wheel_bin, tmp_path, "build", *GRADED, "--course", "course")
    assert done.returncode == 0, done.stderr
    course = tmp_path / "course"
    assert (course / "nbgrader_config.py").is_file()
    for exercise in GRADED:
        for kind, expected in (("source", 8), ("release", 0)):
            notebook = course / kind / exercise / f"{exercise}.ipynb"
            done = run(wheel_bin, tmp_path, "grade", str(notebook), "--format", "json")
            assert done.returncode == 0, done.stderr
            result = json.loads(done.stdout)
            assert (result["score"], result["max_score"]) == (expected, 8), (kind, result)
            assert result["extra_data"]["status"] == "ok"
            assert result["extra_data"]["checks_version"] == CHECKS_VERSION


def test_wheel_install_writes_the_ci_bundles(wheel_bin, tmp_path):
    """The classroom template and the Gradescope bundle come from package data; without a
    checkout the bundle needs --wheel."""
    done = run(wheel_bin, tmp_path, "classroom", "init", "ex1", "repo")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "repo" / ".github" / "attn-grade" / "visible_checks.py").is_file()
    done = run(wheel_bin, tmp_path, "gradescope", "ex1", "--out", "a.zip")
    assert done.returncode == 2 and "pass --wheel" in done.stderr
    (wheel,) = (wheel_bin.parent.parent / "wheel").glob("attn_grade-*.whl")
    done = run(wheel_bin, tmp_path, "gradescope", "ex1", "--out", "a.zip", "--wheel", str(wheel))
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / "a.zip") as bundle:
        assert {"setup.sh", "run_autograder", wheel.name} <= set(bundle.namelist())
