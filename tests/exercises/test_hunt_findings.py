"""What an independent white-box review of the checks found (each test failed before its fix):
a correct solution that lost points for some students, and realistic mistakes the checks never
drew inputs for. Catalogued mistakes found there are proven by test_mistakes.py instead."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, write_notebook

EX3 = "ex3_transformer_classifier"


def test_the_in_place_relu_keeps_every_rows_argmax():
    """The eval-mode check puts an in-place ReLU in front of an identity layer: every row's
    maximum must survive it, for every seed (a row of negatives became zeros, argmax 0)."""
    from autograder.exercises.ex3_transformer_classifier.checks import clear_positive_maxima

    for seed in range(2000):
        rng = np.random.default_rng(seed)
        n, classes = int(rng.integers(30, 60)), int(rng.integers(3, 6))
        X = clear_positive_maxima(rng, n, classes)
        assert np.array_equal(np.maximum(X, 0).argmax(axis=1), X.argmax(axis=1)), seed
        top = np.sort(X, axis=1)
        assert np.all(top[:, -1] > 0) and np.all(top[:, -1] - top[:, -2] >= 1.0 - 1e-6), seed


@pytest.mark.ex3
def test_the_reference_passes_the_eval_mode_check_for_the_student_it_failed(
    tmp_path, shared_sandbox
):
    path = write_notebook(source_notebook(EX3), tmp_path / f"{EX3}.ipynb")
    check = "test_evaluate_accuracy_eval_mode_without_gradients"
    # the two of 600 students the old inputs failed on this notebook (seeds depend on the code)
    for student in ("student85", "student279"):
        report = grade_notebook(path, student=student, only=[check], shared=shared_sandbox.get())
        assert all(c.passed for c in report.checks), (student, report.checks)


def test_every_student_draws_a_head_count_that_shows_a_hard_coded_four():
    """ex2's sentence_attention with num_heads hard-coded to 4 kept its points for the students
    whose drawn head count was 4 (about 1 in 6): no draw is 4 now, and every draw builds with
    4 heads too, so the mistake's weights (not an exception) name it."""
    from autograder.exercises.ex2_attention_heatmap.checks import sentence_sizes

    for seed in range(2000):
        length, heads, d_model = sentence_sizes(np.random.default_rng(seed))
        assert heads != 4 and d_model % heads == 0 and d_model % 4 == 0, seed
        assert len({length, heads, d_model}) == 3, seed


NO_KEEPDIMS_SOFTMAX = (
    "import numpy as np\ndef softmax(x, axis=-1):\n"
    "    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
    "    return exps / np.sum(exps, axis=axis)\n"
)


@pytest.mark.ex1
def test_an_error_names_a_mistake_only_when_its_message_agrees_too(tmp_path, shared_sandbox):
    """A softmax without keepdims makes the reference's attention raise a ValueError of
    broadcasting; a catalogued attention mistake raising another ValueError was named for it
    (by the exception's class alone)."""
    ex1 = "ex1_numpy_attention"
    notebook = source_notebook(ex1, replace={"softmax": NO_KEEPDIMS_SOFTMAX})
    path = write_notebook(notebook, tmp_path / f"{ex1}.ipynb")
    checks = ["test_sdpa_batched_inputs", "test_sdpa_bool_mask_blocks_positions"]
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    assert len(report.checks) == 2
    for result in report.checks:
        assert not result.passed and "ValueError" in result.message, result
        assert result.mistake is None, result
