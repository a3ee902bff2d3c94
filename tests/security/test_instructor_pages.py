"""No student text acts in the instructor's formgrader or forges the feedback page (issue "Hidden
means hidden", items 6 and 7).

The pages are the real ones, driven in headless Chromium (tests/support/cdp.py) with MathJax
2.7 loaded as nbconvert's template loaded it online (tests/support/formgrader.py; our pages load
none, their math is MathML: the probe adds it, tests/support/page_probe.py), in the session of
tests/support/instructor_pages.py: formgrader's grading page
of mallory's submission, served by `jupyter server` on a copy of the hostile course
(tests/support/hostile_course.py) with the instructor logged in by the server's token, and
mallory's feedback page. Every link of the notebook is clicked; then nothing may have been
written into the course, no terminal opened, no request but GETs made by the page, no planted
script run; no student math may paint (rgb(1, 2, 3)), widen the page or draw a block; every text
that imitates the grader's score or checks lies in a bordered region labelled as the student's.
One formgrader server and one browser for the whole run (whatever the workers).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.built_once import built_once
from tests.support.chromium import chromium
from tests.support.formgrader import MATHJAX
from tests.support.hostile_course import HEADINGS, LINKS, SIZES, STYLES, build_course
from tests.support.instructor_pages import LABELS, PAGES, WIDTHS, Visit, instructor_session

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None, reason="Debian's chromium is required"),
    pytest.mark.skipif(not MATHJAX.is_dir(), reason="Debian's libjs-mathjax is required"),
]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "feedback-pages", build_course) / "course"


@pytest.fixture(scope="module")
def pages(course, tmp_path_factory) -> dict[str, Visit]:
    """The pages of tests/support/instructor_pages.py's session, once per test run: one
    formgrader server and one browser, whichever pytest-xdist workers the tests land on."""
    return instructor_session(tmp_path_factory, course).visits


def vector_marks(name: str, markers: list[str]) -> list[str]:
    """The markers a vector's scripts left (a vector may carry several links: NAME-...)."""
    return [m for m in markers if m == name or m.startswith(name + "-")]


# -- links --------------------------------------------------------------------------------------
def test_mathjax_typesets_the_pages_as_online(pages):
    """The probe works: MathJax 2.7 ran in both pages (neither loads it: their math is MathML,
    the release's own too; the probe adds it as an instructor's own setup might) and typeset
    the probe's control."""
    for name in PAGES:
        assert pages[name].mathjax.startswith("2.7"), name
        assert pages[name].control, f"MathJax typeset nothing in {name}"
        assert not pages[name].own_mathjax, f"{name} loads MathJax"
    assert pages["formgrader"].seen[1280].mathml > 0, "the instructor's prose is MathML"


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("vector", [v.name for v in LINKS])
def test_no_student_link_runs_script(pages, page, vector):
    found = pages[page]
    assert found.clicked, "the probe clicked the page's links"
    assert vector_marks(vector, found.after.markers) == [], f"{vector} ran in {page}"
    if page == "formgrader":
        written = [f for f in found.changed if f.startswith(f"pwned-{vector}")]
        assert written == [], f"{vector} wrote {written} into the course"


@pytest.mark.parametrize("page", PAGES)
def test_no_link_leaves_http_mailto_or_the_page(pages, page):
    for width in WIDTHS:
        assert pages[page].seen[width].links == [], "links to other schemes"
    assert pages[page].dialogs == []


def test_the_instructors_session_does_nothing_when_a_student_link_is_clicked(pages):
    """Formgrader: no file of the course written or changed, no terminal, no kernel session,
    no request but GETs from the page after the clicks."""
    found = pages["formgrader"]
    writes = [(r.method, r.url) for r in found.requests if r.method not in ("GET", "HEAD")]
    done = {
        "course files written": found.changed,
        "terminals": [t.get("name") for t in found.terminals],
        "kernel sessions": found.sessions,
        "requests": writes,
    }
    assert done == {key: [] for key in done}


# -- math ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("vector", [v.name for v in STYLES])
def test_no_student_math_carries_style(pages, page, vector):
    text = next(v.text for v in STYLES if v.name == vector)
    label = re.search(r"S-[a-z]+", text)
    assert label
    seen = pages[page].seen[1280]
    painted = [c for c in seen.coloured if label[0] in c["text"]]
    assert painted == [], f"{vector} painted in {page}: {painted}"
    assert seen.forged["ids"] == [], "\\cssId gave an element the id `forged`"
    assert seen.forged["reports"] <= 1, "\\class borrowed the report's class"


@pytest.mark.parametrize("page", PAGES)
def test_nothing_is_painted_with_the_students_colour(pages, page):
    assert pages[page].seen[1280].coloured == []


@pytest.mark.parametrize(
    "page, width", [("formgrader", 1280), ("feedback", 1280), ("feedback", 390)]
)
def test_student_math_cannot_widen_the_page_or_draw_a_block(pages, page, width):
    """Nothing sticks out of the page (a long line of the student's text scrolls inside its
    region). Formgrader at 1280 px: an instructor's screen (at 390 px its own layout of long
    code lines is wider than a phone); the student's text in it, at 390 px too, below."""
    seen = pages[page].seen[width]
    assert seen.width <= seen.view, f"the page is {seen.width} px wide at {width} px"
    assert seen.wide == [], f"elements sticking out of the screen: {seen.wide[:5]}"
    assert seen.tall == [], f"math taller than 300 px: {seen.tall}"


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("vector", [v.name for v in SIZES])
def test_each_size_payload_stays_small(pages, page, width, vector):
    """Each payload's paragraph: nothing in it wider than the screen, taller than 300 px, or
    in a font over twice the page's."""
    seen = pages[page].seen[width]
    name = "SIZE-" + vector.removeprefix("size-")
    found = [s for s in seen.sizes if s["name"] == name]
    assert found, f"{name} is not on the {page} page"
    for size in found:
        assert size["width"] <= seen.view, f"{name}: {size}"
        assert size["height"] <= 300, f"{name}: {size}"
        assert size["font"] <= 2.0, f"{name}: {size}"


# -- the student's text is the student's ---------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("vector", [v.name for v in HEADINGS])
def test_text_imitating_the_grader_is_labelled_as_the_students(pages, page, vector):
    name = "FORGED-" + vector.removeprefix("heading-")
    found = [h for h in pages[page].seen[1280].headings if h["name"] == name]
    assert found, f"{name} is not on the {page} page"
    for heading in found:
        assert heading["region"] in LABELS, f"{name} is not in a labelled region: {heading}"
        assert not heading["heading"], f"{name} is a heading of the page"
        assert not heading["checks"], f"{name} is in the check table"
        assert heading["size"] <= 1.25, f"{name} is {heading['size']:.2f} times the text size"
