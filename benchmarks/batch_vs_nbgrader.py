"""Benchmark: the demo's 15 submissions autograded by stock nbgrader vs `attn-grade autograde`.

Builds the demo course (`attn-grade demo`), then times, one run each:
- stock: a copy of the course whose config keeps nbgrader's own preprocessors (Execute runs
  every notebook in a kernel), `nbgrader autograde EXERCISE --force` for the five exercises;
- ours: `attn-grade autograde --workers N` on the demo course (sandboxed checks plus the demo
  cells' outputs for hand grading).

    python benchmarks/batch_vs_nbgrader.py [--workers 2] [--dir /tmp/attn-batch]

Prints both times and writes benchmarks/results/batch_vs_nbgrader.json. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from autograder.build.course import tool_env
from autograder.exercises import EXERCISES

RESULTS = Path(__file__).with_name("results")
STOCK_CONFIG = """c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "attention-transformers"
"""


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for): CPU time
    is the fairer comparison on a machine that other jobs keep busy."""
    started, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, env=tool_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.monotonic() - started, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dir", default="/tmp/attn-batch")
    args = parser.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ours, stock = root / "demo", root / "stock"
    timed([sys.executable, "-m", "autograder.cli", "demo", "--course", str(ours)], root)
    shutil.copytree(ours, stock)
    (stock / "nbgrader_config.py").write_text(STOCK_CONFIG)
    shutil.rmtree(stock / "autograded")
    nbgrader = [sys.executable, "-m", "nbgrader", "autograde"]
    runs = [timed([*nbgrader, e, "--force"], stock) for e in EXERCISES]
    stock_wall, stock_cpu = sum(r[0] for r in runs), sum(r[1] for r in runs)
    command = [sys.executable, "-m", "autograder.cli", "autograde", "--course", str(ours)]
    ours_wall, ours_cpu = timed([*command, "--workers", str(args.workers)], root)
    result = {
        "notebooks": 3 * len(EXERCISES),
        "stock_nbgrader_autograde_s": round(stock_wall, 1),
        "stock_nbgrader_autograde_cpu_s": round(stock_cpu, 1),
        f"attn_grade_autograde_workers_{args.workers}_s": round(ours_wall, 1),
        f"attn_grade_autograde_workers_{args.workers}_cpu_s": round(ours_cpu, 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "batch_vs_nbgrader.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
