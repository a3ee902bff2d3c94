"""What a student or an instructor reads passes axe-core's WCAG 2 A and AA rules in Chromium, at
an instructor's width (1280 px) and a phone's (390 px), and loads nothing off the machine (issue
"A Korean course through Canvas and Moodle", items 9 and 11: 246 violations on two feedback pages
and the report; formgrader's Korean report table broke "통/과").

The pages are the hostile course's (tests/support/hostile_course.py): alice's Korean feedback of
ex5, mallory's English one of ex2 (her hostile text in it), the instructor's report of the
course, and formgrader's grading pages of both, served by the formgrader session of
tests/support/instructor_pages.py. axe-core and puppeteer-core come from npm
(tests/support/axe.py): skipped without them, failed under CI=true. Full-page screenshots of
every page at each width are kept in test-artifacts/axe/.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autograder.report.html import write_report
from tests.support.axe import WIDTHS, Audit, Target, audit, require_axe
from tests.support.built_once import built_once, computed_once
from tests.support.chromium import chromium
from tests.support.formgrader import MATHJAX
from tests.support.hostile_course import EX2, EX5, build_course, feedback
from tests.support.instructor_pages import instructor_session

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None, reason="Debian's chromium is required"),
    pytest.mark.skipif(not MATHJAX.is_dir(), reason="Debian's libjs-mathjax is required"),
]
FILES = ("feedback-ko", "feedback-en", "report")
GRADING = ("formgrader-mallory-ex2", "formgrader-alice-ex5")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "feedback-pages", build_course) / "course"


@pytest.fixture(scope="module")
def files(course, tmp_path_factory) -> dict[tuple[str, int], Audit]:
    """axe on the pages that are files (the feedback pages, the report), once per test run."""
    require_axe()

    def run() -> list[dict]:
        report = write_report(course, tmp_path_factory.mktemp("page-audits") / "report.html")
        pages = {
            "feedback-ko": feedback(course, "alice", EX5),
            "feedback-en": feedback(course, "mallory", EX2),
            "report": report,
        }
        found = audit([Target(name, path.resolve().as_uri()) for name, path in pages.items()])
        return [dataclasses.asdict(a) for a in found]

    audits = computed_once(tmp_path_factory, "page-audits", run)
    return {(a["name"], a["width"]): Audit(**a) for a in audits}


@pytest.fixture(scope="module")
def grading(course, tmp_path_factory) -> dict[tuple[str, int], Audit]:
    """axe on formgrader's grading pages, in the instructor-pages session."""
    require_axe()
    audits = instructor_session(tmp_path_factory, course).audits
    assert audits is not None, "the formgrader session ran without axe: run it again"
    return {(a.name, a.width): a for a in audits}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", FILES)
def test_feedback_and_report_pass_axe(files, name, width):
    found = files[(name, width)]
    assert found.summary() == [], f"{name} at {width} px: {len(found.summary())} violations"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", GRADING)
def test_formgraders_grading_page_passes_axe(grading, name, width):
    found = grading[(name, width)]
    assert found.summary() == [], f"{name} at {width} px: {len(found.summary())} violations"


def test_no_page_loads_anything_off_the_machine(files, grading):
    """The feedback page loaded MathJax from a CDN that it does not need; formgrader's too
    (its math is MathML now, and renders offline)."""
    offsite = {key: a.offsite for key, a in (files | grading).items() if a.offsite}
    assert offsite == {}
    assert {a.mathjax for a in (files | grading).values()} == {None}


@pytest.mark.parametrize("width", WIDTHS)
def test_formgraders_korean_report_table_keeps_whole_words(grading, width):
    """In formgrader the result column broke one Hangul syllable per line ("통/과") and the
    points wrapped ("0.5 /" over "0.5"): each cell is one line that fits its column, and the page
    does not scroll sideways."""
    layout = grading[("formgrader-alice-ex5", width)].probe
    assert isinstance(layout, dict) and layout["rows"], "the report table is on the page"
    assert any(row["text"].endswith("통과") for row in layout["rows"]), "the Korean table"
    broken = [row for row in layout["rows"] if row["lines"] != 1 or not row["fits"]]
    assert broken == [], f"cells broken or overflowing at {width} px: {broken[:4]}"
    assert layout["width"] <= layout["view"], "the page scrolls sideways"
