"""Benchmark: `pip wheel .`, install into a fresh venv, then from another directory build all
five exercises and grade each reference notebook (expect 8/8) and each blank release (0).

    python benchmarks/wheel_install.py

The venv's dependencies are hard links to this venv's (tests/support/wheel_venv.py: nothing is
downloaded), so the install time is pip installing the wheel. Prints the numbers and writes
benchmarks/results/wheel_install.json. Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.ci.wheel import build_wheel
from autograder.core.registry import EXERCISES
from tests.support.wheel_venv import install_wheel

RESULTS = Path(__file__).with_name("results")


def timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    return time.monotonic() - started, done


def main() -> int:
    numbers: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        started = time.monotonic()
        wheel = build_wheel(root / "wheel")
        numbers["pip_wheel_s"] = round(time.monotonic() - started, 2)
        started = time.monotonic()
        bin_dir = install_wheel(wheel, root / "venv")
        numbers["install_s"] = round(time.monotonic() - started, 2)
        work = root / "elsewhere"
        work.mkdir()
        attn_grade = str(bin_dir / "attn-grade")
        seconds, done = timed([attn_grade, "build", "--course", "course"], work)
        assert done.returncode == 0, done.stderr
        numbers["build_all_s"] = round(seconds, 2)
        for exercise in EXERCISES:
            for kind in ("source", "release"):
                notebook = work / "course" / kind / exercise / f"{exercise}.ipynb"
                seconds, done = timed(
                    [attn_grade, "grade", str(notebook), "--format", "json"], work
                )
                assert done.returncode == 0, done.stderr
                result = json.loads(done.stdout)
                label = "reference" if kind == "source" else "blank"
                numbers[f"{exercise}/{label}"] = {
                    "score": result["score"],
                    "max_score": result["max_score"],
                    "seconds": round(seconds, 2),
                }
                print(exercise, label, result["score"], f"{seconds:.1f} s", flush=True)
    print(json.dumps(numbers, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "wheel_install.json").write_text(json.dumps(numbers, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
