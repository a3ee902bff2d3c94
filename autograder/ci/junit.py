"""JUnit XML for any CI (GitLab, Jenkins, ...): one testcase per check.

Valid under both schemas CI servers read: pytest's xunit2 `junit-10.xsd` (the Jenkins
xunit-plugin schema) and the Ant `JUnit.xsd` (tests/data/junit/ holds both; tests/unit/
test_junit.py validates against them). So: a `<testsuites>` without attributes; one
`<testsuite>` named by exercise and student (reports of several students merge into separate
suites), with timestamp, hostname, package and id, the per-check points as suite properties
(`check.<name>.points`, `.max_points`, `.grade_id`, `.mistake`: no schema allows properties in
a testcase), `<system-out>` (the notebook's notes) and `<system-err>`.

A wrong answer is a `<failure>` (type: the named mistake, else `wrong_result`); the attribute
says the points and the mistake, the text the check's message: each said once. What is not a
wrong answer is an `<error>` of a testcase `notebook` (type: the status): a notebook that could
not be graded (its checks are then `<skipped>`, never run) and events such as a timeout (beside
the checks that ran). Messages can quote a student's values, so characters XML 1.0 cannot
carry are dropped before ElementTree escapes the rest.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from autograder.core.results import CheckResult, GradeReport
from autograder.core.status import Status, student_words
from autograder.core.versions import CHECKS_VERSION, grader_version

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# statuses where no check ran: the checks are skipped, not failed
NOTHING_RAN = (Status.INVALID_NOTEBOOK, Status.GRADER_ERROR, Status.NOT_GRADED)
NOTEBOOK_CASE = "notebook"


def xml_text(text: object) -> str:
    """`text` as a string XML 1.0 can hold (control characters and lone surrogates dropped)."""
    return _NOT_XML.sub("", str(text))


def xml_token(text: object, fallback: str) -> str:
    """`text` as an xs:token (no tabs or newlines, single spaces, not empty)."""
    return " ".join(xml_text(text).split()) or fallback


def suite_name(exercise: str, student: str) -> str:
    return f"{exercise}.{xml_token(student, 'anonymous')}"


def _properties(suite: ET.Element, values: dict[str, object]) -> None:
    properties = ET.SubElement(suite, "properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=xml_text(value))


def _check_properties(check: CheckResult) -> dict[str, object]:
    prefix = f"check.{xml_token(check.name, 'unnamed')}"
    return {
        f"{prefix}.points": f"{check.points:g}",
        f"{prefix}.max_points": f"{check.max_points:g}",
        f"{prefix}.grade_id": check.grade_id,
        f"{prefix}.mistake": check.mistake or "",
    }


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", name=xml_token(name, "unnamed"),
                         classname=classname, time="0")  # fmt: skip


def junit_tree(report: GradeReport, student: str = "anonymous") -> ET.ElementTree:
    """The report as a `<testsuites>` document with one `<testsuite>` for (exercise, student)."""
    exercise = xml_token(report.exercise or "", "unknown")
    name = suite_name(exercise, student)
    ungraded = report.status in NOTHING_RAN
    event = report.status != Status.OK
    failed = 0 if ungraded else sum(not check.passed for check in report.checks)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(report.checks) + event),
        failures=str(failed),
        errors=str(int(event)),
        skipped=str(len(report.checks) if ungraded else 0),
        time=f"{report.execution_time:.3f}",
        timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=xml_token(socket.gethostname(), "localhost"),
        package=exercise,
        id="0",
    )
    values: dict[str, object] = {
        "exercise": exercise,
        "student": xml_text(student),
        "score": f"{report.score:g}",
        "max_score": f"{report.max_score:g}",
        "check_max_score": f"{sum(check.max_points for check in report.checks):g}",
        "status": report.status,
        "isolation": report.isolation,
        "seed": report.seed,
        "grader_version": grader_version(),
        "checks_version": CHECKS_VERSION,
    }
    for check in report.checks:
        values.update(_check_properties(check))
    _properties(suite, values)
    if event:
        error = ET.SubElement(
            _case(suite, name, NOTEBOOK_CASE),
            "error",
            type=str(report.status),
            message=f"{report.status}: {student_words(report.status)}",
        )
        error.text = xml_text("\n".join(report.messages))
    for check in report.checks:
        case = _case(suite, name, check.name)
        if ungraded:
            ET.SubElement(case, "skipped", message=xml_text(check.message or "not run"))
        elif not check.passed:
            mistake = f", mistake {check.mistake}" if check.mistake else ""
            failure = ET.SubElement(
                case,
                "failure",
                type=xml_token(check.mistake or "", "wrong_result"),
                message=f"{check.points:g}/{check.max_points:g} points{mistake}",
            )
            failure.text = xml_text(check.message or "failed")
    notes = "" if event else "\n".join(report.messages)  # else the error's text: said once
    ET.SubElement(suite, "system-out").text = xml_text(notes)
    ET.SubElement(suite, "system-err")
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(report: GradeReport, path: Path | str, student: str = "anonymous") -> Path:
    path = Path(path)
    junit_tree(report, student).write(path, encoding="utf-8", xml_declaration=True)
    return path
