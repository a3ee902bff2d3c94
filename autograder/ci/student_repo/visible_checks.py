"""Run a notebook's visible checks and print GitHub Classroom reporter results.

Shipped into student repositories by `attn-grade classroom init`, so it imports nothing of the
grader (the hidden checks and the reference never reach a student repository): it executes the
notebook with nbclient and reports, for every visible-check cell (an nbgrader grade cell with
code), whether it ran without an error. Visible checks carry no points here (`max_score` 0,
so the reporter records no grade): points come from the hidden checks, run by the instructor.

Usage: python visible_checks.py NOTEBOOK >> "$GITHUB_ENV"
"""

from __future__ import annotations

import base64
import json
import sys

import nbformat
from nbclient import NotebookClient

CELL_TIMEOUT = 300


def check_outcomes(path: str) -> list[dict]:
    """One reporter test per visible-check cell, in notebook order."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT, allow_errors=True)
    client.execute()
    tests = []
    for cell in notebook.cells:
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not nbgrader.get("grade"):
            continue
        errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
        message = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
        tests.append(
            {
                "name": str(nbgrader.get("grade_id")),
                "status": "fail" if errors else "pass",
                "score": 0,
                "message": message,
                "line_no": 0,
                "duration": 0,
            }
        )
    return tests


def reporter_results(tests: list[dict]) -> dict:
    """The reporter's JSON for the visible checks: pass/fail only, no points recorded."""
    failed = not tests or any(test["status"] != "pass" for test in tests)
    return {"version": 1, "status": "fail" if failed else "pass", "max_score": 0, "tests": tests}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    tests = check_outcomes(argv[0])
    results = reporter_results(tests)
    encoded = base64.b64encode(json.dumps(results).encode()).decode("ascii")
    print("ATTN_GRADE_RUNNERS=visible")
    print(f"VISIBLE_RESULTS={encoded}")
    for test in tests:
        mark = "PASS" if test["status"] == "pass" else "FAIL"
        print(f"{mark}  {test['name']}  {test['message']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
