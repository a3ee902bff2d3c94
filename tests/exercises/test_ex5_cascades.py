"""A fault of ex5's causal_mask is charged to causal_mask's own checks: a CausalTransformer built
on it (the reference's, which calls the notebook's causal_mask), train_lm and
next_token_accuracy keep their points (they run with the contract's mask in its place). An
independent review found a mask of NaN (ones * -inf: 0 * -inf is NaN on and below the diagonal)
charged 3.75 points more there. A model that builds a wrong mask itself still loses them
(test_mistakes.py: every catalogued CausalTransformer mistake is caught with the swap in place)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from autograder.grading.runner import grade_notebook
from tests.conftest import source_notebook, with_student_cells, write_notebook
from tests.exercises.test_fake_stubs import checks_of
from tests.support.cascades import failed_downstream

pytestmark = pytest.mark.ex5
EXERCISE = "ex5_causal_mask"
DOWNSTREAM = (
    "test_causal_transformer_output_shape",
    "test_causal_transformer_is_causal",
    "test_train_lm_reports_sample_weighted_loss",
    "test_train_lm_deterministic_for_a_seed",
    "test_train_lm_learns_the_sine",
    "test_next_token_accuracy_matches_predictions",
)
NAN_MASK = (
    "import torch\ndef causal_mask(seq_len):\n"
    "    return torch.triu(torch.ones(seq_len, seq_len), diagonal=1) * float('-inf')\n"
)


@pytest.mark.parametrize("mask", ["nan_below_the_diagonal", "reversed_triangle"])
def test_a_causal_mask_fault_costs_the_model_nothing(mask, tmp_path, shared_sandbox):
    if mask == "reversed_triangle":
        assert catalogue_for(EXERCISE)[mask].target == "causal_mask"
        failed = failed_downstream(EXERCISE, mask, list(DOWNSTREAM), tmp_path, shared_sandbox)
        assert not failed, failed
        return
    notebook = source_notebook(EXERCISE, replace={"causal_mask": NAN_MASK})
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    checks = [*DOWNSTREAM, "test_causal_mask_values"]
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert set(failed) == {"test_causal_mask_values"}, failed


def test_downstream_checks_exist():
    assert set(DOWNSTREAM) == set(
        checks_of(EXERCISE, "CausalTransformer")
        + checks_of(EXERCISE, "train_lm")
        + checks_of(EXERCISE, "next_token_accuracy")
    )


BOOL_MASK = (
    "import torch\ndef causal_mask(seq_len):\n"
    "    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)\n"
)
# A model written for its own (bool, True = blocked) mask: it raises on a float mask
BOOL_MODEL = """
_Built = CausalTransformer
class CausalTransformer(_Built):
    def forward(self, x):
        mask = causal_mask(x.shape[1])
        assert mask.dtype == torch.bool, "this model is written for a bool mask"
        h = self.token_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        return self.head(self.encoder(h, mask=mask))
"""


def test_a_mask_of_another_dtype_is_left_to_the_model_written_for_it(tmp_path, shared_sandbox):
    """The contract's mask is swapped in only for a float mask of wrong values (or one that
    raises): a bool mask is charged to causal_mask's dtype check, and the model that the
    notebook wrote for it keeps its points."""
    notebook = with_student_cells(
        source_notebook(EXERCISE, replace={"causal_mask": BOOL_MASK}), BOOL_MODEL
    )
    path = write_notebook(notebook, tmp_path / f"{EXERCISE}.ipynb")
    checks = [*DOWNSTREAM[:2], "test_causal_mask_shape_and_dtype"]
    report = grade_notebook(path, only=checks, shared=shared_sandbox.get())
    failed = {c.name: c.message for c in report.checks if not c.passed}
    assert set(failed) == {"test_causal_mask_shape_and_dtype"}, failed
