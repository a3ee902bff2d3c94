"""authoring: what the catalogued mistakes return on a check's inputs is computed only when a
check looks at it (once an answer is wrong), on copies of the inputs taken at the call."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.authoring import call_checked, expect_raises
from autograder.authoring.catalogue import Catalogue, Raised, catalogue_for
from autograder.core.errors import CheckFailed, StudentError

EX = "ex1_numpy_attention"


class Notebook:
    """A submission whose `target` returns `answer` (or raises it, if it is an exception)."""

    def __init__(self, answer):
        self.answer = answer

    def call(self, target, *args, timeout=None, **kwargs):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.fixture
def runs(monkeypatch):
    """How many times the catalogue ran its mistakes."""
    counted = []
    original = Catalogue.outputs

    def outputs(self, target, *args, **kwargs):
        counted.append(target)
        return original(self, target, *args, **kwargs)

    monkeypatch.setattr(Catalogue, "outputs", outputs)
    return counted


def logits():
    return np.random.default_rng(0).standard_normal((3, 4))


def test_a_right_answer_runs_no_mistake(runs):
    x = logits()
    right = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    answer = call_checked(Notebook(right), catalogue_for(EX), "softmax", x)
    assert runs == []
    assert len(answer.candidates) > 0  # looked at: run now, once
    list(answer.candidates)
    assert runs == ["softmax"]


def test_what_the_mistakes_return_is_from_the_inputs_at_the_call(runs):
    x = logits()
    answer = call_checked(Notebook(np.zeros((3, 4))), catalogue_for(EX), "softmax", x)
    expected = catalogue_for(EX).outputs("softmax", x.copy())
    x[:] = 1e6  # the check's own array, changed after the call
    got = list(answer.candidates)
    returned = [pair for pair in expected if not isinstance(pair[1], Raised)]
    assert [m.id for m, _ in got] == [m.id for m, _ in returned]
    for (_, out), (_, want) in zip(got, returned, strict=True):
        np.testing.assert_array_equal(out, want)


def test_a_raised_error_is_matched_against_what_the_mistakes_raise(runs):
    error = StudentError("softmax", {"type": "NotImplementedError", "message": ""})
    with pytest.raises(CheckFailed):
        call_checked(Notebook(error), catalogue_for(EX), "softmax", logits())
    assert runs == ["softmax"]


def test_an_expected_error_runs_no_mistake(runs):
    raised = StudentError("score_variance", {"type": "ValueError", "message": "d_k > 0"})
    expect_raises(Notebook(raised), catalogue_for(EX), "score_variance", "ValueError", 0)
    assert runs == []
