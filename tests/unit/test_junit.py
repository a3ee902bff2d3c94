"""JUnit XML that the common consumers accept (issue: CI round 2, item 7): valid under pytest's
xunit2 schema (`junit-10.xsd`, the Jenkins xunit-plugin schema) and the Ant `JUnit.xsd`, an
`<error>` for what is not a wrong answer, each message once, one suite per exercise and
student, per-check points as suite properties. Reports are built directly: no grading."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from autograder.ci.junit import junit_tree, write_junit
from autograder.core.results import CheckResult, GradeReport
from autograder.core.status import Status
from tests.support.junit_schemas import junit_schemas

EXERCISE = "ex1_numpy_attention"


def checks(*, passed: bool = True) -> list[CheckResult]:
    return [
        CheckResult("test_softmax_matches_reference", "check_softmax", 0.5, passed=True),
        CheckResult(
            "test_sdpa_batched_inputs",
            "check_sdpa",
            0.75,
            passed=passed,
            message="" if passed else "got 0.783729, expected 0.464803 (no / sqrt(d_k) scaling)",
            mistake=None if passed else "no_sqrt_scaling",
        ),
        CheckResult(
            "test_sdpa_uses_numpy_only",
            "check_sdpa",
            0.25,
            passed=passed,
            message="" if passed else "not paid: required checks failed",
        ),
    ]


def report(status: str = Status.OK, **changes) -> GradeReport:
    made = GradeReport(EXERCISE, status=status, checks=checks(passed=False), seed=7)
    made.isolation = "uid+landlock-v7+reaper"
    if status == Status.INVALID_NOTEBOOK:
        made.messages = ["not graded: the file is not valid JSON"]
        made.checks = [
            CheckResult(c.name, c.grade_id, c.max_points, False, "not run: the notebook was not "
                        "graded (see the note)") for c in made.checks
        ]  # fmt: skip
    if status == Status.TIMEOUT:
        made.messages = ["the notebook ran out of its 900 s"]
    for name, value in changes.items():
        setattr(made, name, value)
    return made


REPORTS = {
    "mistake": lambda: report(),
    "all passed": lambda: report(checks=checks(passed=True)),
    "invalid notebook": lambda: report(Status.INVALID_NOTEBOOK),
    "timeout": lambda: report(Status.TIMEOUT),
    "tampered": lambda: report(Status.TAMPERED, messages=["the notebook patched the runtime"]),
    "student text": lambda: report(messages=["a <note> & \x1b[31m\ud800 with ]]> in it"]),
}


@pytest.mark.parametrize("case", REPORTS)
def test_valid_under_both_schemas(case, tmp_path):
    path = write_junit(REPORTS[case](), tmp_path / "junit.xml", student="s1")
    for schema in junit_schemas():
        errors = [f"{e.path}: {e.reason}" for e in schema.iter_errors(str(path))]
        assert not errors, f"{case} invalid under {schema.url}: {errors}"


def suite_of(made: GradeReport, student: str = "s1") -> ET.Element:
    root = junit_tree(made, student=student).getroot()
    assert root.tag == "testsuites" and not root.attrib, "Ant's <testsuites> takes no attributes"
    (suite,) = root.findall("testsuite")
    return suite


def counts(suite: ET.Element) -> dict[str, int]:
    return {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}


def test_a_wrong_answer_is_a_failure_with_its_points_and_mistake_once():
    suite = suite_of(report())
    assert counts(suite) == {"tests": 3, "failures": 2, "errors": 0, "skipped": 0}
    case = suite.find("testcase[@name='test_sdpa_batched_inputs']")
    failure = case.find("failure")
    assert failure.get("type") == "no_sqrt_scaling"
    text, message = failure.text or "", failure.get("message") or ""
    assert "got 0.783729" in text and "got 0.783729" not in message, "the message once"
    assert "0/0.75" in message, "points where a CI page shows them"
    unnamed = suite.find("testcase[@name='test_sdpa_uses_numpy_only']/failure")
    assert unnamed.get("type"), "a failure's type is never empty"


def test_an_ungraded_notebook_is_one_error_and_no_failures():
    suite = suite_of(report(Status.INVALID_NOTEBOOK))
    assert counts(suite) == {"tests": 4, "failures": 0, "errors": 1, "skipped": 3}
    (errored,) = suite.findall("testcase[error]")
    error = errored.find("error")
    assert error.get("type") == "invalid_notebook"
    assert "not valid JSON" in (error.text or "") + (error.get("message") or "")
    for case in suite.findall("testcase[skipped]"):
        assert case.get("name").startswith("test_")


@pytest.mark.parametrize("status", [Status.TIMEOUT, Status.TAMPERED, Status.CRASHED])
def test_a_notebook_event_is_an_error_beside_the_checks_that_ran(status):
    suite = suite_of(report(status, messages=[f"the notebook: {status}"]))
    assert counts(suite) == {"tests": 4, "failures": 2, "errors": 1, "skipped": 0}
    assert suite.find("testcase/error").get("type") == status


def test_points_are_suite_properties_and_sum_to_the_score():
    made = report()
    suite = suite_of(made)
    assert suite.find("testcase/properties") is None, "no schema allows testcase properties"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    earned = sum(float(props[f"check.{c.name}.points"]) for c in made.checks)
    possible = sum(float(props[f"check.{c.name}.max_points"]) for c in made.checks)
    assert earned == made.score == float(props["score"])
    assert possible == float(props["check_max_score"])
    assert props["check.test_sdpa_batched_inputs.mistake"] == "no_sqrt_scaling"
    assert props["student"] == "s1"


def test_two_students_make_two_suites_that_a_merge_keeps_apart():
    first, second = suite_of(report(), "s1"), suite_of(report(), "s2")
    assert first.get("name") != second.get("name")
    assert EXERCISE in first.get("name") and "s1" in first.get("name")
    cases = {c.get("classname") for c in first.iter("testcase")}
    assert cases == {first.get("name")}, "testcases grouped under the same suite name"
    assert first.get("package") == EXERCISE


@pytest.mark.parametrize("student", ["a b\tc\nd", "  padded  ", "", "dots.in.an@email.edu"])
def test_any_student_id_makes_a_valid_suite_name(student, tmp_path):
    path = write_junit(report(), tmp_path / "junit.xml", student=student)
    for schema in junit_schemas():
        schema.validate(str(path))
