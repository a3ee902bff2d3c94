"""benchmarks/batch_throughput.py finishes without Dask and keeps each figure as it is measured
(issue: CI round 2, item 8: it crashed at its end after 9 minutes, with nothing printed or
written, when `distributed` was missing). The commands it times are replaced by fakes: what
is tested is the benchmark's own bookkeeping, not the batch."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from autograder.core.registry import EXERCISES, PROJECT_ROOT
from autograder.demo import students_of


@pytest.fixture
def benchmark(monkeypatch, tmp_path) -> tuple[ModuleType, list[list[str]]]:
    """The benchmark module with its timed commands faked: (module, the commands run)."""
    path = PROJECT_ROOT / "benchmarks" / "batch_throughput.py"
    spec = importlib.util.spec_from_file_location("batch_throughput_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands: list[list[str]] = []

    def timed(command: list[str], cwd: Path, env=None, also=None) -> dict:
        commands.append(command)
        return {"wall_s": 10.0, "cpu_s": 12.0, "by_kind": {}}

    monkeypatch.setattr(module, "timed", timed)
    copy = lambda demo, target: target.mkdir(exist_ok=True) or target  # noqa: E731
    monkeypatch.setattr(module, "fresh_copy", copy)
    monkeypatch.setattr(module, "ceiling", lambda code: {"ratio": 1.8})
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    run = str(tmp_path / "run")
    monkeypatch.setattr(sys, "argv", ["batch_throughput.py", "--dir", run, "--repeat", "2"])
    return module, commands


def written(module: ModuleType) -> dict:
    return json.loads((module.RESULTS / "batch_throughput.json").read_text())


def test_without_dask_it_finishes_and_says_the_dask_run_was_skipped(benchmark, monkeypatch, capsys):
    module, commands = benchmark
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    module.main()
    result = written(module)
    assert "distributed" in result["skipped"]["ours, Dask 2 workers"]
    assert "ours, Dask 2 workers" not in result["runs"]
    assert {"demo", "stock nbgrader", "ours, 1 worker", "ours, 2 workers"} <= set(result["runs"])
    assert result["speedup_2_workers_vs_1"] == [1.0, 1.0] and "machine_ceiling_2_vs_1" in result
    assert result["runs"]["ours, 1 worker"]["wall_median_s"] == 10.0
    assert result["cpus_busy"]["ours, 2 workers"] == [1.2, 1.2]  # 12 CPU-s in 10 s, each run
    assert not any("--scheduler" in command for command in commands)
    assert "skipped" in capsys.readouterr().out


def test_it_counts_the_notebooks_the_demo_grades(benchmark, monkeypatch):
    module, _ = benchmark
    monkeypatch.setitem(sys.modules, "distributed", None)
    module.main()
    demo_grades = sum(len(students_of(exercise)) for exercise in EXERCISES)
    assert written(module)["notebooks"] == demo_grades != 3 * len(EXERCISES)


def test_figures_measured_before_a_failure_are_kept(benchmark, monkeypatch, capsys):
    module, _ = benchmark
    faked = module.timed

    def failing_on_ours(command: list[str], cwd: Path, env=None, also=None) -> dict:
        if "--workers" in command:
            raise SystemExit("attn-grade autograde failed")
        return faked(command, cwd)

    monkeypatch.setattr(module, "timed", failing_on_ours)
    with pytest.raises(SystemExit):
        module.main()
    result = written(module)
    assert set(result["runs"]) == {"demo", "stock nbgrader"}
    assert f"stock nbgrader: {10 * len(EXERCISES)}.0 s wall" in capsys.readouterr().out
