"""JUnit XML for any CI (GitLab, Jenkins, ...): one testcase per check.

Points are testcase properties; a failed check's message (with the named mistake) is the
failure message. Messages can quote a student's values, so characters XML 1.0 cannot carry
are dropped before ElementTree escapes the rest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from autograder.core.results import GradeReport
from autograder.core.versions import CHECKS_VERSION, grader_version

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    """`text` as a string XML 1.0 can hold (control characters and lone surrogates dropped)."""
    return _NOT_XML.sub("", str(text))


def _properties(parent: ET.Element, values: dict[str, object]) -> None:
    properties = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=xml_text(value))


def junit_tree(report: GradeReport) -> ET.ElementTree:
    """The report as a `<testsuites>` document with one `<testsuite>` for the exercise."""
    exercise = report.exercise or "unknown"
    failed = sum(not check.passed for check in report.checks)
    suites = ET.Element("testsuites", name="attn-grade")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=exercise,
        tests=str(len(report.checks)),
        failures=str(failed),
        errors="0",
        time=f"{report.execution_time:.3f}",
    )
    _properties(
        suite,
        {
            "score": f"{report.score:g}",
            "max_score": f"{report.max_score:g}",
            "status": report.status,
            "isolation": report.isolation,
            "seed": report.seed,
            "grader_version": grader_version(),
            "checks_version": CHECKS_VERSION,
        },
    )
    for check in report.checks:
        case = ET.SubElement(suite, "testcase", classname=exercise, name=check.name, time="0")
        _properties(
            case,
            {
                "points": f"{check.points:g}",
                "max_points": f"{check.max_points:g}",
                "grade_id": check.grade_id,
                "mistake": check.mistake or "",
            },
        )
        if not check.passed:
            message = xml_text(check.message or "failed")
            failure = ET.SubElement(case, "failure", message=message, type=check.mistake or "")
            failure.text = message
    if report.messages:
        ET.SubElement(suite, "system-out").text = xml_text("\n".join(report.messages))
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(report: GradeReport, path: Path | str) -> Path:
    path = Path(path)
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)
    return path
