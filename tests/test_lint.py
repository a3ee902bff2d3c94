"""The code base stays lint-clean and formatted (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from autograder.exercises import PROJECT_ROOT


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff(command):
    ruff = shutil.which("ruff")
    assert ruff, "ruff comes with the dev extra: pip install -e '.[dev]'"
    done = subprocess.run([ruff, *command], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
