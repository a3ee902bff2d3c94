"""The isolation levels the security tests grade at, and one grading driver per level and test
worker (`drivers`, a session fixture in tests/security/conftest.py): `jail` (bubblewrap), `uid`
(root without namespaces for the child's filesystem, a venv on Debian's world-readable python3.11
layered over this venv's packages) and `docker` (the uid level without CAP_SYS_ADMIN and without
cgroups, as in a default Docker container)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from autograder.sandbox import isolation
from tests.support.harness import DEBIAN_PYTHON, Driver, layered_venv, remove

LEVELS = ("jail", "uid", "docker")


def missing(level: str) -> str | None:
    """Why this host cannot run `level` (None when it can)."""
    if level == "jail":
        return None if isolation.detect().jail else "bubblewrap cannot run here"
    if os.geteuid() != 0:
        return "the uid level needs a root grader"
    if not DEBIAN_PYTHON.exists():
        return f"the uid level needs a world-readable interpreter ({DEBIAN_PYTHON})"
    if level == "docker" and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is needed to drop CAP_SYS_ADMIN"
    return None


def started_drivers() -> Iterator[Callable[[str], Driver]]:
    """level -> a grading driver, started on first use; all closed at the end."""
    started: dict[str, Driver] = {}
    venv: list[Path] = []

    def get(level: str) -> Driver:
        if level not in started:
            env = {**os.environ, "ATTN_GRADE_ISOLATION": "jail" if level == "jail" else "uid"}
            env["ATTN_ADV_SECRET"] = "attn-adv-secret-in-the-graders-environment"
            argv = [sys.executable]
            if level != "jail":
                if not venv:
                    venv.append(layered_venv())
                argv = [str(venv[0] / "bin" / "python")]
            if level == "docker":
                env["ATTN_GRADE_CGROUPS"] = "0"
                argv = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
                argv += [str(venv[0] / "bin" / "python")]
            started[level] = Driver(argv, env)
        return started[level]

    yield get
    for driver in started.values():
        driver.close()
    for directory in venv:
        remove(directory)
