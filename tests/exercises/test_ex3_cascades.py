"""A fault of ex3's TransformerClassifier or PositionalEncoding costs a correct train_classifier
and evaluate_accuracy nothing, except where the classifier raises on the training data (then
there is nothing to train: those still cost the training check, a known cascade)."""

from __future__ import annotations

import pytest

from autograder.authoring.catalogue import catalogue_for
from tests.exercises.test_fake_stubs import checks_of
from tests.support.cascades import failed_downstream

pytestmark = pytest.mark.ex3
EXERCISE = "ex3_transformer_classifier"
UPSTREAM = ("TransformerClassifier", "PositionalEncoding")
DOWNSTREAM = ("train_classifier", "evaluate_accuracy")
# Models that raise on the training check's batches (a PE table sliced by the batch size; a mean
# over d_model that leaves the head the wrong width).
MODEL_RAISES = {"pe_seq_first_layout", "pooled_over_features"}


def downstream_checks() -> list[str]:
    return [check for name in DOWNSTREAM for check in checks_of(EXERCISE, name)]


@pytest.mark.parametrize(
    "mistake_id",
    [m.id for m in catalogue_for(EXERCISE) if m.target in UPSTREAM and m.id not in MODEL_RAISES],
)
def test_a_model_fault_costs_the_training_nothing(mistake_id, tmp_path, shared_sandbox):
    checks = downstream_checks()
    failed = failed_downstream(EXERCISE, mistake_id, checks, tmp_path, shared_sandbox)
    assert len(checks) >= 5 and not failed, failed
