"""Text a notebook chooses (its exceptions' messages and type names, the values it returns, its
cells' errors) reaches results.json, the feedback page and the instructor's report only on one
line per message, bounded each, and bounded in total per submission: exception text is a channel
out of the sandbox (an attacker carried 10,025 characters of hidden code out in messages)."""

from __future__ import annotations

import re

import pytest

from autograder.core import student_text, text
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook

EX1, EX2 = "ex1_numpy_attention", "ex2_attention_heatmap"
PAYLOAD = "SECRET-" + "x" * 5000 + "\nsecond line of the payload"
RAISE_LONG = f"def softmax(x, axis=-1):\n    raise ValueError({PAYLOAD!r})\n"
LONG_TYPE = (
    "Long = type('E' * 5000, (Exception,), {})\ndef softmax(x, axis=-1):\n    raise Long('short')\n"
)
LONG_VALUE = f"def tokenize(sentence):\n    return [{PAYLOAD!r}] * 3\n"
CELL_RAISES = f"raise RuntimeError({PAYLOAD!r})\n"
EVERYTHING_RAISES = [
    "".join(
        f"def {name}(*args, **kwargs):\n    raise ValueError({PAYLOAD!r})\n"
        for name in ("make_qkv", "softmax", "scaled_dot_product_attention", "max_abs_diff_vs_torch")
    ),
    *(f"raise ValueError('{n:02d}' + {PAYLOAD!r})\n" for n in range(12)),
]


def _graded(exercise, tmp_path, shared_sandbox, replace=None, cells=()):
    notebook = with_student_cells(source_notebook(exercise, replace=replace), *cells)
    path = write_notebook(notebook, tmp_path / f"{exercise}.ipynb")
    return grade_notebook(path, shared=shared_sandbox.get())


def _texts(report):
    return [check.message for check in report.checks] + list(report.messages)


@pytest.mark.ex1
@pytest.mark.parametrize(
    ("replace", "cells"),
    [
        pytest.param({"softmax": RAISE_LONG}, (), id="exception-message"),
        pytest.param({"softmax": LONG_TYPE}, (), id="exception-type-name"),
        pytest.param({}, (CELL_RAISES,), id="cell-error"),
    ],
)
def test_a_notebooks_text_is_one_bounded_line(replace, cells, tmp_path, shared_sandbox):
    report = _graded(EX1, tmp_path, shared_sandbox, replace, cells)
    texts = _texts(report)
    assert any("SECRET-" in t or "EEEE" in t for t in texts), "the text should be shown, bounded"
    for message in texts:
        assert "\n" not in message and "second line" not in message
        assert len(message) <= text.CHECK_MESSAGE
        assert max(map(len, re.findall("x+|E+", message)), default=0) <= student_text.QUOTE


@pytest.mark.ex2
def test_a_returned_value_is_quoted_bounded(tmp_path, shared_sandbox):
    report = _graded(EX2, tmp_path, shared_sandbox, {"tokenize": LONG_VALUE})
    quoted = [m for m in _texts(report) if "SECRET-" in m]
    assert quoted, "the wrong value should be quoted"
    assert all(len(m) <= text.CHECK_MESSAGE and "\n" not in m for m in quoted)


@pytest.mark.ex1
def test_a_submission_carries_a_bounded_total(tmp_path, shared_sandbox):
    """Every function and three cells raise the payload: what the report quotes of it adds up
    to the budget, and the grader's own words (check names, what was expected) stay."""
    report = _graded(EX1, tmp_path, shared_sandbox, cells=EVERYTHING_RAISES)
    texts = _texts(report)
    # each distinct quote once (a cell's error is quoted in its note and where it explains a
    # missing name: the same characters, no more information)
    quoted = sum(map(len, {run for t in texts for run in re.findall(r"\d*SECRET-x+", t)}))
    assert 3 * student_text.QUOTE < quoted <= student_text.TOTAL
    assert any(student_text.SPENT in t for t in texts)
    assert all(len(t) <= text.CHECK_MESSAGE for t in texts)
