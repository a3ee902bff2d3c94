"""Every page is cleaned last (issue 17, item 5): whatever a student wrote, after markdown and
the offline math rendering, leaves only formatting markup. The whole pages are rendered in
Chromium by tests/integration/test_feedback_pages.py (the same payloads in mallory's written
answer)."""

from __future__ import annotations

import re

import pytest

from autograder.nbgrader_plugins.allow_list import clean_student_html
from autograder.nbgrader_plugins.feedback import RenderMathOffline
from autograder.nbgrader_plugins.mathml import math_to_mathml, neutralise_tex

OVERLAY = (
    r"$\style{position:fixed;top:0;left:0;width:100%;height:100%;background:white}"
    r"{\text{Score: 10.0 / 10.0 all checks passed}}$"
)
PAYLOADS = [
    OVERLAY,
    r"$\href{javascript:alert(1)}{x}$",
    r"$\class{attn-grade-report}{x}$",
    r"$\cssId{forged}{x}$",
    '<a href="javascript:alert(1)">x</a>',
    '<a href="data:text/html,<script>alert(1)</script>">x</a>',
    '<div style="position:fixed;top:0">x</div>',
    '<svg><a xlink:href="javascript:alert(1)">x</a></svg>',
    "<math><mtext><style>*{display:none}</style></mtext></math>",
    '<math><mstyle mathbackground="white" mathsize="900px"><mi>x</mi></mstyle></math>',
    "<img src=x onerror=alert(1)>",
    "<style>body{display:none}</style>",
    "<iframe src=//x></iframe><form action=//x><input></form><base href=//x>",
]
DANGER = re.compile(
    r"\bstyle=|\bhref=\"(?!https?:|mailto:|#)|javascript:|\bon\w+=|<(style|script|iframe|form|"
    r"img|base|object|embed)\b|\b(class|id|mathbackground|mathsize|mathcolor)=",
    re.I,
)


def final_html(markdown: str) -> str:
    """What a written answer becomes in the feedback page: math first, then the cleaner."""
    cell = type("Cell", (), {"cell_type": "markdown", "source": markdown})()
    RenderMathOffline().preprocess_cell(cell, {}, 0)
    return clean_student_html(cell.source)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives(payload):
    html = final_html(payload)
    assert DANGER.search(html) is None, html


def test_before_the_fix_math_carried_the_attributes():
    """The probe works: math rendered without the cleaner keeps \\style and \\href."""
    raw = math_to_mathml(OVERLAY) + math_to_mathml(r"$\href{javascript:alert(1)}{x}$")
    assert "position:fixed" in raw and "javascript:" in raw


def test_ordinary_math_and_formatting_still_render():
    html = final_html(
        r"Divide by $\sqrt{d_k}$: $$\mathrm{softmax}(QK^T/\sqrt{d_k})V$$ **bold** "
        '<a href="https://example.org">a link</a> <code>x</code>'
    )
    assert "<msqrt>" in html and 'display="block"' in html and "<mi>" in html
    assert '<a href="https://example.org">' in html and "<code>x</code>" in html


def test_tex_macros_that_reach_css_links_or_extensions_are_shown_as_text():
    source = r"$\style{color:red}{x} \href{javascript:x}{y} \require{html} \stylish$"
    assert neutralise_tex(source) == (
        r"$\text{style}{color:red}{x} \text{href}{javascript:x}{y} \text{require}{html} \stylish$"
    )


@pytest.mark.parametrize(
    "html",
    [
        '<a href="jav&#x61;script:alert(1)">a</a>',
        '<a href="java&#9;script:alert(1)">a</a>',
        '<a href=" JaVaScRiPt:alert(1)">a</a>',
        '<a href="data:text/html,x">a</a>',
        '<a href="vbscript:msgbox(1)">a</a>',
        '<a href="/api/contents/x">a relative link, into the server</a>',
        '<a href="java%09script:alert(1)">a</a>',
    ],
)
def test_links_keep_only_http_mailto_or_the_page(html):
    assert "href" not in clean_student_html(html)


@pytest.mark.parametrize(
    "mathml",
    [
        '<math><mfrac linethickness="60em"><mi>a</mi><mi>b</mi></mfrac></math>',
        '<math><mfrac linethickness="840px"><mi>a</mi><mi>b</mi></mfrac></math>',
        '<math><mfrac linethickness="5000%"><mi>a</mi><mi>b</mi></mfrac></math>',
        '<math><mstyle scriptlevel="-30"><mi>W</mi></mstyle></math>',
        '<math><mstyle scriptlevel="-1"><mi>W</mi></mstyle></math>',
    ],
)
def test_mathml_cannot_draw_a_block_or_grow_a_font(mathml):
    html = clean_student_html(mathml)
    assert "linethickness" not in html and "scriptlevel" not in html, html


def test_thin_lines_and_small_scripts_stay():
    html = clean_student_html(
        '<math><mfrac linethickness="0"><mi>a</mi><mi>b</mi></mfrac>'
        '<mfrac linethickness="0.1em"><mi>a</mi><mi>b</mi></mfrac>'
        '<mstyle scriptlevel="1"><mi>x</mi></mstyle></math>'
    )
    assert 'linethickness="0"' in html and 'linethickness="0.1em"' in html
    assert 'scriptlevel="1"' in html


@pytest.mark.parametrize(
    "source",
    [r"$&#92;style{color:red}{x}$", r"$&bsol;style{color:red}{x}$", r"$&#x5C;href{j}{x}$",
     r"$&#092;class{c}{x}$", r"$&amp;#92;cssId{f}{x}$", r"$&#92style{color:red}{x}$"],
)  # fmt: skip
def test_tex_macros_written_with_an_entity_backslash_are_shown_as_text(source):
    assert r"\text{" in neutralise_tex(source), neutralise_tex(source)
