"""`grade --junit-xml`, `--fail-under` and `--format github-classroom` (issue 10, items 2, 4)."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.ci.classroom import RUNNERS_VARIABLE, reporter_totals, runner_results
from autograder.ci.junit import junit_tree
from autograder.core.results import CheckResult, GradeReport
from tests.conftest import source_notebook, write_notebook
from tests.support.junit_schemas import junit_schemas
from tests.support.nbgrader_helpers import attn_grade

pytestmark = pytest.mark.ex1
EXERCISE = "ex1_numpy_attention"
MISTAKE = "no_sqrt_scaling"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One notebook with a catalogued mistake, graded once with every CI output."""
    folder = tmp_path_factory.mktemp("ci")
    mistake = catalogue_for(EXERCISE)[MISTAKE]
    notebook = source_notebook(EXERCISE, replace={mistake.target: mistake.source})
    path = write_notebook(notebook, folder / f"{EXERCISE}.ipynb")
    junit = folder / "junit.xml"
    done = attn_grade(
        "grade", str(path), "--format", "github-classroom", "--junit-xml", str(junit),
        "--student", "s1",
        "--fail-under", "8", "--results", str(folder / "results.json"),
    )  # fmt: skip
    return done, junit, json.loads((folder / "results.json").read_text())


def decode_environment(stdout: str) -> list[tuple[str, dict]]:
    values = dict(line.split("=", 1) for line in stdout.splitlines())
    names = values[RUNNERS_VARIABLE].split(",")
    return [
        (name, json.loads(base64.b64decode(values[f"{name.upper()}_RESULTS"]))) for name in names
    ]


def test_fail_under_turns_a_lower_score_red(graded):
    done, _, results = graded
    assert done.returncode == 1 and "below --fail-under 8" in done.stderr
    assert 0 < results["score"] < 8


def test_junit_has_one_testcase_per_check_with_points_and_the_named_mistake(graded):
    _, junit, results = graded
    for schema in junit_schemas():
        schema.validate(str(junit))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == f"{EXERCISE}.s1"
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [test["name"] for test in results["tests"]]
    failed = [case for case in cases if case.find("failure") is not None]
    assert int(suite.get("failures")) == len(failed) >= 1 and suite.get("errors") == "0"
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    points = [float(properties[f"check.{case.get('name')}.points"]) for case in cases]
    assert sum(points) == results["score"] == float(properties["score"])
    named = [c for c in failed if c.find("failure").get("type") == MISTAKE]
    description = catalogue_for(EXERCISE)[MISTAKE].description
    assert named and description in named[0].find("failure").text
    assert properties["checks_version"] == results["extra_data"]["checks_version"]


def test_classroom_result_records_what_the_student_sees(graded):
    done, _, results = graded
    runners = decode_environment(done.stdout)
    assert len(runners) == len(results["tests"])
    console, recorded, maximum = reporter_totals(runners)
    assert console == pytest.approx(recorded) == pytest.approx(results["score"])
    assert maximum == 8
    for _, result in runners:
        assert result["version"] == 1 and result["status"] in ("pass", "fail")
        test = result["tests"][0]
        assert "test_code" not in test
        if test["status"] == "fail":  # the reporter prints names, not messages
            # the message (whitespace folded) follows the name, cut with an ellipsis if long
            shown = test["name"].split(": ", 1)[1].removesuffix("…")
            assert test["message"] and " ".join(test["message"].split()).startswith(shown)
        assert result["extra_data"]["grader_version"] == results["extra_data"]["grader_version"]


def weighted_report() -> GradeReport:
    return GradeReport(
        EXERCISE,
        checks=[
            CheckResult("test_a", "g", 3.0, passed=True),
            CheckResult("test_b", "g", 0.5, passed=False, message="no"),
            CheckResult("test_c", "g", 4.5, passed=False, message="no"),
        ],
    )


def test_one_runner_per_check_is_what_makes_the_totals_agree():
    report = weighted_report()
    per_check = runner_results(report)
    assert reporter_totals(per_check) == (3.0, 3.0, 8.0)
    tests = [test for _, result in per_check for test in result["tests"]]
    one_runner = [("all", {"status": "fail", "max_score": 8.0, "tests": tests})]
    console, recorded, _ = reporter_totals(one_runner)
    assert console != recorded  # the reporter's two numbers disagree with a single runner


def test_an_ungraded_notebook_reports_an_error_runner_with_no_points():
    report = weighted_report()
    report.status, report.messages = "invalid_notebook", ["not graded: not valid JSON"]
    name, notes = runner_results(report)[-1]
    assert name == "ex1notes" and notes["status"] == "error" and notes["max_score"] == 0
    assert "not valid JSON" in notes["tests"][0]["message"]


def test_junit_drops_characters_xml_cannot_hold():
    report = weighted_report()
    report.checks[1] = CheckResult("test_b", "g", 0.5, False, message="bad\x00\x1b[31m\ud800 out")
    text = ET.tostring(junit_tree(report).getroot(), encoding="unicode")
    failure = ET.fromstring(text).find(".//failure")
    assert failure.text == "bad[31m out"


def test_student_repo_script_prints_reporter_environment(monkeypatch, capsys):
    from autograder.ci.student_repo import visible_checks

    tests = [{"name": "check_softmax", "status": "pass", "score": 0, "message": ""}]
    monkeypatch.setattr(visible_checks, "check_outcomes", lambda path: tests)
    assert visible_checks.main(["notebook.ipynb"]) == 0
    (name, results), *_ = decode_environment(capsys.readouterr().out)
    assert name == "visible" and results == visible_checks.reporter_results(tests)
    assert results["status"] == "pass" and results["max_score"] == 0
