"""Benchmark: what each isolation level costs.

For each level this host offers: the sandbox's start + teardown (supervisor, bubblewrap or not,
cgroup, the child answering its first ping; median of 10 after a warm-up) and a whole
`attn-grade grade` of ex1's reference notebook against a bare
`python -c "import torch, numpy, matplotlib.pyplot"` (the floor any grading process pays), as a
ratio. Targets: start + teardown < 0.5 s; grade / bare import < 1.3x in the jail.

    python benchmarks/jail_overhead.py [--repeat 5] [--levels jail,landlock,rlimits]
        [--uid-python PATH]   # an interpreter other users can read, to measure the uid level

Prints a table and writes benchmarks/results/jail_overhead.json. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("results")
BARE = "import torch, numpy, matplotlib.pyplot"


def median_time(command: list[str], repeat: int, env: dict[str, str]) -> float:
    subprocess.run(command, capture_output=True, env=env, check=True)  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def sandbox_cycle(python: str, level: str, env: dict[str, str]) -> float:
    """Median start+teardown of 10 sandboxes at `level`, measured in a process of its own."""
    code = (
        "import statistics, time\n"
        "from autograder.sandbox import isolation\n"
        "from autograder.sandbox.process import Sandbox\n"
        f"level = isolation.choose({level!r})\n"
        "Sandbox(level=level).start()\n"
        "times = []\n"
        "for _ in range(10):\n"
        "    t = time.perf_counter(); s = Sandbox(level=level); s.start(); s.close()\n"
        "    times.append(time.perf_counter() - t)\n"
        "print(statistics.median(times))\n"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return float(done.stdout.split()[-1])


def write_reference(folder: Path) -> Path:
    import nbformat

    from autograder.notebooks.notebook import to_notebook
    from autograder.notebooks.render import render_cells

    path = folder / "ex1_numpy_attention.ipynb"
    nbformat.write(
        to_notebook(render_cells("ex1_numpy_attention"), "ex1_numpy_attention", "en"), path
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--levels", default="jail,landlock,rlimits")
    parser.add_argument("--uid-python", help="interpreter for the uid level")
    args = parser.parse_args()
    env = dict(os.environ)
    runs = [(level, sys.executable) for level in args.levels.split(",") if level]
    if args.uid_python:
        runs.append(("uid", args.uid_python))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        notebook = str(write_reference(Path(folder)))
        for level, python in runs:
            bare = median_time([python, "-c", BARE], args.repeat, env)
            grade_command = [python, "-m", "autograder.cli.app", "grade", notebook]
            grade = median_time([*grade_command, "--isolation", level], args.repeat, env)
            cycle = sandbox_cycle(python, level, env)
            row = {
                "level": level,
                "sandbox_start_teardown_s": round(cycle, 3),
                "bare_import_s": round(bare, 2),
                "grade_s": round(grade, 2),
                "ratio": round(grade / bare, 2),
            }
            rows.append(row)
            print(
                f"{level:<9} start+teardown {cycle:5.3f} s   bare import {bare:5.2f} s   "
                f"grade ex1 {grade:5.2f} s   ratio {grade / bare:4.2f}",
                flush=True,
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "jail_overhead.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
