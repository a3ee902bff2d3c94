"""The code base stays lint-clean and formatted (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autograder.core.registry import PROJECT_ROOT


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
