"""Grade every corpus entry at the jail level and at the fallback (`uid`: root without
namespaces), and the resource, process and network entries also as in a Docker container
(`docker`: the uid level without CAP_SYS_ADMIN and without cgroups: rlimits, CPU affinity and
the reaper)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.sandbox import isolation
from tests.support.corpus import ENTRIES, Entry
from tests.support.harness import (
    DEBIAN_PYTHON,
    ROOT,
    Driver,
    Host,
    layered_venv,
    processes_with,
    remove,
)
from tests.support.outcome import assert_outcome, build, forged_lines

LEVELS = ("jail", "uid", "docker")


def _missing(level: str) -> str | None:
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


def _params():
    for level in LEVELS:
        for entry in ENTRIES:
            if level not in entry.levels:
                continue
            # one level's entries run on one worker: its grading process (`drivers`) starts once
            # there, not on every worker (tests/support/ordering.py)
            marks = [
                getattr(pytest.mark, entry.exercise.split("_")[0]),
                pytest.mark.xdist_group(level),
            ]
            if level in entry.known:
                marks.append(pytest.mark.xfail(strict=True, reason=entry.known[level]))
            if (reason := _missing(level)) is not None:
                marks.append(pytest.mark.skip(reason=reason))
            yield pytest.param(entry, level, id=f"{level}-{entry.id}", marks=marks)


@pytest.fixture(scope="session")
def drivers():
    """level -> a grading driver, started on first use (one per test worker)."""
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


@pytest.fixture
def host():
    bait = Host(Path(tempfile.mkdtemp(prefix="attn-adv-host-")))
    yield bait
    bait.close()
    remove(bait.base)


@pytest.mark.parametrize(("entry", "level"), list(_params()))
def test_corpus_entry(entry: Entry, level: str, drivers, host: Host, tmp_path):
    path = build(entry, host, tmp_path)
    answer = drivers(level).grade(path, entry.budget)
    assert_outcome(entry, answer, host)
    if entry.cli:
        done = subprocess.run(
            [*drivers(level).argv, "-m", "autograder.cli.app", "grade", str(path)],
            cwd=ROOT,
            env=drivers(level).env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert forged_lines(done.stdout.rstrip("\n"), entry.exercise) == []
        assert processes_with(host.marker) == []
