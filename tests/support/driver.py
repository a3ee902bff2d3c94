"""A long-lived grading process for the corpus (one per isolation level and test worker).

Reads one JSON request per line on stdin: {"path": NOTEBOOK, "budget": {...}}; answers one JSON
line per request on the stdout it was started with: {"results": Gradescope results, "text":
the `attn-grade grade` text report, "peak_rss_kib": this process's peak resident memory while
grading}, or {"error": "..."} when grading raised. With "observe": NAME, the notebook is graded
in a sandbox of the driver's that stays open afterwards, and the answer also carries
"observed": what the notebook's function NAME returns then (an array of UTF-8 bytes, base64):
what an observer notebook saw in its own process while it was graded; and "feedback", the report
cell of its feedback page. Anything printed while
grading goes to stderr, so it cannot be mistaken for an answer. The level comes from
$ATTN_GRADE_ISOLATION.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import autograder
from autograder.core.text import format_report
from autograder.grading.budget import Budget
from autograder.grading.runner import grade_notebook
from autograder.nbgrader_plugins.report_cell import report_html
from autograder.sandbox.inside import wire
from autograder.sandbox.process import Sandbox


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
    observed = None
    try:
        budget = Budget(**request.get("budget", {}))
        if request.get("observe"):
            report, observed = _observed(Path(request["path"]), budget, str(request["observe"]))
        else:
            report = grade_notebook(Path(request["path"]), budget=budget)
    except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
        return {"error": f"{type(error).__name__}: {error}"}
    found = {
        "results": report.to_gradescope(),
        "text": format_report(report),
        "peak_rss_kib": _peak_rss_kib(),
        "grader": str(Path(autograder.__file__).parent),
    }
    if observed is not None:
        found["observed"] = base64.b64encode(observed).decode()
        found["feedback"] = report_html(report)  # the feedback page's report, as nbgrader shows it
    return found


def _observed(path: Path, budget: Budget, name: str):
    """Grade in a sandbox that outlives the grading, then call the notebook's `name` there."""
    sandbox = Sandbox()
    sandbox.start()
    try:
        report = grade_notebook(path, budget=budget, shared=sandbox)
        header = {"op": "call", "target": {"$global": name}, "args": [], "kwargs": {"$dict": {}}}
        response, blobs = sandbox.request(header, timeout=300)
        if not response.get("ok"):
            raise RuntimeError(f"{name}() raised {response.get('error')}")
        value = wire.Decoder(blobs).decode(response["value"])
        return report, bytes(value)
    finally:
        sandbox.close()


def main() -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        answers.write(json.dumps(answer(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
