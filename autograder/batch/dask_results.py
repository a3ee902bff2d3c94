"""What a Dask task returns: one JSON document (bytes), read and checked field by field before
the batch uses any of it.

A worker's answer is plain data, never an object: the batch parses it with `json`, checks its
shape and types, that it grades the very notebook the batch sent (the report key the batch
computes itself), and that every check is one the exercise declares, with the grade cell and
points its `@check` marker gives (so no score above the exercise's 8 points, no invented check).
A document that fails any of this is refused (InvalidResult) and the submission is graded on
the batch's machine. What the schema cannot tell is a worker that reports a real check as
passed when it failed: only the cluster's authentication (docs/instructors.md, "More than one
machine: Dask") keeps such workers out, and `attn-grade verify` regrades from the audit log.
"""

from __future__ import annotations

import ast
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from autograder.batch.messages import Graded
from autograder.core.status import Status

RESULT_BYTES = 64 << 20  # a report with its demo cells' outputs (plots) is a few MiB at most
# GradeReport.to_dict() and CheckResult's fields, exactly
REPORT_FIELDS = {
    "exercise",
    "status",
    "checks",
    "messages",
    "isolation",
    "seed",
    "execution_time",
    "displays",
}
CHECK_FIELDS = {"name", "grade_id", "max_points", "passed", "message", "mistake", "seed"}
# how each level's reports name it (isolation.Isolation.describe() starts so)
LEVEL_PREFIX = {"jail": "jail(bwrap)", "uid": "uid", "landlock": "landlock-v", "rlimits": "rlimits"}


class InvalidResult(ValueError):
    """A task's result that the batch does not use (the message says why)."""


class TaskFailed(RuntimeError):
    """The task reported that it could not grade (e.g. another attn-grade on the worker)."""


def encode(graded: Graded | None = None, error: str | None = None) -> bytes:
    """The task's answer: a grading, or why the worker could not grade."""
    if graded is None:
        return json.dumps({"error": str(error)}).encode()
    document = {"key": graded.key, "report": graded.report, "reason": graded.reason}
    return json.dumps(document, allow_nan=False).encode()


def expected_key(exercise: str, student: str, path: Path) -> tuple[str | None, str]:
    """The report key of the notebook the batch sends (or None and why it cannot be graded),
    computed here, as the worker computes it."""
    from autograder.grading.notebook import InvalidNotebook, program_of, read_json
    from autograder.nbgrader_plugins.preprocessors import report_key

    try:
        loaded = program_of(read_json(path), exercise)
    except InvalidNotebook as error:
        return None, str(error)
    return report_key(exercise, student, loaded), ""


def decode(data: object, exercise: str, key: tuple[str | None, str], level: str) -> Graded:
    """The Graded in a task's answer `data`, for a notebook whose expected_key() is `key`,
    graded at isolation `level`; InvalidResult (or TaskFailed) when it is not one."""
    if not isinstance(data, bytes):
        raise InvalidResult(f"the task returned a {type(data).__name__}, not a JSON document")
    if len(data) > RESULT_BYTES:
        raise InvalidResult(f"the task's answer has {len(data)} bytes (at most {RESULT_BYTES})")
    try:
        document = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise InvalidResult(f"the task's answer is not JSON ({str(error)[:100]})") from None
    if isinstance(document, dict) and set(document) == {"error"}:
        raise TaskFailed(_text(document["error"], "error")[:2000])
    _fields(document, {"key", "report", "reason"}, "the answer")
    if document["key"] != key[0]:
        raise InvalidResult("the answer grades another program than the notebook sent")
    if key[0] is None:  # not gradable: the batch knows why itself
        return Graded(None, None, key[1])
    _text(document["reason"], "reason")
    return Graded(key[0], check_report(document["report"], exercise, level), "")


def failure(error: Exception) -> str:
    """What went wrong with a task's answer (decode's error, or Dask's), for the warning."""
    if isinstance(error, InvalidResult):
        return f"answered what the batch does not use ({str(error)[:300]})"
    if isinstance(error, TaskFailed):
        return f"could not grade ({str(error)[:300]})"
    return f"failed ({type(error).__name__}: {str(error)[:300]})"


def check_report(report: Any, exercise: str, level: str) -> dict:
    """`report` if it is a GradeReport.to_dict() of `exercise` at `level` whose checks are all
    declared by the exercise, else InvalidResult."""
    _fields(report, REPORT_FIELDS, "the report")
    if report["exercise"] != exercise:
        raise InvalidResult(f"the report is for exercise {report['exercise']!r}")
    if report["status"] not in {status.value for status in Status}:
        raise InvalidResult(f"unknown status {str(report['status'])[:40]!r}")
    if not _text(report["isolation"], "isolation").startswith(LEVEL_PREFIX[level]):
        raise InvalidResult(f"graded at {report['isolation'][:60]!r}, not at {level!r}")
    _optional_int(report["seed"], "seed")
    if not _number(report["execution_time"], "execution_time") >= 0:
        raise InvalidResult("a negative execution_time")
    _list(report["messages"], "messages", _text)
    displays = report["displays"]
    if not isinstance(displays, dict):
        raise InvalidResult("displays is not an object")
    for outputs in displays.values():
        _list(outputs, "a display", _object)
    declared = declared_checks(exercise)
    seen: set[str] = set()
    for check in _list(report["checks"], "checks", _object):
        _fields(check, CHECK_FIELDS, "a check")
        name = _text(check["name"], "a check's name")
        if name not in declared or name in seen:
            raise InvalidResult(f"check {name[:80]!r} is not one of {exercise}'s (or repeated)")
        seen.add(name)
        grade_id, points = declared[name]
        if check["grade_id"] != grade_id or _number(check["max_points"], "max_points") != points:
            raise InvalidResult(f"check {name!r} is worth {points:g} in {grade_id}, not as sent")
        if not isinstance(check["passed"], bool):
            raise InvalidResult(f"check {name!r}: passed is not true or false")
        _text(check["message"], "a check's message")
        if check["mistake"] is not None:
            _text(check["mistake"], "a check's mistake")
        _optional_int(check["seed"], "a check's seed")
    return report


@cache
def declared_checks(exercise: str) -> dict[str, tuple[str, float]]:
    """check name -> (grade id, points), read from the `@check(points=..., grade_id=...)`
    markers of the exercise's checks module (parsed, not imported)."""
    from autograder.core.registry import checks_module_path

    found = {}
    for node in ast.parse(checks_module_path(exercise).read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "check":
                given = {k.arg: k.value for k in decorator.keywords}
                points = float(ast.literal_eval(given["points"]))
                found[node.name] = (str(ast.literal_eval(given["grade_id"])), points)
    return found


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _fields(value: Any, names: set[str], what: str) -> None:
    if not isinstance(value, dict) or set(value) != names:
        found = sorted(value)[:12] if isinstance(value, dict) else type(value).__name__
        raise InvalidResult(f"{what} has not the fields {sorted(names)} ({found})")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidResult(f"{what} is not a string")
    return value


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise InvalidResult(f"{what} is not an object")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidResult(f"{what} is not a number")
    return float(value)


def _optional_int(value: Any, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidResult(f"{what} is not an integer")


def _list(value: Any, what: str, item) -> list:
    if not isinstance(value, list):
        raise InvalidResult(f"{what} is not a list")
    for entry in value:
        item(entry, f"an entry of {what}")
    return value
