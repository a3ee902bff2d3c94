"""Every page is cleaned last (issue 17, item 5): whatever a student wrote, after markdown and
the offline math rendering, leaves only formatting markup. The whole pages are rendered in
Chromium by tests/integration/test_feedback_pages.py (the same payloads in mallory's written
answer)."""

from __future__ import annotations

import re

import pytest

from autograder.nbgrader_plugins.feedback import RenderMathOffline, math_to_mathml
from autograder.nbgrader_plugins.sanitize import clean_student_html, neutralise_tex

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
