"""A student's markdown or raw cell as the autograded notebook keeps it (student_text.py): one
HTML block that formgrader's markdown renderer passes through untouched, labelled as the
student's, skipped by MathJax, with only safe links, clamped math and no headings. The pages
themselves, with MathJax running, are tests/security/test_instructor_pages.py."""

from __future__ import annotations

import re

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from traitlets.config import Config

from autograder.nbgrader_plugins import student_text
from autograder.nbgrader_plugins.sanitize import SanitizeStudentHTML
from autograder.nbgrader_plugins.student_text import block_body, student_block, student_html

JS = "javascript:alert(1)"


def body(markdown: str, kind: str = "markdown") -> str:
    found = block_body(student_block(markdown, kind, "en"))
    assert found is not None
    return found


@pytest.mark.parametrize(
    "markdown",
    [
        "one line",
        "a\n\nb\n\n\n\nc",
        "```\ncode\n\n\nmore code\n```",
        "<div>\n\n# not closed",
        "para\r\n\r\nwindows\rold mac",
        "    indented\n\n    code",
    ],
)
def test_a_block_is_one_html_block_that_markdown_leaves_alone(markdown):
    block = student_block(markdown, "markdown", "en")
    assert "\n" not in block.rstrip("\n") and "\r" not in block
    assert block.startswith('<div class="attn-student-text tex2jax_ignore mathjax_ignore"')
    assert markdown2html_mistune(block).strip() == block.strip(), "formgrader renders it as is"


@pytest.mark.parametrize(
    "markdown",
    [
        f"[a]({JS})",
        "[a](jav&#x61;script:alert(1))",
        "[a](java&#9;script:alert(1))",
        "[a](JaVaScRiPt:alert(1))",
        "[a](%6Aavascript:alert(1))",
        f"[a][1]\n\n[1]: {JS}",
        f"<{JS}>",
        "[a](data:text/html;base64,PHNjcmlwdD4=)",
        "[a](vbscript:msgbox(1))",
        "[a](/api/contents/x)",
        "[a](//evil.example/x)",
        f'<a href="{JS}">a</a>',
        '<a href=" &#106;avascript:alert(1)">a</a>',
        f'<svg><a xlink:href="{JS}"><text>a</text></a></svg>',
        "![a](x.png)",
    ],
)
def test_no_link_but_http_mailto_or_the_page_survives(markdown):
    html = body(markdown)
    assert re.findall(r"\b(?:href|src)=", html) == [], html
    assert "<a" not in html, "a link without its target is text"


def test_safe_links_stay():
    html = body("[w](https://example.org/x) [m](mailto:a@b.c) [t](#top) <http://example.org>")
    assert html.count("href=") == 4, html


@pytest.mark.parametrize(
    "markdown, word",
    [
        ("&#36;&#92;style{color:red}{x}&#36;", "style"),
        ("&#36;&bsol;style{color:red}{x}&#36;", "style"),
        ("&#36;&#x5c;href{javascript:alert(1)}{x}&#36;", "href"),
        ("&#36;&amp;#92;class{attn-grade-report}{x}&#36;", "class"),
        ("$\\cssId{forged}{x}$", "cssId"),
        ("&#36;&#92;require{html}&#36;", "require"),
    ],
)
def test_student_tex_becomes_mathml_with_its_macros_as_text(markdown, word):
    html = body(markdown)
    assert "<math" in html and f"<mtext>{word}</mtext>" in html, html
    assert re.search(r"<m\w+[^>]*\s(style|href|class|id)=", html) is None


@pytest.mark.parametrize(
    "markdown",
    [
        "$a\\hspace{5000em}b$",
        "$a\\kern5000em b\\mkern9000mu c$",
        "$\\rule{5000em}{1em}$",
        "$\\Huge W$",
        "$\\raise5000em{x}$",
        "$\\phantom{\\hspace{5000em}}z$",
        '<math><mfrac linethickness="60em"><mi>a</mi><mi>b</mi></mfrac></math>',
        '<math><mfrac linethickness="900px"><mi>a</mi><mi>b</mi></mfrac></math>',
        '<math><mstyle scriptlevel="-30"><mi>W</mi></mstyle></math>',
        '<math><mspace width="5000em"></mspace><mpadded voffset="90em"><mi>x</mi></mpadded></math>',
    ],
)
def test_math_cannot_size_or_move_things(markdown):
    html = body(markdown)
    sizes = re.findall(r'\b(width|height|depth|voffset|mathsize|minsize|maxsize)="', html)
    assert sizes == [], html
    assert not re.search(r'linethickness="(?!0")', html) and 'scriptlevel="-' not in html


def test_ordinary_math_and_thin_lines_stay():
    html = body("$\\binom{n}{k}$ $$\\frac{QK^T}{\\sqrt{d_k}}$$ `$not math$`")
    assert 'linethickness="0"' in html and "<msqrt>" in html and 'display="block"' in html
    assert "<code>$not math$</code>" in html


@pytest.mark.parametrize(
    "markdown", ["# Score: 10 / 10", "Score: 10 / 10\n===", "<h2>Score: 10 / 10</h2>"]
)
def test_headings_are_bold_paragraphs(markdown):
    html = body(markdown)
    assert "<p><strong>Score: 10 / 10</strong></p>" in html and "<h" not in html, html


def test_a_raw_cell_shows_its_text():
    html = body("<b>raw</b> $\\style{color:red}{x}$\n\nline", kind="raw")
    assert html == "<pre>&lt;b&gt;raw&lt;/b&gt; $\\style{color:red}{x}$&#10;&#10;line</pre>"


def test_the_label_speaks_the_notebooks_language():
    assert ">Written by the student<" in student_block("x", "markdown", "en")
    assert ">학생이 작성한 내용<" in student_block("x", "markdown", "ko")


def course_with_release(root, cells) -> Config:
    release = root / "release" / "ex" / "ex.ipynb"
    release.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), release)
    config = Config()
    config.CourseDirectory.root = str(root)
    return config


def test_cells_as_released_are_left_alone(tmp_path):
    """The instructor's text and an untouched answer stay as released (nbgrader grades an
    untouched answer zero by its checksum); what the student wrote or changed is rendered."""
    given = ["# Instructions with <b>html</b>", "YOUR ANSWER HERE"]
    config = course_with_release(tmp_path, [nbformat.v4.new_markdown_cell(s) for s in given])
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(given[0]),
            nbformat.v4.new_markdown_cell(given[1]),
            nbformat.v4.new_markdown_cell(given[0] + f" [x]({JS})"),
            nbformat.v4.new_raw_cell("<i>raw</i>", metadata={"raw_mimetype": "text/html"}),
        ]
    )
    resources = {"nbgrader": {"assignment": "ex", "notebook": "ex"}}
    notebook, _ = SanitizeStudentHTML(config=config).preprocess(notebook, resources)
    sources = [cell.source for cell in notebook.cells]
    assert sources[:2] == given
    assert block_body(sources[2]) is not None and "javascript" not in sources[2]
    raw = notebook.cells[3]
    assert raw.cell_type == "markdown" and "raw_mimetype" not in raw.metadata
    assert block_body(raw.source) == "<pre>&lt;i&gt;raw&lt;/i&gt;</pre>"


def test_without_a_release_every_cell_is_the_students(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("YOUR ANSWER HERE")])
    notebook, _ = SanitizeStudentHTML().preprocess(notebook, {})
    assert block_body(notebook.cells[0].source) == "<p>YOUR ANSWER HERE</p>"


@pytest.mark.parametrize(
    "source",
    [
        "$x$ " * 20_000,  # math spans
        "<b>" * 20_000,  # nesting
        "word " * 40_000,  # length
    ],
    ids=["math", "nesting", "length"],
)
def test_a_cell_too_large_to_render_is_shown_as_text(source):
    """Rendering and cleaning grow faster than linearly (10,000 math spans took 17 s at
    autograde): past the bounds the cell is its escaped text, cut."""
    body = student_html(source, "markdown")
    assert body.startswith("<pre>") and len(body) <= student_text.MAX_RENDERED + 200
    assert "<math" not in body and "<b>" not in body
