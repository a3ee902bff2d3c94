"""Benchmark: grading a notebook vs just executing it, and the sandbox's own cost.

For each exercise's reference notebook: the wall time of `attn-grade grade` (a whole process:
start-up, sandbox, the notebook's program, all hidden checks) against executing the notebook
top to bottom with nbclient (kernel start-up included), as a ratio. Targets: grading <= 1.2x
execution; sandbox start + teardown <= 1.5 s.

    python benchmarks/grading_overhead.py [--repeat 3] [EXERCISE...]

Prints a table and writes benchmarks/results/grading_overhead.json. Not a test: timings depend
on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.core.registry import EXERCISES, resolve

RESULTS = Path(__file__).with_name("results")


def write_source(exercise: str, folder: Path) -> Path:
    import nbformat

    from autograder.notebooks.notebook import to_notebook
    from autograder.notebooks.render import render_cells

    path = folder / f"{exercise}.ipynb"
    nbformat.write(to_notebook(render_cells(exercise), exercise, "en"), path)
    return path


def time_execution(path: Path) -> float:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return time.perf_counter() - started


def time_grading(path: Path) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "autograder.cli.app", "grade", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - started
    return elapsed, json.loads(done.stdout)["score"]


def time_sandbox(repeat: int) -> list[float]:
    from autograder.sandbox.process import Sandbox

    Sandbox().start()  # warm-up: isolation probe, matplotlib font cache
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        sandbox = Sandbox()
        sandbox.start()
        sandbox.close()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    exercises = [resolve(name) for name in args.exercises] or list(EXERCISES)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for exercise in exercises:
            path = write_source(exercise, Path(folder))
            time_execution(path)  # warm-up: page cache, kernel spec lookup
            executions = [time_execution(path) for _ in range(args.repeat)]
            gradings = [time_grading(path) for _ in range(args.repeat)]
            execute = statistics.median(executions)
            grade = statistics.median(t for t, _ in gradings)
            rows.append(
                {
                    "exercise": exercise,
                    "execute_s": round(execute, 2),
                    "grade_s": round(grade, 2),
                    "ratio": round(grade / execute, 2),
                    "score": gradings[0][1],
                }
            )
            print(
                f"{exercise:<28} execute {execute:6.2f} s   grade {grade:6.2f} s   "
                f"ratio {grade / execute:4.2f}   score {gradings[0][1]:g}/8",
                flush=True,
            )
    sandbox = time_sandbox(10)
    summary = {
        "sandbox_start_teardown_s": {
            "median": round(statistics.median(sandbox), 3),
            "max": round(max(sandbox), 3),
        },
        "exercises": rows,
    }
    print(
        f"sandbox start+teardown: median {statistics.median(sandbox):.3f} s, "
        f"max {max(sandbox):.3f} s (10 runs)"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grading_overhead.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
