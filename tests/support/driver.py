"""A long-lived grading process for the corpus (one per isolation level and test worker).

Reads one JSON request per line on stdin: {"path": NOTEBOOK, "budget": {...}}; answers one JSON
line per request on the stdout it was started with: {"results": Gradescope results, "text":
the `attn-grade grade` text report, "peak_rss_kib": this process's peak resident memory while
grading}, or {"error": "..."} when grading raised. Anything printed while grading goes to
stderr, so it cannot be mistaken for an answer. The level comes from $ATTN_GRADE_ISOLATION.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import autograder
from autograder.core.text import format_report
from autograder.grading.runner import grade_notebook
from autograder.grading.submission import Budget


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # resets VmHWM (the peak resident set size)


def _peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def answer(request: dict) -> dict:
    _reset_peak_rss()
    try:
        report = grade_notebook(Path(request["path"]), budget=Budget(**request.get("budget", {})))
    except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
        return {"error": f"{type(error).__name__}: {error}"}
    return {
        "results": report.to_gradescope(),
        "text": format_report(report),
        "peak_rss_kib": _peak_rss_kib(),
        "grader": str(Path(autograder.__file__).parent),
    }


def main() -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        answers.write(json.dumps(answer(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
