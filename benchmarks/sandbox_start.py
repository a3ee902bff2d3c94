"""Benchmark: what one sandbox costs to start, warm (forked from a template) and cold
(ATTN_GRADE_WARM=0), at the level this machine chooses.

Each mode runs in a process of its own, inside a cpuacct group (benchmarks/cpu_accounting.py:
the grader, bubblewrap, the template, the supervisors and the children all count). It starts
`--sandboxes` sandboxes one after another; each runs a first cell that imports what the
exercises' notebooks import (NumPy, matplotlib.pyplot, torch) and is closed. Reported per
mode: the first sandbox (a warm one starts the template) and the median of the others, wall and
CPU seconds, from start() to close().

    python benchmarks/sandbox_start.py [--sandboxes 6]

Prints JSON and writes benchmarks/results/sandbox_start.json. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu_accounting import Group

RESULTS = Path(__file__).with_name("results")
FIRST_CELL = "import numpy, matplotlib.pyplot, torch\n"


def inner(count: int, usage_path: str) -> None:
    """In the measured process: `count` sandboxes, one after another."""
    from autograder.sandbox.process import Sandbox

    usage = Path(usage_path)

    def cpu() -> float:
        if usage.name == "cpuacct.usage":
            return int(usage.read_text()) / 1e9
        stat = dict(line.split() for line in usage.read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    measured = []
    for _ in range(count):
        started, cpu_before = time.monotonic(), cpu()
        with Sandbox() as sandbox:
            answer, _ = sandbox.request(
                {"op": "exec", "source": FIRST_CELL, "label": "cell"}, timeout=300
            )
            if not answer.get("ok"):
                raise SystemExit(f"the first cell failed: {answer}")
            described = sandbox.describe()
        measured.append(
            {"wall_s": time.monotonic() - started, "cpu_s": cpu() - cpu_before, "level": described}
        )
    print(json.dumps(measured))


def mode(name: str, count: int, warm: bool) -> dict:
    group = Group()
    usage = group.path / ("cpuacct.usage" if group.version == "v1" else "cpu.stat")
    env = {**os.environ, "ATTN_GRADE_WARM": "1" if warm else "0"}
    command = [sys.executable, __file__, "--inner", str(count), str(usage)]
    try:
        done = subprocess.run(group.wrap(command), env=env, capture_output=True, text=True)
    finally:
        group.remove()
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    rest = runs[1:] or runs
    return {
        "level": runs[0]["level"],
        "first": {k: round(runs[0][k], 2) for k in ("wall_s", "cpu_s")},
        "median_of_the_others": {
            k: round(statistics.median(r[k] for r in rest), 2) for k in ("wall_s", "cpu_s")
        },
        "all": [{k: round(r[k], 2) for k in ("wall_s", "cpu_s")} for r in runs],
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        inner(int(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=6)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    result = {
        "cold": mode("cold", args.sandboxes, warm=False),
        "warm": mode("warm", args.sandboxes, warm=True),
        "load_average_1min": {"start": round(load, 1), "end": round(os.getloadavg()[0], 1)},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sandbox_start.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
