"""The pages instructors and students open after autograding: the autograded notebook carries
the student's own plots (run in the sandbox, never copied), and no student-written HTML or
script runs in the feedback or in formgrader's rendering (checked in headless Chromium)."""

from __future__ import annotations

import base64
import html as html_module
import json
import re
import subprocess
from pathlib import Path

import pytest

from autograder.nbgrader_plugins.student_text import block_body
from tests.support.built_once import built_once
from tests.support.chromium import MARKER, chromium, dump_dom, screenshot_to
from tests.support.hostile_course import (
    EX2,
    EX5,
    FAKE_OUTPUT,
    PRINTED,
    autograded,
    build_course,
    cells_of,
    feedback,
)
from tests.support.pages import ENGLISH_CHROME, formgrader_exporter, page_text

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PNG = b"\x89PNG\r\n\x1a\n"
# measures, in the browser, whether a fixed column of the check table broke inside a word
LAYOUT_PROBE = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("table.attn-grade-checks tbody tr").forEach(function (row) {
    var line = parseFloat(getComputedStyle(row.cells[1]).lineHeight) || 20;
    [1, 2].forEach(function (i) {
      var cell = row.cells[i];
      var range = document.createRange();
      range.selectNodeContents(cell);
      out.push([i, range.getClientRects().length, cell.scrollWidth <= cell.clientWidth + 1]);
    });
  });
  var probe = document.createElement("pre");
  probe.id = "layout-probe";
  probe.textContent = JSON.stringify({rows: out, width: document.documentElement.scrollWidth,
                                      view: window.innerWidth});
  document.body.appendChild(probe);
});
</script>"""


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """tests/support/hostile_course.py's course, built once per run: the tests only read it."""
    return built_once(tmp_path_factory, "feedback-pages", build_course) / "course"


def pngs(cell: dict) -> list[bytes]:
    found = [o.get("data", {}).get("image/png") for o in cell.get("outputs", [])]
    return [base64.b64decode(data) for data in found if data]


@pytest.mark.parametrize(
    "exercise, figures",
    [(EX2, {"demo_one_head": 1, "demo_all_heads": 1}), (EX5, {"demo_training": 1})],
)
def test_autograded_notebook_shows_the_students_own_plots(course, exercise, figures):
    notebook = autograded(course, "alice", exercise)
    for grade_id, count in figures.items():
        images = pngs(cells_of(notebook, grade_id)[0])
        assert len(images) == count, f"{grade_id}: {len(images)} images"
        assert all(image.startswith(PNG) and len(image) > 2000 for image in images)
    assert FAKE_OUTPUT not in json.dumps(notebook), "an output was copied from the submission"
    html = feedback(course, "alice", exercise).read_text()
    assert html.count("data:image/png;base64,") == sum(figures.values())
    assert FAKE_OUTPUT not in html


def test_demo_cells_show_printed_numbers_from_the_sandbox(course):
    notebook = autograded(course, "alice", EX2)
    outputs = cells_of(notebook, "demo_strongest")[0]["outputs"]
    text = "".join("".join(o.get("text", "")) for o in outputs)
    assert "head 0: 'sat' attends most to" in text
    html = feedback(course, "alice", EX5).read_text()
    assert "held-out next-token accuracy:" in html, "ex5's printed numbers are in the feedback"


def formgrader_page(course: Path, student: str, exercise: str, out: Path) -> Path:
    """The submission as formgrader renders it (tests/support/pages.py)."""
    path = course / "autograded" / student / exercise / f"{exercise}.ipynb"
    resources = {
        "assignment_id": exercise,
        "notebook_id": exercise,
        "submission_id": "1",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": student,
        "last_name": "",
        "first_name": "",
        "notebook_path": str(path),
    }
    html, _ = formgrader_exporter(course).from_filename(str(path), resources=resources)
    out.write_text(html)
    return out


needs_chromium = pytest.mark.skipif(chromium() is None, reason="Debian's chromium is required")


@needs_chromium
def test_planted_script_runs_in_an_unsanitized_page(course, tmp_path):
    """The probe works: the same markup, rendered by nbconvert without our sanitizer, runs."""
    from nbconvert.exporters import HTMLExporter

    page = tmp_path / "raw.html"
    submitted = course / "submitted" / "mallory" / EX2 / f"{EX2}.ipynb"
    page.write_text(HTMLExporter(template_name="classic").from_filename(str(submitted))[0])
    dom = dump_dom(page, tmp_path / "profile")
    assert f'<{MARKER} data-vector="answer-img">' in dom


@needs_chromium
@pytest.mark.parametrize("page", ["feedback", "formgrader"])
def test_no_student_markup_runs_in_pages(course, tmp_path, page):
    if page == "feedback":
        path = feedback(course, "mallory", EX2)
    else:
        path = formgrader_page(course, "mallory", EX2, tmp_path / "formgrade.html")
    notebook = autograded(course, "mallory", EX2)
    shown = json.dumps(cells_of(notebook, "demo_tokens")[0]["outputs"])
    assert json.dumps(PRINTED)[1:-1] in shown, "the printed markup is in a demo cell's output"
    assert "ValueError" in "".join(notebook["cells"][0]["source"]), "the error is in the report"
    dom = dump_dom(path, tmp_path / "profile")
    assert f"<{MARKER}" not in dom, re.findall(rf"<{MARKER}[^>]*>", dom)
    assert "My answer." in dom, "the written answer is still shown"
    student_part = dom.split("My answer.", 1)[1]  # the page's own CSS comes before
    # as markup, never only as text (escaped HTML and neutralised TeX show the payload as text)
    # (formgrader's region of the student's text carries our own inline style, nothing else)
    # (its attributes in any order: a student's element has no class, the allow-list drops it)
    ours = r'<div\b[^>]*\sclass="attn-student-(text|label)\b[^"]*"[^>]*>'
    styled = re.sub(ours, "", student_part)
    assert not re.search(r"<[a-z][^>]*\sstyle=", styled, re.I), "a style attribute"
    assert not re.search(r"<[a-z][^>]*\shref=[\"']?\s*javascript:", student_part, re.I)
    assert not re.search(r"<[a-z][^>]*\sid=[\"']?forged", student_part, re.I)
    assert not re.search(r"<m\w+[^>]*\s(style|href|class|id)=", student_part), "MathML attributes"
    assert "<msqrt>" in student_part, "ordinary math still renders as MathML"
    # neither page loads MathJax (their math is MathML); should an instructor's setup add it,
    # every cell that holds TeX a student wrote is a rendered block that MathJax skips
    # (tests/security/test_instructor_pages.py adds MathJax to both pages)
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" and "\\style{" in source:
            assert block_body(source) is not None, source[:200]
    assert 'class="forged"' not in dom, "a message forged a heading"
    report = re.search(r'<div class="attn-grade-report[^"]*">(.*?)</div>', dom, re.S)
    assert report and "&lt;h1 class=forged&gt;Score: 10 / 10" in report[1], "shown as text"
    assert "</table>" in report[1], "the report's table was not closed by the message"
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"{page}-hostile.dom.html").write_text(dom)


def test_feedback_reads_well_offline(course):
    """Before hand grading the written answer says so; no internal words; math as MathML and
    no `$` left to typeset; the report is a table of check, result, points and message."""
    html = feedback(course, "alice", EX2).read_text()
    assert "not graded yet (2.0 points)" in html
    assert "Score: 0.0 / 2.0" not in html
    for jargon in ("isolation", "rlimits", "landlock", "namespaces", "seed:"):
        assert jargon not in html.lower(), jargon
    assert "<math" in html and "\\times" not in html, "math is MathML, not raw LaTeX"
    assert "<th>check</th><th>result</th><th>points</th><th>message</th>" in html
    assert "white-space: pre-wrap" in html


@needs_chromium
def test_feedback_screenshot(course, tmp_path):
    """Screenshots of feedback (a correct and a hostile submission), kept in test-artifacts/
    for a look; the page must fit its width (long lines wrap)."""
    for student in ("alice", "mallory"):
        page = feedback(course, student, EX2)
        shot = screenshot_to(page, tmp_path / student, ARTIFACTS / f"feedback-ex2-{student}.png")
        assert shot.read_bytes().startswith(PNG)


def test_pages_number_the_cells_as_the_notes_do(course):
    """The note about a failing cell names it "cell N"; the page shows "cell N" on that cell
    (its place in the submitted notebook; the report cell added in front is not counted)."""
    notebook = autograded(course, "mallory", EX2)
    assert 'class="attn-grade-report' in "".join(notebook["cells"][0]["source"])
    cells = notebook["cells"][1:]
    sources = ["".join(c["source"]) for c in cells]  # on disk, a list of lines
    number = 1 + next(i for i, source in enumerate(sources) if "class=forged" in source)
    written = 1 + next(
        i
        for i, c in enumerate(cells)
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer_pattern"
    )
    html = feedback(course, "mallory", EX2).read_text()
    assert f"<li>cell {number} raised a ValueError at line 1: " in html
    assert f'<div class="cell-number">cell {number}</div>' in html
    assert f'<span class="cell-number">cell {written}</span>' in html
    assert "cell cell" not in html


def test_a_korean_page_speaks_korean(course):
    """Issue 21: the feedback of a Korean exercise was English around the content, without a
    `lang`, with raw `$` where a Hangul particle followed math."""
    page = feedback(course, "alice", EX5)
    html = page.read_text()
    assert '<html lang="ko">' in html
    text = page_text(page, code=False)
    assert "자동 채점 결과" in text and "서술형 답안" in text
    assert [word for word in ENGLISH_CHROME if word in text] == []
    assert "$" not in text, "every math span rendered"
    assert '<html lang="en">' in feedback(course, "alice", EX2).read_text()


def test_sections_are_named_after_their_grade_cells(course):
    html = feedback(course, "alice", EX2).read_text()
    toc = html.split('<div id="toc">', 1)[1].split("</div>", 1)[0]
    assert "Checks of <code>MultiHeadAttention</code>" in toc
    assert "Written answer: <code>answer_pattern</code>" in toc
    assert toc.count("<li>") == 7, "one entry per grade cell"


def test_hand_grading_reads_as_it_stands(course):
    """A comment renders as the markdown it is (no literal tags); a hand grade given before a
    resubmission is shown under review, not as final."""
    html = feedback(course, "mallory", EX2).read_text()
    text = page_text(feedback(course, "mallory", EX2))
    assert "<strong>why</strong>" in html and "<p>" not in text and "**" not in text
    assert "under review: changed since it was graded (earlier grade 1.0 / 2.0)" in text
    assert "Score: 1.0 / 2.0" not in text


@needs_chromium
@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize(("exercise", "lang"), [(EX2, "en"), (EX5, "ko")])
def test_the_check_table_reads_at_every_width(course, tmp_path, exercise, lang, width):
    """At 1280 px and on a phone (390 px) the result and points columns never break inside a
    word and the page never scrolls sideways; screenshots of both languages are kept in
    test-artifacts/ (a CJK font is installed: no Korean character is a box)."""
    if lang == "ko":
        fonts = subprocess.run(["fc-list", ":lang=ko"], capture_output=True, text=True)
        assert fonts.stdout.strip(), "no Korean font: install fonts-noto-cjk"
    page = feedback(course, "alice", exercise)
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", LAYOUT_PROBE + "</body>"))
    dom = dump_dom(probed, tmp_path / "profile", size=f"{width},2400")
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe ran"
    layout = json.loads(html_module.unescape(found[1]))
    assert layout["rows"], "the check table is on the page"
    broken = [row for row in layout["rows"] if row[1] != 1 or not row[2]]
    assert not broken, f"a narrow column wrapped or overflowed at {width} px: {broken}"
    assert layout["width"] <= layout["view"], "the page scrolls sideways"
    name = f"feedback-{exercise[:3]}-{lang}-{width}px.png"
    shot = screenshot_to(page, tmp_path / "shot", ARTIFACTS / name, size=f"{width},2400")
    assert shot.read_bytes().startswith(PNG)


def test_formgraders_copy_of_the_report_is_spaced(course, tmp_path):
    """Issue 21: formgrader (bootstrap, not our page's style) showed "passed0.75 / 0.75": the
    report's table keeps bootstrap's table classes through formgrader's sanitizing."""
    html = formgrader_page(course, "alice", EX2, tmp_path / "formgrader.html").read_text()
    assert '<table class="attn-grade-checks table table-condensed">' in html
    assert "bootstrap" in html, "formgrader's page carries bootstrap, which spaces .table cells"
    assert '<td class="result passed">' in html
