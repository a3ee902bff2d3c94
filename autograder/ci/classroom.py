"""GitHub Classroom: results in the format of the Classroom grading reporter.

The reporter (classroom-resources/autograding-grading-reporter) reads, for each name in its
`runners` input, the environment variable `<NAME>_RESULTS`: base64 of a JSON object with
`version`, `status` (pass|fail|error), `max_score` and `tests[]`. Two of its numbers differ:
the console shows (passed tests / tests) x `max_score` per runner, while the grade it records
(the "Autograding report" notice) is the sum of `tests[].score`. With weighted checks those
disagree, so every check is its own runner holding one test: then both numbers are that
check's points, and both totals are the sum over checks. `test_code` is never set (the
reporter would print it). The reporter prints a failed test's name, not its message, so a
failed check's name ends with its message.

`environment_lines` is what `attn-grade grade --format github-classroom` prints, ready to be
appended to `$GITHUB_ENV`: `ATTN_GRADE_RUNNERS=<names>` and one `<NAME>_RESULTS=` per runner.
"""

from __future__ import annotations

import base64
import json

from autograder.core.registry import short_name
from autograder.core.results import GradeReport
from autograder.core.status import Status
from autograder.core.versions import CHECKS_VERSION, grader_version

RUNNERS_VARIABLE = "ATTN_GRADE_RUNNERS"
FORMAT_VERSION = 1
MESSAGE_LIMIT = 300  # characters of a failed check's message shown in its name


def runner_results(report: GradeReport) -> list[tuple[str, dict]]:
    """(runner name, reporter JSON) pairs: one runner per check, plus a zero-point `notes`
    runner with status error when the notebook could not be graded normally."""
    prefix = short_name(report.exercise or "ex")
    runners = []
    for index, check in enumerate(report.checks, start=1):
        status = "pass" if check.passed else "fail"
        test = {
            "name": test_name(check.name, check.max_points, "" if check.passed else check.message),
            "status": status,
            "score": check.points,
            "message": check.message,
            "line_no": 0,
            "duration": 0,
        }
        results = {
            "version": FORMAT_VERSION,
            "status": status,
            "max_score": check.max_points,
            "tests": [test],
            "extra_data": _extra_data(report),
        }
        runners.append((f"{prefix}check{index:02d}", results))
    if report.status != Status.OK or not report.checks:
        note = {
            "name": f"{report.exercise}: {report.status}",
            "status": "error",
            "score": 0,
            "message": "\n".join(report.messages) or str(report.status),
            "line_no": 0,
            "duration": 0,
        }
        results = {"version": FORMAT_VERSION, "status": "error", "max_score": 0, "tests": [note]}
        runners.append((f"{prefix}notes", results))
    return runners


def test_name(name: str, points: float, message: str) -> str:
    """The reporter prints a failed test's name but not its message: the name carries it."""
    text = f"{name} ({points:g} pt)"
    message = " ".join(message.split())
    if message:
        text += (
            f": {message[: MESSAGE_LIMIT - 1]}…" if len(message) > MESSAGE_LIMIT else f": {message}"
        )
    return text


def _extra_data(report: GradeReport) -> dict:
    return {
        "exercise": report.exercise,
        "seed": report.seed,
        "grader_version": grader_version(),
        "checks_version": CHECKS_VERSION,
    }


def encode(results: dict) -> str:
    return base64.b64encode(json.dumps(results).encode()).decode("ascii")


def environment_lines(runners: list[tuple[str, dict]]) -> list[str]:
    """`NAME=value` lines for `$GITHUB_ENV` (base64 never contains a newline)."""
    lines = [f"{RUNNERS_VARIABLE}={','.join(name for name, _ in runners)}"]
    lines += [f"{name.upper()}_RESULTS={encode(results)}" for name, results in runners]
    return lines


def reporter_totals(runners: list[tuple[str, dict]]) -> tuple[float, float, float]:
    """(console total, recorded total, recorded maximum), computed as the reporter computes
    them (src/helpers/test-helpers.js: getTestScore; src/notify-classroom.js)."""
    console = recorded = maximum = 0.0
    for _, results in runners:
        tests = results["tests"]
        passed = sum(test["status"] == "pass" for test in tests)
        console += passed / len(tests) * (results["max_score"] or 0)
        if results["max_score"]:
            maximum += results["max_score"]
            recorded += sum(test["score"] for test in tests)
    return console, recorded, maximum
