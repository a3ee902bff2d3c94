"""Inline math on the feedback page renders whatever follows it (issue 21: `$L$인` and
`$d_{model} / h$차원` stayed raw LaTeX in Korean feedback: a Hangul particle is a word
character), while a price is still text."""

from __future__ import annotations

import pytest

from autograder.nbgrader_plugins.feedback import math_to_mathml


@pytest.mark.parametrize(
    "markdown",
    [
        "길이가 $L$인 문장",
        "각 헤드는 $d_{model} / h$차원이다",
        "행렬$Q$와 $K$의 곱",
        "the length $L$, then",
        "($x$)",
        "$$\\frac{QK^T}{\\sqrt{d_k}}$$",
    ],
)
def test_every_math_span_becomes_mathml(markdown):
    rendered = math_to_mathml(markdown)
    assert "<math" in rendered and "$" not in rendered, rendered


@pytest.mark.parametrize(
    "markdown", ["it costs $5 and $6 a month", "US$5", "`$L$` in code", "a \\$ sign $ alone"]
)
def test_prices_code_and_lone_dollars_stay_text(markdown):
    assert math_to_mathml(markdown) == markdown
