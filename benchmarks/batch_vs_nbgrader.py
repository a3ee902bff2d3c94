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


def timed(command: list[str], cwd: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=tool_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return time.monotonic() - started


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
    stock_seconds = sum(timed([*nbgrader, e, "--force"], stock) for e in EXERCISES)
    command = [sys.executable, "-m", "autograder.cli", "autograde", "--course", str(ours)]
    ours_seconds = timed([*command, "--workers", str(args.workers)], root)
    result = {
        "notebooks": 3 * len(EXERCISES),
        "stock_nbgrader_autograde_s": round(stock_seconds, 1),
        f"attn_grade_autograde_workers_{args.workers}_s": round(ours_seconds, 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "batch_vs_nbgrader.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
