"""tests/support/built_once.py: the xdist workers of one run share one build of a fixture."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.built_once import built_once, computed_once

WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.support.built_once import built_once

    class Factory:
        def getbasetemp(self):
            return Path(sys.argv[1])

    def build(directory):
        with open(Path(sys.argv[1]).parent / "builds.log", "a") as log:
            log.write("built\\n")
        time.sleep(1.0)  # long enough for the other worker to arrive meanwhile
        (directory / "course.txt").write_text("the course")

    print(built_once(Factory(), "course", build))
    """
)


def test_two_workers_of_one_run_share_one_build(tmp_path):
    run = tmp_path / "pytest-7"
    workers = []
    for name in ("gw0", "gw1"):
        (run / f"popen-{name}").mkdir(parents=True)
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(run / f"popen-{name}")],
                env={"PYTEST_XDIST_WORKER": name, "PYTHONPATH": str(Path.cwd())},
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    paths = {worker.communicate(timeout=60)[0].strip() for worker in workers}
    assert paths == {str(run / "built-once-course")}
    assert (run / "built-once-course" / "course.txt").read_text() == "the course"
    assert (run / "builds.log").read_text() == "built\n"


def test_a_build_that_failed_part_way_is_built_again(tmp_path_factory):
    calls: list[Path] = []

    def failing(directory: Path) -> None:
        (directory / "half").write_text("half")
        raise RuntimeError("the build failed")

    def working(directory: Path) -> None:
        calls.append(directory)
        assert not (directory / "half").exists(), "the half-built directory is cleared"
        (directory / "whole").write_text("whole")

    with pytest.raises(RuntimeError):
        built_once(tmp_path_factory, "flaky", failing)
    target = built_once(tmp_path_factory, "flaky", working)
    assert (target / "whole").exists() and len(calls) == 1
    assert built_once(tmp_path_factory, "flaky", working) == target and len(calls) == 1


def test_a_value_computed_once_is_a_fresh_copy_each_time(tmp_path_factory):
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"files": {"a": "open"}, "draws": [1, 2]}

    first = computed_once(tmp_path_factory, "measured", compute)
    first["files"].clear()  # a test that edits its copy (test_warm_start does)
    second = computed_once(tmp_path_factory, "measured", compute)
    assert second == {"files": {"a": "open"}, "draws": [1, 2]} and len(calls) == 1
