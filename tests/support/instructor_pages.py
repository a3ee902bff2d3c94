"""One formgrader session on the hostile course (tests/support/hostile_course.py), shared by the
tests that read formgrader's grading page (tests/security/test_instructor_pages.py: no student
text acts or forges; tests/integration/test_page_accessibility.py: axe-core and the layout).

One `jupyter server` with formgrader, logged in by its token, once per test run (`built_once`),
whichever pytest-xdist workers the tests land on: in it, headless Chromium (tests/support/cdp.py)
looks at mallory's grading page and her feedback page and clicks every link; then axe-core
(tests/support/axe.py) audits the grading pages of mallory's ex2 (English) and alice's ex5
(Korean) at each width. What was seen is saved as JSON for every worker to read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.axe import Audit, Target, audit, missing
from tests.support.built_once import built_once
from tests.support.cdp import Browser, Page, Request
from tests.support.formgrader import CDN, MATHJAX, Formgrader, mathjax_route, start_formgrader
from tests.support.hostile_course import EX2, EX5, feedback
from tests.support.page_probe import (
    CONTROL_TYPESET,
    Seen,
    add_mathjax,
    click_every_link,
    look,
    typeset,
)
from tests.support.pages import REPORT_TABLE_LAYOUT

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WIDTHS = (1280, 390)
# the labels of a student's region: formgrader's (the instructor reads it), the feedback's
LABELS = [
    "Written by the student",
    "학생이 작성한 내용",
    "Your answer",
    "작성한 답안",
    "Your text",
    "직접 작성한 내용",
]
PAGES = ("formgrader", "feedback")
# where mallory's written answer starts on the page, in CSS px (the screenshots start there)
THE_ANSWER = """
(() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());)
    if (node.data.includes('My answer.'))
      return node.parentElement.getBoundingClientRect().top + window.scrollY - 120;
  return 0;
})()
"""


@dataclass
class Visit:
    """What one page showed and did (module doc)."""

    mathjax: str
    own_mathjax: bool  # the page loaded MathJax itself (else the probe added it)
    control: bool  # MathJax typeset the probe's own control
    seen: dict[int, Seen]  # width -> what the page showed before any click
    clicked: list[str]
    after: Seen  # after every link was clicked
    requests: list[Request]  # made by the page from the first click on
    navigations: list[str]  # aborted navigations away from the page
    dialogs: list[str]
    changed: list[str] = field(default_factory=list)  # course files added or changed
    terminals: list = field(default_factory=list)
    sessions: list = field(default_factory=list)


@dataclass
class Session:
    visits: dict[str, Visit]
    audits: list[Audit] | None  # None: axe is not installed (tests/support/axe.py)


def files(root: Path) -> dict[str, str]:
    """Every file of the course and its sha256 (the gradebook and nbgrader's log aside:
    formgrader keeps them open)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.startswith(("gradebook.db", ".nbgrader.log"))
    }


def visit(browser: Browser, page: Page, name: str) -> Visit:
    added = add_mathjax(page, CDN)
    version = typeset(page)
    control = bool(page.evaluate(CONTROL_TYPESET))
    seen = {}
    for width in WIDTHS:
        page.resize(width, 2400)
        seen[width] = look(page, LABELS)
        top = page.evaluate(THE_ANSWER)
        page.screenshot(ARTIFACTS / f"{name}-hostile-{width}px.png", top=top)
    page.resize(WIDTHS[0], 2400)
    first = len(browser.requests)
    clicked = click_every_link(page)
    return Visit(
        mathjax=version,
        own_mathjax=not added,
        control=control,
        seen=seen,
        clicked=clicked,
        after=look(page, LABELS),
        requests=browser.requests[first:],
        navigations=list(browser.navigations),
        dialogs=list(browser.dialogs),
    )


def audit_grading_pages(server: Formgrader) -> list[Audit] | None:
    """axe-core on formgrader's grading page of mallory's ex2 and alice's Korean ex5, each
    width; the Korean page's report table measured too (None: axe is not installed)."""
    if missing() is not None:
        return None
    login = f"{server.base}/formgrader?token={server.token}"
    targets = [
        Target(
            f"formgrader-{student}-{exercise[:3]}",
            f"{server.base}/formgrader/submissions/{server.submission_id(exercise, student)}/",
            login=login,
            probe=REPORT_TABLE_LAYOUT,
        )
        for exercise, student in ((EX2, "mallory"), (EX5, "alice"))
    ]
    return audit(targets, route=(CDN, MATHJAX))


def visit_both(course: Path, where: Path) -> Session:
    """Formgrader's grading page of mallory's submission (the instructor logged in) and
    mallory's feedback page, each looked at, then every link clicked; then the audits."""
    ARTIFACTS.mkdir(exist_ok=True)
    server = start_formgrader(course, where)
    visits = {}
    try:
        with Browser(routes=[(CDN, mathjax_route)]) as browser:
            # the instructor opens formgrader with the server's token (the login cookie)
            page = browser.page(f"{server.base}/formgrader?token={server.token}")
            submission = server.submission_id(EX2, "mallory")
            page.goto(f"{server.base}/formgrader/submissions/{submission}/?index=0")
            before = files(server.root)
            visits["formgrader"] = found = visit(browser, page, "formgrader")
            after = files(server.root)
            found.changed = sorted(
                k for k in after.keys() | before.keys() if after.get(k) != before.get(k)
            )
            found.terminals = list(server.api("/api/terminals"))
            found.sessions = list(server.api("/api/sessions"))
            page.close()
            browser.navigations.clear()
            browser.dialogs.clear()
            page = browser.page(feedback(course, "mallory", EX2).resolve().as_uri())
            visits["feedback"] = visit(browser, page, "feedback")
        audits = audit_grading_pages(server)
    finally:
        server.stop()
    return Session(visits, audits)


def read_visit(data: dict) -> Visit:
    data["seen"] = {int(width): Seen(**seen) for width, seen in data["seen"].items()}
    data["after"] = Seen(**data["after"])
    data["requests"] = [Request(**request) for request in data["requests"]]
    return Visit(**data)


def instructor_session(tmp_path_factory: pytest.TempPathFactory, course: Path) -> Session:
    """`visit_both`, once per test run (module doc)."""

    def run(where: Path) -> None:
        session = visit_both(course, where)
        visits = {name: dataclasses.asdict(found) for name, found in session.visits.items()}
        audits = None if session.audits is None else [dataclasses.asdict(a) for a in session.audits]
        (where / "session.json").write_text(json.dumps({"visits": visits, "audits": audits}))

    saved = json.loads(
        (built_once(tmp_path_factory, "instructor-pages", run) / "session.json").read_text()
    )
    audits = saved["audits"]
    return Session(
        {name: read_visit(data) for name, data in saved["visits"].items()},
        None if audits is None else [Audit(**found) for found in audits],
    )
