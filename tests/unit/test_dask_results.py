"""A Dask task's answer is a JSON document that the batch checks before use
(autograder/batch/dask_results.py): anything but a well-formed grading of the very notebook sent,
with only the exercise's declared checks at their declared points, is refused."""

from __future__ import annotations

import json

import pytest

from autograder.batch import dask_results
from autograder.batch.dask_results import InvalidResult, TaskFailed, decode, encode
from autograder.batch.messages import Graded
from autograder.core.registry import EXERCISES
from autograder.core.results import AUTO_POINTS, CheckResult, GradeReport
from tests.conftest import source_notebook, write_notebook

EXERCISE = "ex1_numpy_attention"
LEVEL = "jail"


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> tuple[str | None, str]:
    path = tmp_path_factory.mktemp("answer") / f"{EXERCISE}.ipynb"
    write_notebook(source_notebook(EXERCISE), path)
    return dask_results.expected_key(EXERCISE, "alice", path)


def honest_report(passed: bool = False) -> dict:
    checks = [
        CheckResult(name, grade_id, points, passed, message="", seed=7)
        for name, (grade_id, points) in dask_results.declared_checks(EXERCISE).items()
    ]
    report = GradeReport(EXERCISE, checks=checks, isolation="jail(bwrap)+landlock-v7+cgroup-v1")
    report.displays = {"demo": [{"output_type": "stream", "name": "stdout", "text": "hi"}]}
    return report.to_dict()


def answer(expected, report: dict | None = None, **changes) -> bytes:
    document = {"key": expected[0], "report": report or honest_report(), "reason": ""}
    document.update(changes)
    return json.dumps(document).encode()


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_exercise_declares_its_8_points(exercise):
    declared = dask_results.declared_checks(exercise)
    assert declared and sum(points for _, points in declared.values()) == AUTO_POINTS


def test_an_honest_answer_is_used(key):
    assert key[0] is not None
    graded = decode(answer(key), EXERCISE, key, LEVEL)
    assert graded == Graded(key[0], honest_report(), "")
    round_trip = encode(Graded(key[0], honest_report(), ""))
    assert decode(round_trip, EXERCISE, key, LEVEL).report == honest_report()


def test_the_schema_does_not_judge_a_passed_check(key):
    """The limit: a worker that reports real checks as passed is not caught by the schema;
    only authentication keeps such workers out (docs/instructors.md)."""
    lying = honest_report(passed=True)
    assert decode(answer(key, lying), EXERCISE, key, LEVEL).report == lying


def _set(path: str, value):
    def change(report: dict) -> dict:
        target = report
        *parents, last = path.split(".")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
        return report

    return change


_DELETE = object()


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(_set("checks.0.max_points", 80.0), id="inflated-points"),
        pytest.param(_set("checks.0.grade_id", "check_softmax"), id="another-cell"),
        pytest.param(_set("checks.0.name", "test_bonus"), id="invented-check"),
        pytest.param(lambda r: {**r, "checks": r["checks"] * 2}, id="repeated-checks"),
        pytest.param(_set("checks.0.passed", "yes"), id="passed-a-string"),
        pytest.param(_set("checks.0.passed", 1), id="passed-an-int"),
        pytest.param(_set("checks.0.max_points", True), id="points-a-bool"),
        pytest.param(_set("checks.0.max_points", "0.5"), id="points-a-string"),
        pytest.param(_set("checks.0.message", ["list"]), id="message-a-list"),
        pytest.param(_set("checks.0.seed", 1.5), id="seed-a-float"),
        pytest.param(_set("checks.0.score", 8), id="extra-check-field"),
        pytest.param(_set("checks", {"a": 1}), id="checks-an-object"),
        pytest.param(_set("score", 8.0), id="extra-report-field"),
        pytest.param(_set("displays", _DELETE), id="missing-field"),
        pytest.param(_set("exercise", "ex2_attention_heatmap"), id="another-exercise"),
        pytest.param(_set("status", "excellent"), id="unknown-status"),
        pytest.param(_set("isolation", "rlimits+reaper"), id="weaker-isolation"),
        pytest.param(_set("execution_time", -1), id="negative-time"),
        pytest.param(_set("messages", "text"), id="messages-a-string"),
        pytest.param(_set("displays", {"demo": ["text"]}), id="display-not-an-output"),
    ],
)
def test_a_forged_or_mistyped_report_is_refused(key, forge):
    with pytest.raises(InvalidResult):
        decode(answer(key, forge(honest_report())), EXERCISE, key, LEVEL)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\xff\xfe not JSON", id="not-utf8"),
        pytest.param(b"{'key': 1}", id="not-json"),
        pytest.param(b'{"key": NaN}', id="nan"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deeply-nested"),
        pytest.param(b"[]", id="a-list"),
        pytest.param(b'{"key": null, "report": null}', id="missing-reason"),
        pytest.param(b" " * (dask_results.RESULT_BYTES + 1), id="too-large"),
    ],
)
def test_bytes_that_are_no_answer_are_refused(key, data):
    with pytest.raises(InvalidResult):
        decode(data, EXERCISE, key, LEVEL)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"key": None}, id="a-dict"),
        pytest.param("{}", id="a-str"),
        pytest.param(Graded(None, None, "x"), id="an-object"),
        pytest.param(bytearray(b"{}"), id="a-bytearray"),
    ],
)
def test_anything_but_bytes_is_refused(key, data):
    with pytest.raises(InvalidResult, match="not a JSON document"):
        decode(data, EXERCISE, key, LEVEL)


def test_an_answer_for_another_notebook_is_refused(key, tmp_path):
    other = dask_results.expected_key(
        EXERCISE, "bob", write_notebook(source_notebook(EXERCISE), tmp_path / "nb.ipynb")
    )
    with pytest.raises(InvalidResult, match="another program"):
        decode(answer(other), EXERCISE, key, LEVEL)
    with pytest.raises(InvalidResult, match="another program"):
        decode(answer(key, key=None, report=None, reason="not a notebook"), EXERCISE, key, LEVEL)


def test_an_ungradable_notebook_gets_the_batch_s_own_reason(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text("{not json")
    key = dask_results.expected_key(EXERCISE, "alice", path)
    assert key[0] is None and key[1]
    claimed = answer(key, report=None, reason="the worker's own words")
    assert decode(claimed, EXERCISE, key, LEVEL) == Graded(None, None, key[1])


def test_a_worker_that_cannot_grade_says_why(key):
    with pytest.raises(TaskFailed, match="another attn-grade"):
        decode(encode(error="another attn-grade"), EXERCISE, key, LEVEL)
