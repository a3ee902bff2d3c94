"""The attn-grade wheel that CI bundles carry: given, or built from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autograder.core.registry import PROJECT_ROOT

_TOP_LEVEL_SKIPPED = {".git", ".venv", "build", "dist", "demo-course", "attn_grade.egg-info"}


def _skipped(project: Path):
    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == project
        return {n for n in names if n == "__pycache__" or (top and n in _TOP_LEVEL_SKIPPED)}

    return ignore


class WheelError(RuntimeError):
    """No wheel given and none can be built (not a checkout, or the build failed)."""


def build_wheel(out_dir: Path, project: Path = PROJECT_ROOT) -> Path:
    """`pip wheel` of the project (no dependencies, no build isolation: offline, ~5 s)."""
    if not (project / "pyproject.toml").is_file():
        raise WheelError("attn-grade is not running from a checkout: pass --wheel")
    with tempfile.TemporaryDirectory() as scratch:
        # a clean copy: setuptools reuses ./build, where files deleted since linger
        source = Path(scratch) / "src"
        shutil.copytree(project, source, ignore=_skipped(project))
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        done = subprocess.run(
            [*command, "-q", "-w", str(out_dir), str(source)], capture_output=True, text=True
        )
    wheels = sorted(out_dir.glob("attn_grade-*.whl"))
    if done.returncode != 0 or not wheels:
        raise WheelError(f"pip wheel failed:\n{done.stdout}{done.stderr}")
    return wheels[-1]


@contextmanager
def wheel_for_bundle(given: Path | None) -> Iterator[Path]:
    """The given wheel, or one built from the checkout into a temporary directory."""
    if given is not None:
        if not given.is_file() or given.suffix != ".whl":
            raise WheelError(f"not a wheel: {given}")
        yield given
        return
    with tempfile.TemporaryDirectory() as scratch:
        yield build_wheel(Path(scratch))
