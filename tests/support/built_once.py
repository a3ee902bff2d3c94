"""A directory built once per test run and shared by pytest-xdist's workers.

A module fixture is built once per worker: with `-n 4`, a module whose tests land on several
workers builds its course each time. `built_once` builds it once, under a file lock, in the run's
base directory (shared by its workers); a worker that needs it meanwhile waits for it. Only for
fixtures whose tests read what was built and never change it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """`build(directory)` run once per test run; the directory it filled."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory: each worker's base temp sits in it
    target = base / f"built-once-{name}"
    with FileLock(f"{target}.lock"):
        done = target / ".built"
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)  # a build that failed part-way
            target.mkdir()
            build(target)
            done.touch()
    return target


def computed_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[], Any]
) -> Any:
    """`compute()` (a JSON value: a measurement, an audit) run once per test run, as
    `built_once` builds; each call returns its own copy, which a test may change."""

    def build(directory: Path) -> None:
        (directory / "value.json").write_text(json.dumps(compute()))

    return json.loads((built_once(tmp_path_factory, name, build) / "value.json").read_text())
